package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// clock is a test clock that moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testEnv is a server on a real SQLite file in a temporary folder, behind a loopback listener.
type testEnv struct {
	t     testing.TB
	s     *Server
	ts    *httptest.Server
	clock *clock
	class ClassInfo
	db    string
}

func newEnv(t testing.TB, cfg Config) *testEnv {
	t.Helper()
	e := &testEnv{t: t, clock: newClock()}
	if cfg.DB == "" {
		cfg.DB = filepath.Join(t.TempDir(), "class.db")
	}
	if cfg.Now == nil {
		cfg.Now = e.clock.Now
	}
	e.db = cfg.DB
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.s = s
	e.class, err = s.CreateClass("GPU day")
	if err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		s.EndStreams()
		e.ts.Close()
		s.Close()
	})
	return e
}

// do sends a request; body may be nil, a string (sent as is) or a value (sent as JSON).
func (e *testEnv) do(method, path, token string, body any) (int, []byte, http.Header) {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header
}

var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// join adds a learner and returns the join response.
func (e *testEnv) join(name string) api.JoinResponse {
	e.t.Helper()
	code, body, _ := e.do("POST", api.PathJoin, "", api.JoinRequest{Code: e.class.JoinCode, Name: name})
	if code != http.StatusCreated {
		e.t.Fatalf("join %q: %d %s", name, code, body)
	}
	var jr api.JoinResponse
	if err := json.Unmarshal(body, &jr); err != nil {
		e.t.Fatal(err)
	}
	return jr
}

// post sends a submission and fails the test unless it is stored (201) or a duplicate (200).
func (e *testEnv) post(token string, sub api.Submission) api.SubmitResponse {
	e.t.Helper()
	code, body, _ := e.do("POST", api.PathReports, token, sub)
	if code != http.StatusCreated && code != http.StatusOK {
		e.t.Fatalf("post %s %s: %d %s", sub.Exercise, sub.Verdict, code, body)
	}
	var sr api.SubmitResponse
	if err := json.Unmarshal(body, &sr); err != nil {
		e.t.Fatal(err)
	}
	return sr
}

// count returns the rows of a table.
func (e *testEnv) count(table string) int {
	e.t.Helper()
	var n int
	if err := e.s.st.r.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *testEnv) status() api.ClassStatus {
	e.t.Helper()
	code, body, _ := e.do("GET", api.PathClassStatus, e.class.InstructorToken, nil)
	if code != http.StatusOK {
		e.t.Fatalf("status: %d %s", code, body)
	}
	var st api.ClassStatus
	if err := json.Unmarshal(body, &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

func randomID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// report builds a valid submission of the learner's own code.
func report(exercise, verdict, stage string, ratio float64) api.Submission {
	s := api.Submission{
		ID: randomID(), Exercise: exercise, Target: "yours", Verdict: verdict, Stage: stage,
		Headline: exercise + " " + verdict, Attempt: 1, Started: time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC),
		Duration: 3.5, Machine: api.Machine{GPUs: 4, GPU: "NVIDIA H200"}, Version: "test",
	}
	if verdict != "passed" {
		s.Fault = "you"
	}
	if ratio > 0 {
		s.Perf = &api.Perf{Metric: "busbw", Unit: "GB/s", Case: "256MiB", Ratio: ratio, Yours: 300 * ratio, Baseline: 300}
	}
	return s
}
