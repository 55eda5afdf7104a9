package tui

import (
	"bytes"
	"context"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/mgpu-learn/mgpu-learn/checker"
)

// TestProgram runs the model in a real bubbletea program (teatest's virtual terminal): the
// real command loop, ticks and the check's channel, from the map to a result and out.
func TestProgram(t *testing.T) {
	h := newHarness(t, 80, 24)
	fake := &fakeChecker{clock: &clock{t: t0}, events: runEvents(), report: failingReport()}
	m := New(h.m.s.d)
	m.s.home = h.m.s.home
	m.s.check = func(ctx context.Context, tg checker.Target, ev func(checker.Event)) *checker.Report {
		return fake.check(ctx, tg, ev)
	}
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(80, 24))
	waitFor := func(what string) {
		t.Helper()
		teatest.WaitFor(t, tm.Output(), func(b []byte) bool { return bytes.Contains(b, []byte(what)) },
			teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
	}
	waitFor("course map")
	for _, k := range []string{"down", "down", "enter"} {
		tm.Send(keyMsg(k))
	}
	waitFor("your file:")
	tm.Send(keyMsg("c"))
	waitFor("Whose fault: your code")
	tm.Send(keyMsg("esc"))
	tm.Send(keyMsg("esc"))
	waitFor("course map")
	tm.Send(keyMsg("q"))
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(Model)
	if final.screen != screenMap || final.job != nil {
		t.Fatalf("final screen %d, job %v", final.screen, final.job)
	}
	if fake.callCount() != 1 {
		t.Fatalf("checks: %d", fake.callCount())
	}
	if p := h.progress(); p.Exercises["module0/sum"] == nil || p.Exercises["module0/sum"].Status != "attempted" {
		t.Fatalf("progress after the check: %+v", p.Exercises["module0/sum"])
	}
}

var _ tea.Model = Model{}
