package tui

import (
	"fmt"
	"testing"

	"github.com/charmbracelet/x/exp/golden"
)

// The golden tests draw every screen at two sizes with no colour (the Ascii profile) and
// compare with testdata/TestGolden/<screen>/<size>.golden. Regenerate with
//
//	go test ./internal/tui -run TestGolden -update
var goldenScreens = []struct {
	name  string
	setup func(h *harness)
}{
	{"map", func(h *harness) {
		h.press("down", "down")
	}},
	{"lesson", func(h *harness) {
		h.press("enter", "right")
	}},
	{"lesson-search", func(h *harness) {
		h.press("enter", "right", "/")
		h.typeText("rank")
		h.press("enter", "n")
	}},
	{"lesson-contents", func(h *harness) {
		h.press("enter", "t", "down")
	}},
	{"exercise", func(h *harness) {
		h.openExercise("module0/sum")
		h.press("h")
	}},
	{"exercise-cant-run", func(h *harness) {
		h.openExercise("module1/ring")
	}},
	{"exercise-reset", func(h *harness) {
		h.openExercise("module0/sum")
		h.press("r")
	}},
	{"predict", func(h *harness) {
		h.openExercise("module0/allreduce")
		h.press("c")
		h.typeText("350")
	}},
	{"run", func(h *harness) {
		h.fake.events = runEvents()
		h.fake.block = true
		h.fake.release = make(chan struct{})
		h.fake.emitted = make(chan struct{}, 1)
		h.openExercise("module0/sum")
		h.press("c")
		<-h.fake.emitted
		h.pump()
		h.t.Cleanup(func() { h.m.shutdown(0) })
	}},
	{"result-failed", func(h *harness) {
		h.openExercise("module0/sum")
		h.press("c")
		h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
	}},
	{"result-perf", func(h *harness) {
		h.fake.report = perfReport()
		h.openExercise("module0/allreduce")
		h.press("c")
		h.typeText("350")
		h.press("enter")
		h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
	}},
	{"result-chart", func(h *harness) {
		h.fake.report = perfReport()
		h.openExercise("module0/allreduce")
		h.press("c", "esc")
		h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
		h.press("end")
	}},
	{"solution", func(h *harness) {
		pass := perfReport()
		h.fake.report = pass
		h.openExercise("module0/allreduce")
		h.press("c", "esc")
		h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
		h.press("s")
	}},
	{"help", func(h *harness) {
		h.openExercise("module0/sum")
		h.press("?")
	}},
}

func TestGolden(t *testing.T) {
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		for _, sc := range goldenScreens {
			t.Run(fmt.Sprintf("%s/%dx%d", sc.name, size[0], size[1]), func(t *testing.T) {
				h := newHarness(t, size[0], size[1])
				sc.setup(h)
				golden.RequireEqual(t, []byte(h.view()))
			})
		}
	}
}
