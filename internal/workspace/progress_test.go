package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// newWorkspace makes an empty workspace (no course needed for progress).
func newWorkspace(t *testing.T) *Workspace {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, StateDir), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestProgressMissingIsEmpty(t *testing.T) {
	w := newWorkspace(t)
	p, warnings, err := w.LoadProgress()
	if err != nil || len(warnings) != 0 {
		t.Fatalf("%v %v", warnings, err)
	}
	if p.Schema != ProgressSchema || len(p.Exercises) != 0 || p.LessonPage == nil || p.Status("module0/x") != StatusNotStarted {
		t.Errorf("empty progress %+v", p)
	}
}

func TestProgressRoundTrip(t *testing.T) {
	w := newWorkspace(t)
	err := w.UpdateProgress(func(p *Progress) error {
		ep := p.Exercise("module0/peer-copy")
		ep.Record(Attempt{Target: TargetYours, Verdict: "failed", Stage: "correctness", DurationMS: 1200})
		ep.Record(Attempt{Target: TargetYours, Verdict: VerdictPassed, Headline: map[string]float64{"busbw": 370.5, "bad": math.NaN()}})
		ep.HintsShown = 2
		ep.SetBest("busbw", 370.5, true)
		ep.Predict(Prediction{Metric: "busbw", Predicted: 300, Measured: 370.5})
		ep.SolutionViewed = true
		p.LastExercise = "module0/peer-copy"
		p.LessonPage["module0/01-nodes"] = 3
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, warnings, err := w.LoadProgress()
	if err != nil || len(warnings) != 0 {
		t.Fatal(warnings, err)
	}
	// Attempts appended directly, not through Record, are capped when saved.
	err = w.UpdateProgress(func(p *Progress) error {
		ep := p.Exercise("module0/other")
		for i := 0; i < MaxAttempts+5; i++ {
			ep.Attempts = append(ep.Attempts, Attempt{Target: TargetYours, Verdict: "failed", DurationMS: int64(i)})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := w.LoadProgress()
	if other := p.Exercises["module0/other"]; len(other.Attempts) != MaxAttempts || other.Attempts[0].DurationMS != 5 {
		t.Errorf("saved %d attempts, first %d", len(other.Attempts), other.Attempts[0].DurationMS)
	}
	ep := p.Exercises["module0/peer-copy"]
	if ep == nil || ep.Status != StatusPassed || len(ep.Attempts) != 2 || ep.HintsShown != 2 || !ep.SolutionViewed {
		t.Fatalf("read back %+v", ep)
	}
	if ep.Attempts[1].Headline["busbw"] != 370.5 || len(ep.Attempts[1].Headline) != 1 {
		t.Errorf("headline %v (NaN must be dropped, the rest kept)", ep.Attempts[1].Headline)
	}
	if ep.Attempts[0].Time.IsZero() || ep.Best["busbw"] != 370.5 || len(ep.Predictions) != 1 {
		t.Errorf("attempt time, best or predictions lost: %+v", ep)
	}
	if p.LastExercise != "module0/peer-copy" || p.LessonPage["module0/01-nodes"] != 3 || p.UpdatedAt.IsZero() {
		t.Errorf("progress %+v", p)
	}
	// An error from fn saves nothing.
	boom := errors.New("boom")
	if err := w.UpdateProgress(func(p *Progress) error { p.LastExercise = "changed"; return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	p, _, _ = w.LoadProgress()
	if p.LastExercise != "module0/peer-copy" {
		t.Error("a failed update was saved")
	}
}

// A pass whose speed was never judged is "correct", not passed; it survives a failure and
// becomes passed with a judged pass.
func TestStatusCorrect(t *testing.T) {
	ep := &ExerciseProgress{Status: StatusNotStarted}
	ep.Record(Attempt{Target: TargetYours, Verdict: VerdictPassed, SpeedUnjudged: true})
	if ep.Status != StatusCorrect {
		t.Fatalf("status %s after a pass without its speed judged", ep.Status)
	}
	ep.Record(Attempt{Target: TargetYours, Verdict: "failed"})
	if ep.Status != StatusCorrect {
		t.Errorf("correct did not stick after a failure: %s", ep.Status)
	}
	ep.Record(Attempt{Target: TargetYours, Verdict: VerdictPassed})
	ep.Record(Attempt{Target: TargetYours, Verdict: VerdictPassed, SpeedUnjudged: true})
	if ep.Status != StatusPassed {
		t.Errorf("a judged pass: %s", ep.Status)
	}
}

func TestStatusRules(t *testing.T) {
	ep := &ExerciseProgress{Status: StatusNotStarted}
	ep.Record(Attempt{Target: TargetSolution, Verdict: VerdictPassed})
	if ep.Status != StatusNotStarted {
		t.Errorf("a passing solution run set status %s", ep.Status)
	}
	ep.Record(Attempt{Target: TargetYours, Verdict: "failed"})
	if ep.Status != StatusAttempted {
		t.Errorf("status %s after a failure", ep.Status)
	}
	ep.Record(Attempt{Target: TargetYours, Verdict: VerdictPassed})
	ep.Record(Attempt{Target: TargetYours, Verdict: "failed"})
	if ep.Status != StatusPassed {
		t.Errorf("passed did not stick: %s", ep.Status)
	}
	for i := 0; i < MaxAttempts+7; i++ {
		ep.Record(Attempt{Target: TargetYours, Verdict: "failed", DurationMS: int64(i)})
	}
	if len(ep.Attempts) != MaxAttempts || ep.Attempts[MaxAttempts-1].DurationMS != MaxAttempts+6 || ep.Attempts[0].DurationMS != 7 {
		t.Errorf("history: %d attempts, first %d last %d", len(ep.Attempts), ep.Attempts[0].DurationMS, ep.Attempts[len(ep.Attempts)-1].DurationMS)
	}
	if !ep.SetBest("time", 10, false) || ep.SetBest("time", 12, false) || !ep.SetBest("time", 8, false) || ep.Best["time"] != 8 {
		t.Errorf("lower-is-better best %v", ep.Best)
	}
	if ep.SetBest("time", math.Inf(-1), false) {
		t.Error("SetBest took -Inf")
	}
}

func TestCorruptProgressMovedAside(t *testing.T) {
	w := newWorkspace(t)
	name := w.StatePath("progress.json")
	garbage := "{\"schema\": 1, \"exercises\": {\"a\": "
	os.WriteFile(name, []byte(garbage), 0o644)
	p, warnings, err := w.LoadProgress()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Exercises) != 0 || len(warnings) != 1 {
		t.Fatalf("progress %+v warnings %v", p, warnings)
	}
	aside := asideFiles(t, w, "progress.json.corrupt-")
	if len(aside) != 1 {
		t.Fatalf("moved-aside files %v", aside)
	}
	if got := readFile(t, aside[0]); got != garbage {
		t.Errorf("the moved file holds %q", got)
	}
	if !strings.Contains(warnings[0], name) || !strings.Contains(warnings[0], aside[0]) || !strings.Contains(warnings[0], "not valid JSON") {
		t.Errorf("warning does not say what happened: %s", warnings[0])
	}
	if _, err := os.Stat(name); !os.IsNotExist(err) {
		t.Errorf("progress.json still there: %v", err)
	}
	// A wrongly typed field is corrupt too, and a second corruption gets its own file.
	os.WriteFile(name, []byte(`{"schema": 1, "exercises": {"a": {"status": 5}}}`), 0o644)
	if _, warnings, _ := w.LoadProgress(); len(warnings) != 1 || len(asideFiles(t, w, "progress.json.corrupt-")) != 2 {
		t.Errorf("second corruption: %v, files %v", warnings, asideFiles(t, w, "progress.json.corrupt-"))
	}
	// No schema at all.
	os.WriteFile(name, []byte(`{"exercises": {}}`), 0o644)
	if _, warnings, _ := w.LoadProgress(); len(warnings) != 1 || !strings.Contains(warnings[0], "schema") {
		t.Errorf("missing schema: %v", warnings)
	}
}

func TestCorruptProgressDuringUpdate(t *testing.T) {
	w := newWorkspace(t)
	os.WriteFile(w.StatePath("progress.json"), []byte("not json"), 0o644)
	if err := w.UpdateProgress(func(p *Progress) error { p.LastExercise = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	warnings := w.TakeWarnings()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "corrupt-") {
		t.Errorf("warnings %v", warnings)
	}
	if len(w.TakeWarnings()) != 0 {
		t.Error("TakeWarnings did not forget")
	}
	p, warnings, _ := w.LoadProgress()
	if p.LastExercise != "x" || len(warnings) != 0 {
		t.Errorf("after update: %+v %v", p, warnings)
	}
}

func TestFutureSchemaMovedAside(t *testing.T) {
	w := newWorkspace(t)
	future := `{"schema": 7, "exercises": {"a": {"status": {"new": "shape"}}}}`
	os.WriteFile(w.StatePath("progress.json"), []byte(future), 0o644)
	p, warnings, err := w.LoadProgress()
	if err != nil || len(p.Exercises) != 0 {
		t.Fatal(p, err)
	}
	aside := asideFiles(t, w, "progress.json.future-")
	if len(warnings) != 1 || len(aside) != 1 || !strings.Contains(warnings[0], "newer mgpu-learn (schema 7") || !strings.Contains(warnings[0], aside[0]) {
		t.Fatalf("warnings %v aside %v", warnings, aside)
	}
	if readFile(t, aside[0]) != future {
		t.Error("the future file was changed")
	}
}

func asideFiles(t *testing.T, w *Workspace, prefix string) []string {
	t.Helper()
	m, err := filepath.Glob(w.StatePath(prefix + "*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// increment adds one to a counter kept in the progress record.
func increment(w *Workspace) error {
	return w.UpdateProgress(func(p *Progress) error {
		p.Exercise("counter").HintsShown++
		return nil
	})
}

func counter(t *testing.T, w *Workspace) int {
	t.Helper()
	p, warnings, err := w.LoadProgress()
	if err != nil || len(warnings) > 0 {
		t.Fatal(warnings, err)
	}
	if ep := p.Exercises["counter"]; ep != nil {
		return ep.HintsShown
	}
	return 0
}

func TestConcurrentGoroutinesLoseNothing(t *testing.T) {
	w := newWorkspace(t)
	const workers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each goroutine opens its own Workspace, as separate commands would.
			w2, err := Open(w.Root)
			if err != nil {
				errs <- err
				return
			}
			for j := 0; j < each; j++ {
				if err := increment(w2); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := counter(t, w); got != workers*each {
		t.Errorf("counter %d, want %d: updates were lost", got, workers*each)
	}
}

// The helper process: when MGPU_WS_HELPER_DIR is set, this test binary increments the counter
// of that workspace MGPU_WS_HELPER_N times and exits.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv("MGPU_WS_HELPER_DIR")
	if dir == "" {
		t.Skip("only run as a subprocess")
	}
	n, _ := strconv.Atoi(os.Getenv("MGPU_WS_HELPER_N"))
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := increment(w); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentProcessesLoseNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	w := newWorkspace(t)
	const procs, each = 4, 25
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*strings.Builder, procs)
	for i := range cmds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MGPU_WS_HELPER_DIR="+w.Root, fmt.Sprintf("MGPU_WS_HELPER_N=%d", each))
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	// This process updates too, while the others run.
	for j := 0; j < each; j++ {
		if err := increment(w); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper %d: %v\n%s", i, err, outs[i])
		}
	}
	if got, want := counter(t, w), (procs+1)*each; got != want {
		t.Errorf("counter %d, want %d: updates were lost across processes", got, want)
	}
	// Nothing but the record, the lock and no temporary files is left.
	entries, _ := os.ReadDir(filepath.Join(w.Root, StateDir))
	for _, e := range entries {
		if e.Name() != "progress.json" && e.Name() != "lock" {
			t.Errorf("leftover %s", e.Name())
		}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(readFile(t, w.StatePath("progress.json"))), &raw); err != nil {
		t.Errorf("progress.json is not valid JSON: %v", err)
	}
}

func TestLockTimeout(t *testing.T) {
	w := newWorkspace(t)
	old := lockTimeout
	lockTimeout = 50 * time.Millisecond
	defer func() { lockTimeout = old }()
	unlock, err := w.lock()
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	err = increment(w)
	if err == nil || !strings.Contains(err.Error(), "held by another mgpu-learn process") {
		t.Errorf("update under a held lock: %v", err)
	}
}
