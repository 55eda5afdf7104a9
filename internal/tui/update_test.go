package tui

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

func TestMapShowsModulesStatusAndLocks(t *testing.T) {
	h := newHarness(t, 80, 24)
	if h.m.screen != screenMap {
		t.Fatalf("a new workspace opens on screen %d, want the map", h.m.screen)
	}
	h.mustShow("Basics", "0/2 passed", "lesson: Ranks and vectors", "sum", "allreduce", "GPUs", "ring",
		"can't run here (needs 4 GPUs)")
	h.mustNotShow("locked")
	// The cursor starts on the first lesson; moving onto the GPU exercise shows why it can't run.
	for h.m.cmap.selected().exercise == nil || h.m.cmap.selected().exercise.ID != "module1/ring" {
		before := h.m.cmap.cursor
		h.press("down")
		if h.m.cmap.cursor == before {
			t.Fatal("the cursor never reached module1/ring")
		}
	}
	h.mustShow("module1/ring · cuda · can't run on this machine: needs 4 GPUs; this machine has")
	// Up from the top stays on the first row; the module headings are skipped.
	h.press("home", "up")
	if r := h.m.cmap.selected(); r.lesson == nil || r.lesson.ID != "module0/01-intro" {
		t.Fatalf("cursor on %+v, want the first lesson", r)
	}
}

func TestLessonPagesSearchContentsAndResume(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.press("enter") // the first lesson
	if h.m.screen != screenLesson {
		t.Fatalf("enter on a lesson opened screen %d", h.m.screen)
	}
	h.mustShow("Ranks and vectors", "page 1/4", "Every rank runs the same program")
	h.press("right")
	h.mustShow("page 2/4", "Two ranks", "The checker starts two ranks")
	if got := h.progress().LessonPage["module0/01-intro"]; got != 1 {
		t.Fatalf("LessonPage after turning the page = %d, want 1", got)
	}
	// Past the last page of the first lesson comes the next lesson's.
	h.press("right", "right")
	h.mustShow("page 4/4", "Bandwidth")
	if got := h.progress().LessonPage["module0/02-timing"]; got != 0 {
		t.Fatalf("LessonPage of the second lesson = %d, want 0", got)
	}
	h.press("right")
	h.mustShow("last page")
	h.press("left", "left")

	// Search within the page.
	h.press("/")
	h.typeText("rank")
	h.press("enter")
	// "ranks" in the heading and two lines of the paragraph.
	if len(h.m.pager.matches) != 3 {
		t.Fatalf("matches of \"rank\" on page 2: %v\n%s", h.m.pager.matches, h.view())
	}
	h.mustShow("▶   ## Two ranks", "•   The checker starts two ranks", "match 1 of 3")
	h.press("n")
	h.mustShow("match 2 of 3", "▶   The checker")
	h.press("n", "n")
	h.mustShow("match 1 of 3")
	h.press("N")
	h.mustShow("match 3 of 3")
	h.press("esc") // clears the search, stays in the lesson
	if h.m.screen != screenLesson || h.m.pager.query != "" {
		t.Fatalf("esc with a search: screen %d query %q", h.m.screen, h.m.pager.query)
	}
	h.press("/")
	h.typeText("nowhere")
	h.press("enter")
	h.mustShow("no match")
	h.press("esc")

	// Contents: jump to the third page.
	h.press("t")
	h.mustShow("Contents of Basics", "(introduction)", "Two ranks", "Checking", "Bandwidth")
	h.press("down", "enter")
	h.mustShow("page 3/4", "Checking")

	// Back on the map, opening the lesson again resumes at the page read last.
	h.press("esc")
	if h.m.screen != screenMap {
		t.Fatalf("esc from the lesson went to screen %d", h.m.screen)
	}
	h.press("enter")
	h.mustShow("page 3/4")

	// So does a new session.
	h2 := newHarnessWith(t, h.c, h.ws, filepath.Dir(h.ws.Root), 80, 24)
	h2.press("enter")
	h2.mustShow("page 3/4", "Checking")
}

func TestResizeRendersAgain(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.press("enter")
	narrow := h.m.pager.lines
	h.send(teaWindow(120, 40))
	if h.m.pager.vp.Width != 120 || h.m.pager.vp.Height != 40-1-1-1-1 {
		t.Fatalf("pager viewport %dx%d after resize", h.m.pager.vp.Width, h.m.pager.vp.Height)
	}
	if strings.Join(h.m.pager.lines, "\n") == strings.Join(narrow, "\n") {
		t.Fatal("the page was not rendered again for the new width")
	}
	// Several resizes in a row: only the last one renders (the earlier ones are stale).
	seq := h.m.reflowSeq
	h.m.update(teaWindow(100, 30))
	h.m.update(teaWindow(90, 30))
	if cmd := h.m.update(reflowMsg{seq + 1}); cmd != nil {
		t.Fatal("a stale reflow rendered")
	}
}

func TestExerciseOpensAndResumes(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module0/sum")
	h.mustShow("module0/sum", "not started", "your file:", "sum.c", "~/ws/module0-basics/sum/sum.c", "Add two vectors", "runs here")
	if got := h.progress().LastExercise; got != "module0/sum" {
		t.Fatalf("LastExercise = %q", got)
	}
	h2 := newHarnessWith(t, h.c, h.ws, filepath.Dir(h.ws.Root), 80, 24)
	if h2.m.screen != screenExercise || h2.m.ex.e.ID != "module0/sum" {
		t.Fatalf("a new session opened screen %d, want the last exercise", h2.m.screen)
	}
	h2.press("esc")
	if h2.m.screen != screenMap || h2.m.cmap.selected().exercise.ID != "module0/sum" {
		t.Fatal("esc from the resumed exercise does not land on its row of the map")
	}
	h2.press("q")
	if !h2.quit {
		t.Fatal("q on the map did not quit")
	}
}

func TestHintsRevealOneAtATime(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module0/sum")
	h.mustShow("Hints: 0 of 2 shown")
	h.press("h")
	if got := h.progress().Exercises["module0/sum"].HintsShown; got != 1 {
		t.Fatalf("HintsShown = %d after one h", got)
	}
	h.mustShow("Hints: 1 of 2 shown", "1. Every element i")
	if strings.Contains(h.view(), "keep no state") {
		t.Fatal("the second hint shows before it was asked for")
	}
	h.press("h")
	h.mustShow("2. Nothing else")
	h.press("h")
	h.mustShow("No more hints")
	if got := h.progress().Exercises["module0/sum"].HintsShown; got != 2 {
		t.Fatalf("HintsShown = %d, want 2", got)
	}
}

func TestResetAsksFirstThenBacksUp(t *testing.T) {
	h := newHarness(t, 100, 30)
	h.openExercise("module0/sum")
	file := h.ws.FilePath(h.c.Exercise("module0/sum"), "sum.c")
	if err := os.WriteFile(file, []byte("my work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.press("r")
	h.mustShow("Reset sum.c to the starter?", "(y/n)")
	h.press("n")
	if b, _ := os.ReadFile(file); string(b) != "my work\n" {
		t.Fatal("answering n reset the file")
	}
	h.mustShow("Reset canceled")
	h.press("r", "y")
	b, _ := os.ReadFile(file)
	if !strings.Contains(string(b), "your loop here") {
		t.Fatalf("y did not restore the starter: %q", b)
	}
	h.mustShow("saved to ~/ws/.mgpu-learn/backups/module0-sum/")
	matches, _ := filepath.Glob(filepath.Join(h.ws.Root, ".mgpu-learn", "backups", "module0-sum", "*", "sum.c"))
	if len(matches) != 1 {
		t.Fatalf("backups: %v", matches)
	}
	if b, _ := os.ReadFile(matches[0]); string(b) != "my work\n" {
		t.Fatalf("the backup holds %q", b)
	}
}

func TestEditorOpensTheFirstFile(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module0/sum")
	h.press("e")
	if len(h.execs) != 1 {
		t.Fatalf("e ran %v", h.execs)
	}
	got := h.execs[0]
	if filepath.Base(got[0]) != "true" || got[len(got)-1] != h.ws.FilePath(h.c.Exercise("module0/sum"), "sum.c") {
		t.Fatalf("editor command %v", got)
	}
	h.mustShow("Back from the editor")

	h2 := newHarness(t, 80, 24, func(d *Deps) { d.Editor = "no-such-editor-here --wait" })
	h2.openExercise("module0/sum")
	h2.press("e")
	if len(h2.execs) != 0 {
		t.Fatal("a missing editor was run")
	}
	h2.mustShow(`the editor "no-such-editor-here" ($EDITOR) was not found`)
}

func TestCheckEventsUpdateRankRows(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.fake.events = runEvents()
	h.fake.block = true
	h.fake.release = make(chan struct{})
	h.fake.emitted = make(chan struct{}, 1)
	h.openExercise("module0/sum")
	h.press("c")
	if h.m.screen != screenRun {
		t.Fatalf("c opened screen %d, want the run view", h.m.screen)
	}
	// Before any event: two ranks waiting for the build.
	h.mustShow("Checking module0/sum", "building")
	<-h.fake.emitted
	h.pump()
	st := h.m.run.st
	if len(st.ranks) != 2 || st.ranks[0].state != "done" || st.ranks[1].state != "running" {
		t.Fatalf("rank rows %+v", st.ranks)
	}
	if got := st.ranks[1].tail; len(got) != 3 || got[1] != "rank 1: case odd n=1001" {
		t.Fatalf("rank 1 tail %q (escapes must be gone)", got)
	}
	if st.buildN != 2 || st.stage("build").status != "ok" || st.stage("run").status != "running" {
		t.Fatalf("stages %+v build %d", st.stages, st.buildN)
	}
	h.mustShow("✓ build", "▸ run", "done", "running", "still going", "rank 1 output (3 lines)", "sum.c:1:55: warning")
	// The selected rank's output follows keys.
	h.press("up")
	h.mustShow("rank 0 output (1 line)")

	close(h.fake.release)
	h.pumpUntil("the result view", func() bool { return h.m.screen == screenResult })
	h.mustShow("FAILED", "module0/sum", "Whose fault: your code")
	if h.recordCount() != 1 {
		t.Fatalf("records: %d", h.recordCount())
	}
	if got := h.progress().Exercises["module0/sum"].Status; got != workspace.StatusAttempted {
		t.Fatalf("status after a failed check: %s", got)
	}
	// esc goes back to the exercise, which now offers the result again.
	h.press("esc")
	if h.m.screen != screenExercise {
		t.Fatalf("esc from the result went to %d", h.m.screen)
	}
	h.mustShow("last check: failed at correctness", "(v shows it)")
	h.press("v")
	if h.m.screen != screenResult {
		t.Fatal("v did not show the last result")
	}
}

// The cross-check's start resets the stage rows (its own stages follow) and is remembered for
// the screen's title.
func TestRunStateCrossCheck(t *testing.T) {
	c := loadTestCourse(t)
	st := newRunState(c.Exercise("module0/allreduce"), t0)
	st.apply(checker.StageDone{Stage: checker.StageRun, Status: "ok", Duration: time.Second}, t0)
	st.apply(checker.CrossCheckStarted{Ranks: 3}, t0)
	if st.cross != 3 || st.stage(checker.StageRun).status != "" || st.stage(checker.StageRun).dur != 0 {
		t.Fatalf("after the cross-check started: cross %d, run row %+v", st.cross, *st.stage(checker.StageRun))
	}
}

func TestRunStateFoldsEvents(t *testing.T) {
	c := loadTestCourse(t)
	st := newRunState(c.Exercise("module0/allreduce"), t0)
	if len(st.ranks) != 4 || st.ranks[3].state != "building" {
		t.Fatalf("before the run: %+v", st.ranks)
	}
	st.apply(checker.RunStarted{Ranks: 3, Run: 2}, t0.Add(time.Second))
	st.apply(checker.RankState{Rank: 2, State: "hung"}, t0.Add(3*time.Second))
	st.apply(checker.RankState{Rank: 1, State: "signaled", Signal: "SIGSEGV"}, t0.Add(2*time.Second))
	for i := 0; i < 100; i++ {
		st.apply(checker.RankLine{Rank: 0, Line: "line"}, t0)
	}
	if st.run != 2 || len(st.ranks) != 3 || st.ranks[2].state != "hung" || st.ranks[1].signal != "SIGSEGV" {
		t.Fatalf("after events: run %d ranks %+v", st.run, st.ranks)
	}
	// The run's summary repeats each rank's end; the row keeps when it was first seen.
	st.apply(checker.RankState{Rank: 2, State: "hung"}, t0.Add(5*time.Second))
	if !st.ranks[2].ended.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("rank 2 ended at %v, want the first report's time", st.ranks[2].ended.Sub(t0))
	}
	if st.ranks[0].lines != 100 || len(st.ranks[0].tail) > tailKeep {
		t.Fatalf("rank 0 kept %d lines of tail, counted %d", len(st.ranks[0].tail), st.ranks[0].lines)
	}
	// A line from a rank the run did not announce still gets a row; nonsense ranks do not.
	st.apply(checker.RankLine{Rank: 4, Line: "late"}, t0)
	st.apply(checker.RankLine{Rank: -1, Line: "bad"}, t0)
	if len(st.ranks) != 5 {
		t.Fatalf("%d rows", len(st.ranks))
	}
	cl := st.clone()
	cl.ranks[0].tail[0] = "changed"
	if st.ranks[0].tail[0] == "changed" {
		t.Fatal("clone shares the tails")
	}
}

func TestCancelStopsTheCheck(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.fake.events = runEvents()
	h.fake.block = true
	h.fake.release = make(chan struct{}) // never released: only cancel ends it
	h.openExercise("module0/sum")
	h.press("c")
	j := h.m.job
	if j == nil {
		t.Fatal("no job")
	}
	h.press("esc")
	h.mustShow("canceling")
	h.pumpUntil("the end of the job", func() bool { return h.m.job == nil })
	select {
	case <-j.done:
	default:
		t.Fatal("the check goroutine has not ended")
	}
	if h.m.screen != screenExercise {
		t.Fatalf("after cancel: screen %d", h.m.screen)
	}
	h.mustShow("Check canceled")
	if h.recordCount() != 0 {
		t.Fatal("a canceled check was recorded")
	}
	// ctrl+c cancels too, and does not quit.
	h.press("c")
	h.press("ctrl+c")
	if h.quit {
		t.Fatal("ctrl+c during a check quit the UI")
	}
	h.pumpUntil("the end of the second job", func() bool { return h.m.job == nil })
	if h.fake.callCount() != 2 {
		t.Fatalf("checks: %d", h.fake.callCount())
	}
}

func TestQuitDuringCheckKillsIt(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.fake.block = true
	h.fake.release = make(chan struct{})
	h.openExercise("module0/sum")
	h.press("c")
	j := h.m.job
	h.m.shutdown(10 * time.Second)
	select {
	case <-j.done:
	default:
		t.Fatal("shutdown left the check running")
	}
}

func TestPredictThenMeasure(t *testing.T) {
	h := newHarness(t, 100, 30)
	h.fake.report = perfReport()
	h.openExercise("module0/allreduce")
	h.press("c")
	if !h.m.ex.predicting || h.fake.callCount() != 0 {
		t.Fatal("the first check of a timed exercise did not ask for a prediction first")
	}
	h.mustShow("Predict, then measure.", "bus bandwidth in GB/s at 256 MiB (GB/s):")
	h.typeText("fast")
	h.press("enter")
	h.mustShow("type a positive number")
	for range "fast" {
		h.press("backspace")
	}
	h.typeText("350")
	h.press("enter")
	if h.m.ex.predicting {
		t.Fatal("still asking after a number")
	}
	p := h.progress().Exercises["module0/allreduce"]
	if p == nil || len(p.Predictions) != 1 || p.Predictions[0].Predicted != 350 || p.Predictions[0].Metric != "busbw" {
		t.Fatalf("predictions %+v", p)
	}
	h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
	h.mustShow("You predicted 350 GB/s; measured 312 GB/s (-11% from your guess).")
	p = h.progress().Exercises["module0/allreduce"]
	if p.Predictions[0].Measured != 312 {
		t.Fatalf("measured not saved: %+v", p.Predictions)
	}
	// The next check does not ask again.
	h.press("c")
	if h.m.ex.predicting {
		t.Fatal("asked for a prediction a second time")
	}
	h.pumpUntil("the second result", func() bool { return h.m.screen == screenResult && h.m.job == nil })
	if h.fake.callCount() != 2 {
		t.Fatalf("checks: %d", h.fake.callCount())
	}
}

func TestPredictionCanBeSkipped(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.fake.report = perfReport()
	h.openExercise("module0/allreduce")
	h.press("c", "esc")
	if h.m.ex.predicting || h.m.job == nil {
		t.Fatal("esc did not skip to the check")
	}
	h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
	if p := h.progress().Exercises["module0/allreduce"]; len(p.Predictions) != 0 {
		t.Fatalf("a skipped prediction was saved: %+v", p.Predictions)
	}
}

func TestLockedExerciseIsNotChecked(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module1/ring")
	h.mustShow("not started · can't run here (needs 4 GPUs)", "  needs 4 GPUs; this machine has none")
	h.press("c")
	if h.m.job != nil || h.fake.callCount() != 0 {
		t.Fatal("an exercise this machine can't run was checked")
	}
	h.mustShow("This machine can't run this exercise: needs 4 GPUs")
}

func TestSolutionOnlyAfterPass(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module0/sum")
	h.press("s")
	if h.m.screen != screenExercise {
		t.Fatal("s opened the solution before a pass")
	}
	h.mustShow("once your files pass")
	pass := failingReport()
	pass.Verdict, pass.Fault, pass.Headline = checker.Passed, "", "passed"
	h.fake.report = pass
	h.press("c")
	h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
	h.mustShow("PASSED")
	h.press("s")
	if h.m.screen != screenSolution {
		t.Fatalf("s after a pass opened screen %d", h.m.screen)
	}
	h.mustShow("Reference solution of module0/sum", "out[i] = a[i] + b[i]")
	if !h.progress().Exercises["module0/sum"].SolutionViewed {
		t.Fatal("SolutionViewed not saved")
	}
	h.press("esc")
	if h.m.screen != screenResult {
		t.Fatalf("esc from the solution went to %d", h.m.screen)
	}
}

func TestWatchChecksOnSave(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module0/sum")
	h.press("w")
	if h.m.watch == nil {
		t.Fatal("w did not start watching")
	}
	h.mustShow("watch: on (sum)")
	file := h.ws.FilePath(h.c.Exercise("module0/sum"), "sum.c")
	// Another file in the folder does not trigger.
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("void sum(){}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.pumpUntil("a check started by the save", func() bool { return h.fake.callCount() > 0 })
	h.pumpUntil("its result", func() bool { return h.m.job == nil && h.m.screen == screenResult })
	if got := h.fake.targets[0].Files["sum.c"]; got != file {
		t.Fatalf("the check was of %q", got)
	}
	h.mustShow("watch: on (sum)")
	// w again turns it off; leaving for the map does too.
	h.press("w")
	if h.m.watch != nil {
		t.Fatal("w did not stop watching")
	}
	h.press("w", "esc", "esc")
	if h.m.screen != screenMap || h.m.watch != nil {
		t.Fatalf("back on the map: screen %d, watching %v", h.m.screen, h.m.watch != nil)
	}
}

func TestHelpToggles(t *testing.T) {
	h := newHarness(t, 80, 24)
	short := h.view()
	h.press("?")
	full := h.view()
	if short == full || !strings.Contains(full, "page down") {
		t.Fatalf("? did not show the full help:\n%s", full)
	}
	if got := strings.Count(full, "\n") + 1; got != 24 {
		t.Fatalf("the full help view has %d lines, want 24", got)
	}
	h.press("?")
	if h.view() != short {
		t.Fatal("? again did not restore the short help")
	}
}

func TestMissingFileIsReported(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module0/sum")
	os.Remove(h.ws.FilePath(h.c.Exercise("module0/sum"), "sum.c"))
	h.press("c")
	if h.m.job != nil {
		t.Fatal("checked without the learner's file")
	}
	h.mustShow("is missing", "press r")
}

func TestParsePrediction(t *testing.T) {
	for in, want := range map[string]float64{"350": 350, " 1,200 GB/s": 1200, "2.5e2": 250, "0.75us": 0.75} {
		if got, err := parsePrediction(in); err != nil || got != want {
			t.Errorf("parsePrediction(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-3", "0", "inf", "NaN"} {
		if _, err := parsePrediction(in); err == nil {
			t.Errorf("parsePrediction(%q) accepted", in)
		}
	}
}

func TestWatchDebouncesSaves(t *testing.T) {
	h := newHarness(t, 80, 24)
	h.openExercise("module0/sum")
	h.press("w")
	w := h.m.watch
	// Three events of one save: only the last generation's timer starts a check.
	for i := 0; i < 3; i++ {
		h.m.update(fileChangedMsg{w})
	}
	h.send(watchFireMsg{w, 1})
	h.send(watchFireMsg{w, 2})
	if h.m.job != nil {
		t.Fatal("a superseded save started a check")
	}
	h.send(watchFireMsg{w, 3})
	if h.m.job == nil || !h.m.job.watch {
		t.Fatal("the settled save did not start a check")
	}
	h.mustShow("started by a save")
	// A save during the check runs another check after it.
	h.send(watchFireMsg{w, 3})
	if !h.m.watchPending {
		t.Fatal("a save during a check was dropped")
	}
	h.pumpUntil("two checks", func() bool { return h.fake.callCount() == 2 && h.m.job == nil })
	// A stopped watcher's timers do nothing.
	h.press("w")
	h.send(watchFireMsg{w, 3})
	if h.m.job != nil {
		t.Fatal("a stopped watcher started a check")
	}
}

func TestRecordsWithoutDepsRecord(t *testing.T) {
	h := newHarness(t, 80, 24, func(d *Deps) { d.Record = nil })
	h.openExercise("module0/sum")
	h.press("c")
	h.pumpUntil("the result", func() bool { return h.m.screen == screenResult })
	ep := h.progress().Exercises["module0/sum"]
	if ep == nil || len(ep.Attempts) != 1 || ep.Attempts[0].Verdict != checker.Failed || ep.Attempts[0].Stage != "correctness" || ep.Status != workspace.StatusAttempted {
		t.Fatalf("progress %+v", ep)
	}
	h.mustShow("FAILED")
}
