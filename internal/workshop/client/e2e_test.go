package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/workshop/server"
)

// classServer serves the real class server on addr ("127.0.0.1:0" for any port) until stop.
func classServer(t *testing.T, srv *server.Server, addr string) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			hs.Close()
		}
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// The learner's client against the real class server and a SQLite file: join, a check's
// report, an idempotent resend, a server that goes away and comes back, a refused report,
// and the instructor's view.
func TestEndToEndWithClassServer(t *testing.T) {
	srv, err := server.Open(server.Config{DB: filepath.Join(t.TempDir(), "class.db"), Exercises: []string{"module0/sum", "module0/timing"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	class, err := srv.CreateClass("gpu-101")
	if err != nil {
		t.Fatal(err)
	}
	url, stop := classServer(t, srv, "127.0.0.1:0")
	ctx := context.Background()

	c := New(filepath.Join(t.TempDir(), "workshop"))
	cfg, err := c.Join(ctx, url, strings.ToLower(class.JoinCode), "Ada Lovelace")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Class != "gpu-101" || cfg.Name != "Ada Lovelace" || cfg.Learner == "" {
		t.Errorf("joined %v", cfg)
	}
	if _, err := New(t.TempDir()).Join(ctx, url, "ZZZZ-ZZZZ", "Eve"); err == nil {
		t.Error("a wrong join code was accepted")
	}

	report := func(verdict, stage string) *checker.Report {
		return &checker.Report{Exercise: "module0/sum", Target: "yours", Verdict: verdict, Stage: stage, Fault: "you",
			Headline: "rank 1: 12 of 4096 elements wrong", Started: time.Now().Add(-2 * time.Second), Duration: checker.Seconds(time.Second),
			Values: []checker.Value{{Name: "sum", Value: 42, Unit: ""}}}
	}
	first := NewSubmission(report("failed", "correctness"), 1, MachineOf(nil, func(string) string { return "1" }), "test")
	if _, _, err := c.Enqueue(first); err != nil {
		t.Fatal(err)
	}
	res, err := c.Flush(ctx, FlushOptions{})
	if err != nil || res.Sent != 1 || res.Err != nil {
		t.Fatalf("first flush: %+v %v", res, err)
	}
	// A resend (the answer was lost, say) is stored once.
	if _, _, err := c.Enqueue(first); err != nil {
		t.Fatal(err)
	}
	res, err = c.Flush(ctx, FlushOptions{})
	if err != nil || res.Duplicates != 1 || res.Sent != 0 {
		t.Fatalf("resend: %+v %v", res, err)
	}
	me, err := c.Me(ctx)
	if err != nil || len(me.Submissions) != 1 || me.Submissions[0].ID != first.ID || me.Submissions[0].Verdict != "failed" {
		t.Fatalf("me after the resend: %+v %v", me, err)
	}

	// The server goes away: reports stay queued, with the error and a backoff.
	stop()
	if _, _, err := c.Enqueue(NewSubmission(report("failed", "correctness"), 2, MachineOf(nil, nil), "test")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Enqueue(NewSubmission(report("passed", "performance"), 3, MachineOf(nil, nil), "test")); err != nil {
		t.Fatal(err)
	}
	res, err = c.Flush(ctx, FlushOptions{})
	if err != nil || res.Err == nil || res.Left != 2 || c.Pending() != 2 {
		t.Fatalf("flush with the server down: %+v %v", res, err)
	}
	if _, err := c.Me(ctx); err == nil {
		t.Error("Me with the server down: no error")
	}
	// It comes back at the same address: the queue goes, oldest first.
	classServer(t, srv, strings.TrimPrefix(url, "http://")) // stopped by its cleanup
	res, err = c.Flush(ctx, FlushOptions{Force: true})
	if err != nil || res.Sent != 2 || res.Left != 0 || res.Err != nil {
		t.Fatalf("flush with the server back: %+v %v", res, err)
	}
	if c.Retry().Failures != 0 {
		t.Errorf("backoff kept: %+v", c.Retry())
	}
	me, err = c.Me(ctx)
	if err != nil || len(me.Submissions) != 3 {
		t.Fatalf("me: %+v %v", me, err)
	}

	// A report the server's validation refuses goes to rejected/ with the server's reason.
	bad := NewSubmission(report("failed", "correctness"), 4, MachineOf(nil, nil), "test")
	bad.Exercise = "not-an-exercise"
	if _, _, err := c.Enqueue(bad); err != nil {
		t.Fatal(err)
	}
	res, err = c.Flush(ctx, FlushOptions{})
	if err != nil || len(res.Rejected) != 1 || res.Rejected[0].Status != http.StatusBadRequest || !strings.Contains(res.Rejected[0].Reason, "exercise") {
		t.Fatalf("a bad report: %+v %v", res, err)
	}
	if c.Pending() != 0 {
		t.Errorf("%d pending", c.Pending())
	}

	// The instructor's view: the learner's row, and only the instructor token opens it.
	cs, err := ClassStatus(ctx, nil, "test", url, class.InstructorToken)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Learners) != 1 || cs.Learners[0].Name != "Ada Lovelace" {
		t.Fatalf("class status %+v", cs)
	}
	if cell := cs.Learners[0].Cells["module0/sum"]; cell.State != "passed" || cell.Attempts < 3 {
		t.Errorf("cell %+v", cell)
	}
	var out strings.Builder
	WriteClass(&out, cs, 120, time.Now())
	if !strings.Contains(out.String(), "Ada Lovelace") || !strings.Contains(out.String(), "✓") {
		t.Errorf("grid:\n%s", out.String())
	}
	cfgFile, _ := c.Config()
	if _, err := ClassStatus(ctx, nil, "test", url, cfgFile.token); err == nil {
		t.Error("a learner token opened the class status")
	} else {
		var se *StatusError
		if !errors.As(err, &se) || se.Code/100 != 4 {
			t.Errorf("learner token on class status: %v", err)
		}
		noTokenIn(t, err.Error(), cfgFile.token)
	}
}

func noTokenIn(t *testing.T, text, token string) {
	t.Helper()
	if strings.Contains(text, token) {
		t.Errorf("message shows the token: %s", text)
	}
}
