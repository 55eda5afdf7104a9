// Package client is the learner's side of an instructor-led workshop: joining a class,
// queueing every check's report in the workspace, and sending the queue to the class server
// (internal/workshop/api is the wire contract).
//
// Nothing on a check's path touches the network: Enqueue writes the report to the queue
// (temporary file, fsync, rename) and a detached `mgpu-learn workshop flush --background`
// process sends it. Layout, under the workspace's state folder:
//
//	workshop/config.json        the class joined, with the learner's token (mode 0600)
//	workshop/queue/<t>-<id>.json reports waiting to be sent, oldest first
//	workshop/rejected/<...>.json reports the server refused (4xx but 429), with the reason
//	workshop/corrupt/...        queue files that could not be read, moved aside
//	workshop/sent.jsonl         what was sent (the newest few hundred)
//	workshop/retry.json         backoff after a network error, 5xx or 429
//	workshop/send.lock          held while reports are being sent
//	workshop/background.lock    held by the one background sender
//	workshop/flush.log          the background sender's messages
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// File and folder names inside the client's folder.
const (
	configName     = "config.json"
	queueDir       = "queue"
	rejectedDir    = "rejected"
	corruptDir     = "corrupt"
	sentName       = "sent.jsonl"
	retryName      = "retry.json"
	sendLockName   = "send.lock"
	backgroundLock = "background.lock"
	// LogName is the background sender's log, in the client's folder.
	LogName = "flush.log"
)

// RequestTimeout bounds one request to the class server.
const RequestTimeout = 20 * time.Second

// Client is a workspace's link to its class. Its methods are safe to call from several
// processes at once: the queue is a folder of files written atomically, and sending is
// serialized by a lock file.
type Client struct {
	dir string

	// HTTP sends the requests; nil uses a client with RequestTimeout and no redirects.
	HTTP *http.Client
	// UserAgent is sent with every request ("mgpu-learn/<version>").
	UserAgent string
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// New returns the client whose files live in dir (a workspace's StatePath("workshop")).
// Nothing is created until it is needed.
func New(dir string) *Client { return &Client{dir: dir} }

// Dir is the client's folder.
func (c *Client) Dir() string { return c.dir }

func (c *Client) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// ensureDir creates the private folder, with a .gitignore so that a workspace kept in git
// never carries the token or the queue.
func (c *Client) ensureDir() error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	gi := c.path(".gitignore")
	if _, err := os.Stat(gi); err != nil {
		_ = os.WriteFile(gi, []byte("# mgpu-learn workshop state: holds your class token\n*\n"), 0o600)
	}
	return nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return DefaultHTTP()
}

// DefaultHTTP is the HTTP client the package uses by default: RequestTimeout, and redirects
// not followed (a redirected POST would lose its body and its token).
func DefaultHTTP() *http.Client {
	return &http.Client{
		Timeout: RequestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// StatusError is an answer from the server other than 2xx.
type StatusError struct {
	Code    int    // the HTTP status
	Message string // the server's api.Error, or the start of its body
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
	Location   string // where a 3xx points
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("the class server answered %d %s", e.Code, http.StatusText(e.Code))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if e.Location != "" {
		msg += fmt.Sprintf(" (it redirects to %s: join again with that address)", e.Location)
	}
	return msg
}

// Permanent reports whether resending the same request cannot succeed: a 4xx other than 429.
func (e *StatusError) Permanent() bool {
	return e.Code >= 400 && e.Code < 500 && e.Code != http.StatusTooManyRequests
}

// do sends one request; body (when not nil) is JSON. out, when not nil, receives a 2xx
// answer's JSON. The token goes only in the Authorization header, never in a message.
func do(ctx context.Context, hc *http.Client, ua, method, url, token string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if ua != "" {
		req.Header.Set("User-Agent", ua)
	}
	if token != "" {
		req.Header.Set("Authorization", api.HeaderAuthPrefix+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return redact(err, token)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return redact(fmt.Errorf("reading the answer of %s: %w", url, err), token)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		se := &StatusError{Code: resp.StatusCode, Message: serverMessage(data)}
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			se.RetryAfter = parseRetryAfter(ra, time.Now())
		}
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			se.Location = resp.Header.Get("Location")
		}
		if token != "" {
			se.Message = strings.ReplaceAll(se.Message, token, "[token]")
		}
		return se
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("the class server's answer to %s is not what mgpu-learn expects (%v)", url, err)
		}
	}
	return nil
}

// serverMessage is the error text of a failed answer: api.Error's, else the body's first line.
func serverMessage(data []byte) string {
	var e api.Error
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return printable(cleanText(e.Error, 300))
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	return printable(cleanText(line, 200))
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	var secs int
	if _, err := fmt.Sscanf(v, "%d", &secs); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// redact removes the token from an error's text, should any layer have put it there.
func redact(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "[token]"))
}

// Join asks the class server at rawURL for a learner token with the class's join code, and
// saves the class in the workspace. It refuses when the workspace is already in a class.
func (c *Client) Join(ctx context.Context, rawURL, code, name string) (*Config, error) {
	// A config that cannot be read is replaced by the new one.
	if cfg, err := c.Config(); err == nil {
		return nil, fmt.Errorf("this workspace is already in class %q at %s: run 'mgpu-learn workshop leave' first", cfg.Class, cfg.URL)
	}
	u, err := NormalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	code = strings.TrimSpace(code)
	if code == "" {
		return nil, errors.New("the join code is empty")
	}
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, errors.New("the name is empty (pass --name)")
	}
	if n := len([]rune(name)); n > api.MaxNameRunes {
		return nil, fmt.Errorf("the name has %d characters, at most %d", n, api.MaxNameRunes)
	}
	body, err := json.Marshal(api.JoinRequest{Code: code, Name: name})
	if err != nil {
		return nil, err
	}
	var jr api.JoinResponse
	if err := do(ctx, c.httpClient(), c.UserAgent, http.MethodPost, u+api.PathJoin, "", body, &jr); err != nil {
		return nil, err
	}
	if jr.Token == "" {
		return nil, fmt.Errorf("the class server at %s gave no token", u)
	}
	cfg := &Config{URL: u, Class: jr.Class, Learner: jr.Learner, Name: jr.Name, Joined: c.now().UTC(), token: jr.Token}
	if cfg.Name == "" {
		cfg.Name = name
	}
	if err := c.saveConfig(cfg); err != nil {
		return nil, fmt.Errorf("saving the class in %s: %w", c.path(configName), err)
	}
	return cfg, nil
}

// Me asks the server what it holds of this learner.
func (c *Client) Me(ctx context.Context) (*api.MeResponse, error) {
	cfg, err := c.Config()
	if err != nil {
		return nil, err
	}
	var me api.MeResponse
	if err := do(ctx, c.httpClient(), c.UserAgent, http.MethodGet, cfg.URL+api.PathMe, cfg.token, nil, &me); err != nil {
		return nil, err
	}
	return &me, nil
}

// ClassStatus asks the class server at rawURL for the instructor's view of the class, with the
// instructor's token.
func ClassStatus(ctx context.Context, hc *http.Client, userAgent, rawURL, token string) (*api.ClassStatus, error) {
	u, err := NormalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, errors.New("no instructor token")
	}
	if hc == nil {
		hc = DefaultHTTP()
	}
	var cs api.ClassStatus
	if err := do(ctx, hc, userAgent, http.MethodGet, u+api.PathClassStatus, token, nil, &cs); err != nil {
		return nil, err
	}
	return &cs, nil
}
