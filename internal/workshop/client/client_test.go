package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// joined returns a client of a fresh folder that has joined the fake's class.
func joined(t *testing.T, f *fake) *Client {
	t.Helper()
	c := New(filepath.Join(t.TempDir(), ".mgpu-learn", "workshop"))
	if _, err := c.Join(context.Background(), f.srv.URL+"/", "JOIN-CODE", "Ada"); err != nil {
		t.Fatal(err)
	}
	return c
}

func sub(exercise, verdict string) api.Submission {
	return api.Submission{ID: NewID(), Exercise: exercise, Target: "yours", Verdict: verdict, Stage: "correctness", Attempt: 1}
}

func enqueue(t *testing.T, c *Client, s api.Submission) string {
	t.Helper()
	name, notes, err := c.Enqueue(s)
	if err != nil || len(notes) > 0 {
		t.Fatalf("Enqueue: %v %v", err, notes)
	}
	return name
}

// noToken fails the test when text holds the learner's token.
func noToken(t *testing.T, what, text string) {
	t.Helper()
	if strings.Contains(text, testToken) {
		t.Errorf("%s shows the token: %s", what, text)
	}
}

func TestJoinSavesPrivateConfig(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	cfg, err := c.Config()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.URL != f.srv.URL || cfg.Class != "gpu-101" || cfg.Name != "Ada" || cfg.Learner != "l1" || cfg.Joined.IsZero() {
		t.Errorf("config %+v", cfg)
	}
	noToken(t, "a printed Config", fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg))
	fi, err := os.Stat(filepath.Join(c.Dir(), configName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("config.json mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(filepath.Join(c.Dir(), configName))
	if !strings.Contains(string(data), testToken) {
		t.Errorf("config.json lacks the token: %s", data)
	}
	if gi, err := os.ReadFile(filepath.Join(c.Dir(), ".gitignore")); err != nil || !strings.Contains(string(gi), "*") {
		t.Errorf(".gitignore: %q %v", gi, err)
	}
	// A second join is refused: the learner leaves first.
	if _, err := c.Join(context.Background(), f.srv.URL, "JOIN-CODE", "Ada"); err == nil || !strings.Contains(err.Error(), "leave") {
		t.Errorf("second join: %v", err)
	}
	// A loosened config is made private again when read.
	os.Chmod(filepath.Join(c.Dir(), configName), 0o644)
	c.Config()
	if fi, _ := os.Stat(filepath.Join(c.Dir(), configName)); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after reading a 0644 config: %v", fi.Mode().Perm())
	}
}

func TestJoinRefused(t *testing.T) {
	f := newFake(t)
	c := New(t.TempDir())
	_, err := c.Join(context.Background(), f.srv.URL, "WRONG", "Ada")
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 403 || !se.Permanent() || !strings.Contains(err.Error(), "unknown join code") {
		t.Fatalf("join with a wrong code: %v", err)
	}
	if _, err := c.Config(); !errors.Is(err, ErrNotJoined) {
		t.Errorf("after a refused join: %v", err)
	}
	for _, bad := range []struct{ url, name string }{{"ftp://x", "Ada"}, {f.srv.URL, ""}, {f.srv.URL, strings.Repeat("n", api.MaxNameRunes+1)}} {
		if _, err := c.Join(context.Background(), bad.url, "JOIN-CODE", bad.name); err == nil {
			t.Errorf("join %q as %q: no error", bad.url, bad.name)
		}
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://class.example.org:8443/": "https://class.example.org:8443",
		" http://127.0.0.1:8080 ":         "http://127.0.0.1:8080",
		"https://example.org/workshop//":  "https://example.org/workshop",
		"https://user:pw@example.org":     "",
		"example.org":                     "",
		"https://example.org/?code=1":     "",
		"file:///etc/passwd":              "",
		"https://":                        "",
	} {
		got, err := NormalizeURL(in)
		if want == "" {
			if err == nil {
				t.Errorf("NormalizeURL(%q) = %q, want an error", in, got)
			}
			if err != nil && strings.Contains(err.Error(), "pw") {
				t.Errorf("NormalizeURL(%q): the error shows the password: %v", in, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestCorruptConfig(t *testing.T) {
	c := New(t.TempDir())
	os.MkdirAll(c.Dir(), 0o700)
	name := filepath.Join(c.Dir(), configName)
	for _, content := range []string{`{"schema": 1, "url": `, `{"schema": 1, "url": "https://x"}`, `{"schema": 9, "url": "https://x", "token": "t"}`, `{"schema": 1, "url": "gopher://x", "token": "t"}`} {
		os.WriteFile(name, []byte(content), 0o600)
		_, err := c.Config()
		if err == nil || errors.Is(err, ErrNotJoined) || !strings.Contains(err.Error(), name) {
			t.Errorf("config %s: error %v, want one naming %s", content, err, name)
		}
		if _, err := c.Flush(context.Background(), FlushOptions{}); err == nil {
			t.Errorf("Flush with config %s: no error", content)
		}
	}
}

// A check's enqueue never dials: the client's transport fails the test if it is used.
func TestEnqueueDoesNoNetworkIO(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	var dials atomic.Int32
	c.HTTP = &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("no dialing allowed")
	}}}
	name := enqueue(t, c, sub("module0/sum", "failed"))
	if dials.Load() != 0 {
		t.Fatalf("Enqueue dialed %d times", dials.Load())
	}
	if _, posts := f.count(); posts != 0 {
		t.Fatalf("the server got %d posts", posts)
	}
	fi, err := os.Stat(name)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("queue file %s: %v %v", name, fi, err)
	}
	var it Item
	data, _ := os.ReadFile(name)
	if err := json.Unmarshal(data, &it); err != nil || it.Submission.Exercise != "module0/sum" || it.Queued.IsZero() {
		t.Errorf("queued item %s: %v", data, err)
	}
	if c.Pending() != 1 {
		t.Errorf("Pending = %d", c.Pending())
	}
	// No temporary file is left behind.
	ents, _ := os.ReadDir(filepath.Dir(name))
	if len(ents) != 1 {
		t.Errorf("queue folder holds %d entries", len(ents))
	}
}

func TestFlushSendsOnceAndResendsAreIdempotent(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	a, b := sub("module0/sum", "failed"), sub("module0/sum", "passed")
	b.Code = []api.File{{Name: "sum.c", Content: "int main(void) { return 0; } // <tag> & \"q\""}}
	enqueue(t, c, a)
	enqueue(t, c, b)
	res, err := c.Flush(context.Background(), FlushOptions{})
	if err != nil || res.Err != nil || res.Sent != 2 || res.Left != 0 {
		t.Fatalf("Flush: %+v %v", res, err)
	}
	if c.Pending() != 0 {
		t.Errorf("%d still queued", c.Pending())
	}
	if got := f.stored[b.ID].Code; len(got) != 1 || got[0].Content != b.Code[0].Content {
		t.Errorf("shared code arrived as %+v", got)
	}
	// The same submission queued again (a resend after a lost answer) is stored once.
	enqueue(t, c, a)
	res, err = c.Flush(context.Background(), FlushOptions{})
	if err != nil || res.Duplicates != 1 || res.Sent != 0 {
		t.Fatalf("resend: %+v %v", res, err)
	}
	if stored, posts := f.count(); stored != 2 || posts != 3 {
		t.Errorf("server stored %d from %d posts, want 2 from 3", stored, posts)
	}
	l, err := c.Local()
	if err != nil || len(l.Sent) != 3 || !l.Sent[2].Duplicate || !l.Sent[1].Code || len(l.Queued) != 0 {
		t.Errorf("Local: %+v %v", l, err)
	}
	// Nothing queued: a flush sends nothing.
	if res, err := c.Flush(context.Background(), FlushOptions{}); err != nil || res.Sent+res.Duplicates != 0 {
		t.Errorf("empty flush: %+v %v", res, err)
	}
}

func TestFlushRejects4xxForGood(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	f.set(func(f *fake) { f.reject["module9/gone"] = 422 })
	bad, good := sub("module9/gone", "failed"), sub("module0/sum", "passed")
	enqueue(t, c, bad)
	enqueue(t, c, good)
	res, err := c.Flush(context.Background(), FlushOptions{})
	if err != nil || res.Sent != 1 || len(res.Rejected) != 1 || res.Err != nil {
		t.Fatalf("Flush: %+v %v", res, err)
	}
	r := res.Rejected[0]
	if r.Status != 422 || !strings.Contains(r.Reason, "not part of this class") || r.Submission.ID != bad.ID {
		t.Errorf("rejected %+v", r)
	}
	if _, err := os.Stat(r.File); err != nil || filepath.Base(filepath.Dir(r.File)) != rejectedDir {
		t.Errorf("rejected file %s: %v", r.File, err)
	}
	// Never sent again.
	_, posts := f.count()
	c.Flush(context.Background(), FlushOptions{Force: true})
	if _, again := f.count(); again != posts {
		t.Errorf("a rejected report was sent again")
	}
	l, _ := c.Local()
	if len(l.Rejected) != 1 || l.Rejected[0].Reason != r.Reason {
		t.Errorf("Local rejected: %+v", l.Rejected)
	}
}

func TestFlushKeepsReportsOnTransientErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		code  int
		retry string
		least time.Duration
	}{
		{"5xx", 503, "", MinBackoff * 4 / 5},
		{"429", 429, "120", 120 * time.Second},
		{"network", 0, "", MinBackoff * 4 / 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			c := joined(t, f)
			now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			c.Now = func() time.Time { return now }
			f.set(func(f *fake) { f.fail, f.retryHdr = tc.code, tc.retry })
			if tc.code == 0 {
				f.srv.Close()
			}
			enqueue(t, c, sub("module0/sum", "failed"))
			enqueue(t, c, sub("module0/sum", "passed"))
			res, err := c.Flush(context.Background(), FlushOptions{})
			if err != nil || res.Err == nil || res.Left != 2 || res.Sent != 0 || len(res.Rejected) != 0 {
				t.Fatalf("Flush: %+v %v", res, err)
			}
			if c.Pending() != 2 {
				t.Errorf("%d queued, want 2", c.Pending())
			}
			if d := res.NextTry.Sub(now); d < tc.least {
				t.Errorf("next try in %v, want at least %v", d, tc.least)
			}
			rt := c.Retry()
			if rt.Failures != 1 || rt.LastError == "" || !rt.NextTry.Equal(res.NextTry) {
				t.Errorf("retry %+v", rt)
			}
			// Within the backoff a background flush tries nothing; a forced one does.
			_, before := f.count()
			res, err = c.Flush(context.Background(), FlushOptions{})
			if _, after := f.count(); err != nil || res.Deferred.IsZero() || after != before {
				t.Errorf("flush within the backoff: %+v %v (posts %d → %d)", res, err, before, after)
			}
			res, _ = c.Flush(context.Background(), FlushOptions{Force: true})
			if res.Err == nil || c.Retry().Failures != 2 {
				t.Errorf("forced flush: %+v retry %+v", res, c.Retry())
			}
			if tc.code == 0 {
				return
			}
			// The server recovers: everything goes, and the backoff is cleared.
			f.set(func(f *fake) { f.fail = 0 })
			now = now.Add(time.Hour)
			res, err = c.Flush(context.Background(), FlushOptions{})
			if err != nil || res.Sent != 2 || res.Left != 0 {
				t.Fatalf("after recovery: %+v %v", res, err)
			}
			if rt := c.Retry(); rt.Failures != 0 || rt.LastError != "" {
				t.Errorf("backoff kept after success: %+v", rt)
			}
		})
	}
}

func TestBackoffGrowsAndIsCapped(t *testing.T) {
	prev := time.Duration(0)
	for n := 1; n <= 12; n++ {
		d := backoff(n)
		if d <= 0 || d > MaxBackoff {
			t.Fatalf("backoff(%d) = %v", n, d)
		}
		if n <= 4 && d < prev {
			t.Errorf("backoff(%d) = %v < backoff(%d) = %v", n, d, n-1, prev)
		}
		prev = d
	}
	if backoff(20) < MaxBackoff*4/5 {
		t.Errorf("backoff(20) = %v", backoff(20))
	}
}

func TestTokenStaysOutOfMessages(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	f.set(func(f *fake) { f.fail, f.echoAuth = 500, true })
	enqueue(t, c, sub("module0/sum", "failed"))
	res, err := c.Flush(context.Background(), FlushOptions{})
	if err != nil || res.Err == nil {
		t.Fatalf("Flush: %+v %v", res, err)
	}
	noToken(t, "the flush error", res.Err.Error())
	noToken(t, "retry.json", c.Retry().LastError)
	var log strings.Builder
	c.Background(context.Background(), &log, 0)
	noToken(t, "the background log", log.String())
	l, _ := c.Local()
	var out strings.Builder
	cfg, _ := c.Config()
	WriteLearner(&out, cfg, l, nil, errors.New("x"), time.Now())
	noToken(t, "the learner's status", out.String())
	for _, dir := range []string{queueDir, rejectedDir} {
		ents, _ := os.ReadDir(filepath.Join(c.Dir(), dir))
		for _, e := range ents {
			data, _ := os.ReadFile(filepath.Join(c.Dir(), dir, e.Name()))
			noToken(t, e.Name(), string(data))
		}
	}
}

func TestCorruptQueueItemIsMovedAside(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	good := sub("module0/sum", "passed")
	enqueue(t, c, good)
	qdir := filepath.Join(c.Dir(), queueDir)
	bad := filepath.Join(qdir, "00000000T000000.000000000Z-0123456789abcdef0123456789abcdef.json")
	os.WriteFile(bad, []byte(`{"queued": "2026-01-01T00:00:00Z", "submission": {`), 0o600)
	mismatch := filepath.Join(qdir, "00000000T000000.000000001Z-ffffffffffffffffffffffffffffffff.json")
	os.WriteFile(mismatch, []byte(`{"submission": {"id": "0123456789abcdef0123456789abcdee", "exercise": "module0/sum"}}`), 0o600)
	os.WriteFile(filepath.Join(qdir, ".tmp-half-written"), []byte("{"), 0o600)

	res, err := c.Flush(context.Background(), FlushOptions{})
	if err != nil || res.Sent != 1 || len(res.Warnings) != 2 {
		t.Fatalf("Flush: %+v %v", res, err)
	}
	for i, name := range []string{bad, mismatch} {
		moved := filepath.Join(c.Dir(), corruptDir, filepath.Base(name))
		if _, err := os.Stat(moved); err != nil {
			t.Errorf("%s was not moved to %s", name, moved)
		}
		if w := res.Warnings[i]; !strings.Contains(w, name) || !strings.Contains(w, moved) {
			t.Errorf("warning %q does not name %s and %s", w, name, moved)
		}
	}
	l, err := c.Local()
	if err != nil || len(l.Corrupt) != 2 || len(l.Queued) != 0 {
		t.Errorf("Local: %+v %v", l, err)
	}
}

func TestBackground(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	enqueue(t, c, sub("module0/sum", "failed"))
	enqueue(t, c, sub("module0/sum", "passed"))

	// Another sender holds the lock: this one leaves at once, sending nothing.
	unlock, ok, err := lockFile(context.Background(), filepath.Join(c.Dir(), backgroundLock), 0)
	if err != nil || !ok {
		t.Fatal(err)
	}
	if !c.SenderRunning() {
		t.Error("SenderRunning is false while the lock is held")
	}
	var log strings.Builder
	if err := c.Background(context.Background(), &log, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, posts := f.count(); posts != 0 {
		t.Errorf("a second sender posted %d reports", posts)
	}
	unlock()
	if c.SenderRunning() {
		t.Error("SenderRunning is true after the lock was let go")
	}

	if err := c.Background(context.Background(), &log, time.Minute); err != nil {
		t.Fatal(err)
	}
	if stored, _ := f.count(); stored != 2 || c.Pending() != 0 {
		t.Errorf("background sent %d, %d left; log:\n%s", stored, c.Pending(), log.String())
	}
	if !strings.Contains(log.String(), "sent 2") {
		t.Errorf("log: %s", log.String())
	}

	// Server down: with nothing left of its time to linger, it gives up and keeps the report.
	f.set(func(f *fake) { f.fail = 502 })
	enqueue(t, c, sub("module0/sum", "failed"))
	log.Reset()
	if err := c.Background(context.Background(), &log, 0); err != nil {
		t.Fatal(err)
	}
	if c.Pending() != 1 || !strings.Contains(log.String(), "502") || !strings.Contains(log.String(), "giving up") {
		t.Errorf("pending %d, log:\n%s", c.Pending(), log.String())
	}
	// Not joined: nothing to do.
	if err := New(t.TempDir()).Background(context.Background(), &log, time.Minute); err != nil {
		t.Errorf("Background without a class: %v", err)
	}
}

func TestMe(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	enqueue(t, c, sub("module0/sum", "failed"))
	c.Flush(context.Background(), FlushOptions{})
	me, err := c.Me(context.Background())
	if err != nil || len(me.Submissions) != 1 || me.Submissions[0].Exercise != "module0/sum" {
		t.Fatalf("Me: %+v %v", me, err)
	}
	if _, err := New(t.TempDir()).Me(context.Background()); !errors.Is(err, ErrNotJoined) {
		t.Errorf("Me without a class: %v", err)
	}
}

func TestForget(t *testing.T) {
	f := newFake(t)
	c := joined(t, f)
	enqueue(t, c, sub("module0/sum", "failed"))
	if err := c.Forget(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
		t.Errorf("folder still there: %v", err)
	}
	if _, err := c.Config(); !errors.Is(err, ErrNotJoined) {
		t.Errorf("after Forget: %v", err)
	}
	if err := c.Forget(context.Background(), time.Second); err != nil {
		t.Errorf("Forget twice: %v", err)
	}
}

func TestNewSubmission(t *testing.T) {
	r := &checker.Report{
		Exercise: "module0/peer-copy", Target: "yours", Verdict: "failed", Stage: "performance", Fault: "you",
		Headline: strings.Repeat("é", api.MaxTextRunes+10) + "\x00",
		Started:  time.Date(2026, 3, 1, 10, 0, 0, 0, time.FixedZone("X", 3600)), Duration: checker.Seconds(1500 * time.Millisecond),
		Perf: &checker.PerfResult{Metric: "busbw", Unit: "GB/s", Case: "256MiB", Ratio: checker.Float(math.NaN()),
			Cases: []checker.PerfCase{{Case: "4KiB", Yours: 1, Baseline: 2}, {Case: "256MiB", Yours: 350, Baseline: 390}}},
		Values: []checker.Value{{Rank: 0, Name: "bw", Value: 10, Unit: "GB/s"}, {Rank: 1, Name: "bw", Value: 11, Unit: "GB/s"}, {Rank: 1, Name: "nan", Value: checker.Float(math.Inf(1))}},
	}
	s := NewSubmission(r, 3, api.Machine{GPUs: 4}, "v1.2.3")
	if !ValidID(s.ID) || s.ID == NewSubmission(r, 3, api.Machine{}, "").ID {
		t.Errorf("id %q", s.ID)
	}
	if s.Exercise != r.Exercise || s.Verdict != "failed" || s.Stage != "performance" || s.Fault != "you" || s.Attempt != 3 || s.Version != "v1.2.3" || s.Machine.GPUs != 4 {
		t.Errorf("submission %+v", s)
	}
	if n := len([]rune(s.Headline)); n != api.MaxTextRunes || strings.ContainsRune(s.Headline, 0) {
		t.Errorf("headline of %d runes", n)
	}
	if s.Duration != 1.5 || s.Started.Location() != time.UTC {
		t.Errorf("duration %v started %v", s.Duration, s.Started)
	}
	if p := s.Perf; p == nil || p.Yours != 350 || p.Baseline != 390 || p.Ratio != 0 || p.Metric != "busbw" || p.Case != "256MiB" {
		t.Errorf("perf %+v", s.Perf)
	}
	if len(s.Figures) != 2 || s.Figures[0].Name != "bw (rank 0)" || s.Figures[1].Value != 11 {
		t.Errorf("figures %+v", s.Figures)
	}
	if len(s.Code) != 0 {
		t.Error("code without opting in")
	}
	if _, err := encode(&s); err != nil {
		t.Errorf("encode: %v", err)
	}
	many := &checker.Report{Exercise: "module0/x", Verdict: "passed"}
	for i := 0; i < api.MaxFigures+5; i++ {
		many.Values = append(many.Values, checker.Value{Name: fmt.Sprint("v", i), Value: 1})
	}
	if s := NewSubmission(many, 1, api.Machine{}, ""); len(s.Figures) != api.MaxFigures || s.Target != "yours" || s.Figures[0].Name != "v0" {
		t.Errorf("%d figures, target %q", len(s.Figures), s.Target)
	}
}

func TestMachineOf(t *testing.T) {
	f := &probe.Facts{Hostname: "node17.secret", Driver: "580.65", NVCC: &probe.Tool{Version: "13.0"},
		GPUs: []probe.GPU{{Name: "NVIDIA H200", UUID: "GPU-123"}, {Name: "NVIDIA H200"}, {Name: "NVIDIA H100"}}}
	env := map[string]string{"SLURM_JOB_ID": "42"}
	m := MachineOf(f, func(k string) string { return env[k] })
	if m.GPUs != 3 || m.GPU != "NVIDIA H200, NVIDIA H100" || m.Driver != "580.65" || m.CUDA != "13.0" || !m.Slurm {
		t.Errorf("machine %+v", m)
	}
	data, _ := json.Marshal(m)
	if strings.Contains(string(data), "node17") || strings.Contains(string(data), "GPU-123") {
		t.Errorf("machine summary identifies the host: %s", data)
	}
	if m := MachineOf(nil, func(string) string { return "" }); m.GPUs != 0 || m.Slurm {
		t.Errorf("no facts: %+v", m)
	}
}

func TestReadCodeAndBodyLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	files := map[string]string{
		"b.cu":    write("b.cu", "__global__ void k() {}\n"),
		"a.cu":    write("a.cu", "bad \xff byte"),
		"big.cu":  write("big.cu", strings.Repeat("x", api.MaxCodeBytes)),
		"gone.cu": filepath.Join(dir, "gone.cu"),
	}
	code, skipped := ReadCode(files)
	if len(code) != 2 || code[0].Name != "a.cu" || code[1].Name != "b.cu" || code[0].Content != "bad \uFFFD byte" {
		t.Errorf("code %+v", code)
	}
	if len(skipped) != 2 || !strings.Contains(strings.Join(skipped, "|"), "big.cu") || !strings.Contains(strings.Join(skipped, "|"), "gone.cu (missing)") {
		t.Errorf("skipped %q", skipped)
	}

	// Code within the limit whose JSON form passes the body limit (every quote escaped) is
	// dropped from the report, with a note; the report itself is still queued.
	f := newFake(t)
	c := joined(t, f)
	s := sub("module0/sum", "failed")
	s.Code = []api.File{{Name: "a.cu", Content: "int a;"}, {Name: "quotes.cu", Content: strings.Repeat(`"`, api.MaxCodeBytes-10)}}
	name, notes, err := c.Enqueue(s)
	if err != nil || len(notes) != 1 || !strings.Contains(notes[0], "quotes.cu") {
		t.Fatalf("Enqueue: %v %q", err, notes)
	}
	data, _ := os.ReadFile(name)
	var it Item
	json.Unmarshal(data, &it)
	if len(it.Submission.Code) != 1 || it.Submission.Code[0].Name != "a.cu" {
		t.Errorf("queued code %+v", it.Submission.Code)
	}
	// Code made of < and > is not HTML-escaped, so 128 KiB of templates fit.
	s = sub("module0/sum", "failed")
	s.Code = []api.File{{Name: "t.cu", Content: strings.Repeat("<>", api.MaxCodeBytes/2)}}
	if _, notes, err := c.Enqueue(s); err != nil || len(notes) != 0 {
		t.Errorf("templates: %v %q", err, notes)
	}
	if res, err := c.Flush(context.Background(), FlushOptions{}); err != nil || res.Sent != 2 {
		t.Errorf("Flush: %+v %v", res, err)
	}
}

func TestStartDetached(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "out.log")
	if err := StartDetached("/bin/sh", []string{"sh", "-c", "echo started $$; sleep 0.1; echo done"}, dir, logPath); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _ := os.ReadFile(logPath)
		if strings.Contains(string(data), "done") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the detached process wrote %q", data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fi, _ := os.Stat(logPath); fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v", fi.Mode().Perm())
	}
}
