package client

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

func TestAbbreviate(t *testing.T) {
	got := Abbreviate([]string{"module0/devices", "module0/peer-copy", "module2/pingpong", "module10/x", "module0/devices", "other/thing"})
	want := map[string]string{"module0/devices": "0a", "module0/peer-copy": "0b", "module2/pingpong": "2a", "module10/x": "10a", "other/thing": "e1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Abbreviate = %v, want %v", got, want)
	}
	if letters(0) != "a" || letters(25) != "z" || letters(26) != "aa" || letters(27) != "ab" {
		t.Errorf("letters: %s %s %s %s", letters(0), letters(25), letters(26), letters(27))
	}
}

func classFixture(now time.Time) *api.ClassStatus {
	cs := &api.ClassStatus{Class: "gpu-101", Generated: now}
	for m := 0; m < 6; m++ {
		for i := 0; i < 6; i++ {
			cs.Exercises = append(cs.Exercises, fmt.Sprintf("module%d/exercise-%d", m, i))
		}
	}
	names := []string{"Ada Lovelace", "Grace Brewster Murray Hopper", "Evil\x1b[31mRed"}
	for i, n := range names {
		row := api.LearnerRow{Learner: fmt.Sprint("l", i), Name: n, LastSeen: now.Add(-time.Duration(i*7) * time.Minute), Cells: map[string]api.LearnerCell{}}
		row.Cells["module0/exercise-0"] = api.LearnerCell{State: "passed", Attempts: 2}
		row.Cells["module0/exercise-1"] = api.LearnerCell{State: "failing", Attempts: 7 + i*100, Stage: "correctness"}
		cs.Learners = append(cs.Learners, row)
	}
	cs.Stuck = []api.StuckReport{{Learner: "l1", Name: names[1], Exercise: "module0/exercise-1", Reason: "7 failed attempts at correctness"}}
	return cs
}

func TestWriteClassFitsAndShowsTheGrid(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for _, width := range []int{120, 80} {
		var b strings.Builder
		WriteClass(&b, classFixture(now), width, now)
		out := b.String()
		for _, line := range strings.Split(out, "\n") {
			if n := utf8.RuneCountInString(line); n > width {
				t.Errorf("width %d: line of %d columns: %q", width, n, line)
			}
		}
		for _, want := range []string{`Class "gpu-101": 3 learners, 36 exercises, 1 stuck`, "0a", "5f", "0a module0/exercise-0", "Ada Lovelace", "✓", "✗7", "✗99",
			"Stuck (1):", "7 failed attempts at correctness", "Grace Brewster Mu…", "passed"} {
			if !strings.Contains(out, want) {
				t.Errorf("width %d: output lacks %q:\n%s", width, want, out)
			}
		}
		if strings.Contains(out, "\x1b") {
			t.Errorf("width %d: a learner's name put a terminal escape in the output", width)
		}
		if width == 120 && strings.Count(out, "\nlearner ") != 2 {
			t.Errorf("36 exercises in 120 columns should take two blocks:\n%s", out)
		}
	}
	var b strings.Builder
	WriteClass(&b, &api.ClassStatus{Class: "empty"}, 120, now)
	if !strings.Contains(b.String(), "No learner has joined yet") {
		t.Errorf("empty class: %s", b.String())
	}
}

func TestWriteLearner(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cfg := &Config{URL: "https://c.example.org", Class: "gpu-101", Name: "Ada", Joined: now.Add(-time.Hour)}
	l := &Local{
		Queued:   []Item{{Queued: now, Submission: api.Submission{Exercise: "module0/sum", Attempt: 4, Verdict: "failed", Code: []api.File{{Name: "a"}}}}},
		Rejected: []Rejected{{Item: Item{File: "/ws/.mgpu-learn/workshop/rejected/x.json", Submission: api.Submission{Exercise: "module9/gone", Attempt: 1}}, Status: 422, Reason: "the class server answered 422: not in this class"}},
		Sent:     []Sent{{Exercise: "module0/sum", Attempt: 3, Verdict: "failed", Sent: now}},
		Retry:    Retry{Failures: 2, LastTry: now, NextTry: now.Add(time.Minute), LastError: "connection refused"},
		Warnings: []string{"queued report q.json was not valid"},
	}
	me := &api.MeResponse{Submissions: []api.MySubmitted{
		{Exercise: "module0/sum", Verdict: "failed", Stage: "correctness", Received: now.Add(-10 * time.Minute)},
		{Exercise: "module0/sum", Verdict: "passed", Stage: "performance", Received: now.Add(-2 * time.Minute)},
	}}
	var b strings.Builder
	WriteLearner(&b, cfg, l, me, nil, now)
	out := b.String()
	for _, want := range []string{`Class "gpu-101" at https://c.example.org, joined as "Ada"`, "1 sent, 1 queued, 1 rejected", "with your code",
		"connection refused", "Next try at", "not in this class", "rejected/x.json", "warning: queued report q.json",
		"holds 2 of your reports", "passed", "2 report(s), last 2m ago"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	WriteLearner(&b, cfg, &Local{}, nil, fmt.Errorf("dial tcp: connection refused"), now)
	if !strings.Contains(b.String(), "could not be asked") {
		t.Errorf("unreachable server: %s", b.String())
	}
}
