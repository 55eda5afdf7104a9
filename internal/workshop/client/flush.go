package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/filelock"
	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Backoff after failed sends: the first retry after MinBackoff, doubling up to MaxBackoff.
const (
	MinBackoff = 10 * time.Second
	MaxBackoff = 5 * time.Minute
	// maxRetryAfter caps a server's Retry-After.
	maxRetryAfter = 30 * time.Minute
)

// FlushOptions say how Flush behaves.
type FlushOptions struct {
	// Force sends even while the backoff of an earlier failure runs (a learner's own flush).
	Force bool
	// LockWait is how long to wait for another process that is sending; 0: do not wait.
	LockWait time.Duration
}

// FlushResult is what one Flush did.
type FlushResult struct {
	Sent       int        // stored by the server now
	Duplicates int        // the server had them already (resends)
	Rejected   []Rejected // refused by the server, moved to rejected/
	Left       int        // still queued
	// Busy: another process was sending and held the lock; nothing was done.
	Busy bool
	// Deferred: the backoff of an earlier failure runs until then; nothing was tried.
	Deferred time.Time
	// Err is the network error, 5xx or 429 that stopped the round (the items stay queued).
	Err error
	// NextTry is when the background sender tries again after Err.
	NextTry  time.Time
	Warnings []string
}

// Flush sends the queued reports, oldest first. A report the server stores (or had stored)
// leaves the queue; one it refuses with a 4xx other than 429 goes to rejected/ with the
// reason; a network error, a 5xx or a 429 stops the round, keeps the reports and sets the
// backoff. The error is for what stops any sending: no class joined, a config that cannot be
// read, a file that cannot be written.
func (c *Client) Flush(ctx context.Context, o FlushOptions) (*FlushResult, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	res := &FlushResult{}
	unlock, ok, err := lockFile(ctx, c.path(sendLockName), o.LockWait)
	if err != nil {
		return nil, err
	}
	if !ok {
		res.Busy = true
		names, _ := c.queueFiles()
		res.Left = len(names)
		return res, nil
	}
	defer unlock()

	names, err := c.queueFiles()
	if err != nil {
		return nil, err
	}
	retry := c.readRetry()
	if !o.Force && len(names) > 0 && c.now().Before(retry.NextTry) {
		res.Deferred = retry.NextTry
		res.Left = len(names)
		return res, nil
	}
	hc := c.httpClient()
	for i, name := range names {
		it, warn := c.readItem(name)
		if warn != "" {
			res.Warnings = append(res.Warnings, warn)
		}
		if it == nil {
			continue
		}
		sub := it.Submission
		body, err := encode(&sub)
		if err != nil {
			res.Warnings = append(res.Warnings, c.moveAside(name, fmt.Sprintf("not encodable (%v)", err)))
			continue
		}
		var sr api.SubmitResponse
		err = do(ctx, hc, c.UserAgent, http.MethodPost, cfg.URL+api.PathReports, cfg.token, body, &sr)
		var se *StatusError
		switch {
		case err == nil:
			if rerr := os.Remove(name); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
				return res, fmt.Errorf("sent %s but could not take it out of the queue: %w", name, rerr)
			}
			syncDir(c.path(queueDir))
			if sr.Duplicate {
				res.Duplicates++
			} else {
				res.Sent++
			}
			if lerr := c.logSent(Sent{ID: sub.ID, Exercise: sub.Exercise, Verdict: sub.Verdict, Attempt: sub.Attempt, Code: len(sub.Code) > 0, Sent: c.now().UTC(), Duplicate: sr.Duplicate}); lerr != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("could not log the sent report in %s: %v", c.path(sentName), lerr))
			}
		case errors.As(err, &se) && se.Permanent():
			r, rerr := c.reject(it, se.Code, se.Error())
			if rerr != nil {
				return res, fmt.Errorf("the server refused %s (%v) and it could not be moved to %s: %w", name, se, c.path(rejectedDir), rerr)
			}
			res.Rejected = append(res.Rejected, *r)
		default:
			// Unreachable, overloaded or failing: keep this one and the rest for later.
			res.Err = err
			res.Left = len(names) - i
			retry.Failures++
			retry.LastTry = c.now().UTC()
			retry.LastError = err.Error()
			delay := backoff(retry.Failures)
			if errors.As(err, &se) && se.RetryAfter > delay {
				delay = min(se.RetryAfter, maxRetryAfter)
			}
			retry.NextTry = retry.LastTry.Add(delay)
			res.NextTry = retry.NextTry
			if werr := c.writeRetry(retry); werr != nil {
				res.Warnings = append(res.Warnings, fmt.Sprintf("could not save the backoff in %s: %v", c.path(retryName), werr))
			}
			return res, nil
		}
	}
	if retry.Failures > 0 || !retry.NextTry.IsZero() {
		if err := os.Remove(c.path(retryName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			res.Warnings = append(res.Warnings, fmt.Sprintf("could not clear the backoff in %s: %v", c.path(retryName), err))
		}
	}
	return res, nil
}

// backoff is the wait after n failures in a row, with a fifth of jitter so that a class's
// learners do not all come back at once.
func backoff(n int) time.Duration {
	d := MinBackoff
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxBackoff)
	return d - time.Duration(rand.Int64N(int64(d/5)+1))
}

// Background is the detached sender's loop: it sends the queue, waits out the backoff after a
// failure and tries again, and returns when the queue is empty or after linger. Only one runs
// per workspace (background.lock); a second returns at once. Messages go to logw; they never
// carry the token.
func (c *Client) Background(ctx context.Context, logw io.Writer, linger time.Duration) error {
	unlock, ok, err := lockFile(ctx, c.path(backgroundLock), 0)
	if err != nil || !ok {
		return err
	}
	start := c.now()
	logf := func(format string, args ...any) {
		fmt.Fprintf(logw, "%s %s\n", c.now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	}
	for {
		res, err := c.Flush(ctx, FlushOptions{LockWait: time.Minute})
		if errors.Is(err, ErrNotJoined) {
			unlock()
			return nil
		}
		if err != nil {
			unlock()
			logf("stopped: %v", err)
			return err
		}
		for _, w := range res.Warnings {
			logf("warning: %s", w)
		}
		for _, r := range res.Rejected {
			logf("rejected %s (%s): %s", r.Submission.Exercise, r.File, r.Reason)
		}
		if res.Sent+res.Duplicates > 0 {
			logf("sent %d report(s), %d already on the server", res.Sent, res.Duplicates)
		}
		var until time.Time
		switch {
		case res.Busy:
			unlock()
			return nil
		case res.Err != nil:
			logf("%d report(s) stay queued: %v; next try at %s", res.Left, res.Err, res.NextTry.Format(time.RFC3339))
			until = res.NextTry
		case !res.Deferred.IsZero():
			until = res.Deferred
		}
		if until.IsZero() {
			if names, _ := c.queueFiles(); len(names) > 0 {
				continue // reports arrived during the round
			}
			// Let go, then look again: a check that queued a report just now saw the lock held
			// and started no sender, so this one must not miss its report.
			unlock()
			if names, _ := c.queueFiles(); len(names) == 0 {
				return nil
			}
			if unlock, ok, err = lockFile(ctx, c.path(backgroundLock), 0); err != nil || !ok {
				return err
			}
			continue
		}
		wait := until.Sub(c.now())
		if c.now().Add(wait).Sub(start) > linger {
			logf("giving up for now; the next check or 'mgpu-learn workshop flush' sends the queue")
			unlock()
			return nil
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				unlock()
				return nil
			case <-t.C:
			}
		}
	}
}

// SenderRunning reports whether a background sender holds this workspace's lock, so that a
// check need not start another.
func (c *Client) SenderRunning() bool {
	unlock, ok, err := lockFile(context.Background(), c.path(backgroundLock), 0)
	if err != nil {
		return false
	}
	if ok {
		unlock()
		return false
	}
	return true
}

// StartDetached starts exe with args (args[0] is the program's name) in its own session, with
// its output appended to logPath, and does not wait for it: the caller may exit at once. The
// process is reaped in the background should the caller live on.
func StartDetached(exe string, args []string, dir, logPath string) error {
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > 256<<10 {
		_ = os.Rename(logPath, logPath+".old")
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        args,
		Dir:         dir,
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// lockFile takes an exclusive flock on name, waiting up to wait (0: one try). ok is false when
// another process holds it.
var lockFile = filelock.Lock

// Forget removes the class from the workspace: the config with its token, the queue, the
// rejected reports and the log. It waits up to wait for a sender to finish its round.
func (c *Client) Forget(ctx context.Context, wait time.Duration) error {
	if _, err := os.Stat(c.dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	unlock, ok, err := lockFile(ctx, c.path(sendLockName), wait)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("another mgpu-learn is sending this workspace's reports; try again in a minute")
	}
	defer unlock()
	// The config goes first: a sender that wakes up meanwhile finds no class and stops.
	if err := os.Remove(c.path(configName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.RemoveAll(c.dir)
}

// Pending is how many reports are queued (without reading them).
func (c *Client) Pending() int {
	names, _ := c.queueFiles()
	return len(names)
}

// Retry is the backoff of the last failed send (zero when the last send worked).
func (c *Client) Retry() Retry { return c.readRetry() }
