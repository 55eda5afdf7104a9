package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

func TestMain(m *testing.M) {
	// bubbles' styles use the default renderer: pin it like Deps.NoColor pins the UI's.
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// testCourseFS is a small course: two modules, three lessons, three exercises (one timed with
// a prediction question, one that needs GPUs).
var testCourseFS = fstest.MapFS{
	"lessons/course.yaml": {Data: []byte("title: \"Test course\"\nmodules:\n  - module0-basics\n  - module1-more\n")},
	"lessons/module0-basics/module.yaml": {Data: []byte(`id: module0
title: "Basics"
summary: "Adding vectors on several ranks, and timing it."
exercises: [sum, allreduce]
`)},
	"lessons/module0-basics/01-intro.md": {Data: []byte(`---
title: "Ranks and vectors"
exercises: [module0/sum]
---
Every rank runs the same program on its own part of the data. This lesson shows how the
course checks your code.

## Two ranks

The checker starts two ranks. Each one adds two vectors of its own and reports the result.
Both ranks must agree before a check passes.

- Each one works on its own part: a vector of n elements, split in two halves by the
  driver before the check starts, and put back together after it.

## Checking

The check builds your file with the driver, runs every rank, and compares every element with a
reference. A wrong element anywhere fails the check, and the report names the case and the rank.
`)},
	"lessons/module0-basics/02-timing.md": {Data: []byte(`---
title: "Timing"
---
## Bandwidth

Bus bandwidth is bytes moved per second, scaled so that it can be compared with the link's
peak. Predict it before you measure it.
`)},
	"lessons/module1-more/module.yaml": {Data: []byte("id: module1\ntitle: \"GPUs\"\nsummary: \"Needs real GPUs.\"\nexercises: [ring]\n")},
	"lessons/module1-more/01-ring.md":  {Data: []byte("---\ntitle: Rings\n---\nA ring passes data to the next GPU.\n")},

	"exercises/module0-basics/sum/exercise.yaml": {Data: []byte(`id: module0/sum
title: "Add two vectors on two ranks"
lesson: module0/01-intro
kind: c
task: task.md
files: [sum.c]
driver: driver.c
launch:
  launcher: local
  ranks: "2"
requires:
  gpus: 0
  libs: [cc]
cases:
  - {name: small, n: 1000}
  - {name: odd, n: 1001}
hints:
  - "Every element i from 0 to n-1 gets a[i] + b[i]."
  - "Nothing else: keep no state between calls."
starter:
  fails_at: correctness
`)},
	"exercises/module0-basics/sum/task.md":        {Data: []byte("# Add two vectors\n\nWrite `sum(a, b, out, n)` so that `out[i] = a[i] + b[i]` for every `i`.\n\n## Rules\n\n- Do not call `lib_sum`.\n- Touch nothing past `out[n-1]`: the driver puts guard bands after the output and checks\n  that every byte of them is unchanged after each call.\n")},
	"exercises/module0-basics/sum/driver.c":       {Data: []byte("int main(void){return 0;}\n")},
	"exercises/module0-basics/sum/starter/sum.c":  {Data: []byte("void sum(const float *a, const float *b, float *out, long n) {\n    /* your loop here */\n}\n")},
	"exercises/module0-basics/sum/solution/sum.c": {Data: []byte("void sum(const float *a, const float *b, float *out, long n) {\n    for (long i = 0; i < n; i++) out[i] = a[i] + b[i];\n}\n")},

	"exercises/module0-basics/allreduce/exercise.yaml": {Data: []byte(`id: module0/allreduce
title: "An all-reduce as fast as the library's"
lesson: module0/02-timing
kind: c
task: task.md
files: [ar.c]
driver: driver.c
launch:
  launcher: local
  ranks: "4"
requires:
  gpus: 0
  libs: [cc]
cases:
  - {name: small, n: 4096}
perf:
  case: large
  metric: busbw
  baseline: "the library all-reduce"
  min_ratio: 0.8
  cases:
    - {name: tiny, n: 1024}
    - {name: medium, n: 262144}
    - {name: large, n: 67108864}
  predict: "bus bandwidth in GB/s at 256 MiB"
hints:
  - "Split the buffer into one chunk per rank."
starter:
  fails_at: correctness
`)},
	"exercises/module0-basics/allreduce/task.md":       {Data: []byte("# All-reduce\n\nSum every rank's buffer into every rank's buffer.\n")},
	"exercises/module0-basics/allreduce/driver.c":      {Data: []byte("int main(void){return 0;}\n")},
	"exercises/module0-basics/allreduce/starter/ar.c":  {Data: []byte("void ar(float *x, long n) {}\n")},
	"exercises/module0-basics/allreduce/solution/ar.c": {Data: []byte("void ar(float *x, long n) { /* ring */ }\n")},

	"exercises/module1-more/ring/exercise.yaml": {Data: []byte(`id: module1/ring
title: Pass a buffer around a ring of GPUs
kind: cuda
task: task.md
files: [ring.cu]
driver: driver.cu
launch:
  launcher: single
requires:
  gpus: 4
  peer_access: true
cases:
  - {name: one, n: 1}
starter:
  fails_at: correctness
`)},
	"exercises/module1-more/ring/task.md":          {Data: []byte("# Ring\n\nSend to the next GPU.\n")},
	"exercises/module1-more/ring/driver.cu":        {Data: []byte("int main(){}\n")},
	"exercises/module1-more/ring/starter/ring.cu":  {Data: []byte("// todo\n")},
	"exercises/module1-more/ring/solution/ring.cu": {Data: []byte("// done\n")},
}

func loadTestCourse(t testing.TB) *course.Course {
	t.Helper()
	c, err := course.Load(testCourseFS)
	if err != nil {
		t.Fatalf("the test course does not load:\n%v", err)
	}
	return c
}

// fakeUnmet says the exercises that need GPUs can't run here.
func fakeUnmet(e *course.Exercise) Lack {
	if e.Requires.GPUs > 0 {
		return Lack{Needs: "4 GPUs", Reasons: []doctor.Reason{{Need: doctor.NeedGPUs,
			What: "needs 4 GPUs; this machine has none", Fix: "run it on a machine with 4 GPUs"}}}
	}
	return Lack{}
}

// clock is a settable time shared with the check's goroutine.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeChecker stands in for the checker: it plays events, then returns a report, or waits for
// the check to be canceled.
type fakeChecker struct {
	clock  *clock
	events []timedEvent
	report *checker.Report
	// block makes the check wait, after its events, for release or cancel.
	block   bool
	release chan struct{}
	emitted chan struct{}

	mu      sync.Mutex
	calls   int
	targets []checker.Target
}

type timedEvent struct {
	after time.Duration
	ev    checker.Event
}

func (f *fakeChecker) check(ctx context.Context, t checker.Target, events func(checker.Event)) *checker.Report {
	f.mu.Lock()
	f.calls++
	f.targets = append(f.targets, t)
	f.mu.Unlock()
	for _, te := range f.events {
		f.clock.add(te.after)
		events(te.ev)
	}
	if f.emitted != nil {
		f.emitted <- struct{}{}
	}
	if f.block {
		select {
		case <-f.release:
		case <-ctx.Done():
			return &checker.Report{Exercise: t.Exercise.ID, Verdict: checker.Errored, Fault: checker.FaultRunner,
				Stage: checker.StageRun, Headline: "canceled"}
		}
	}
	r := *f.report
	r.Exercise = t.Exercise.ID
	return &r
}

func (f *fakeChecker) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// harness drives a model without a terminal: Update, then the commands it returns, run here
// one after the other. Commands that wait for the outside (a check's events, a file saved)
// run in goroutines; pump delivers what they return, one message at a time.
type harness struct {
	t       *testing.T
	m       Model
	ws      *workspace.Workspace
	c       *course.Course
	clock   *clock
	fake    *fakeChecker
	msgs    chan tea.Msg // what waiting commands returned
	waiting int          // waiting commands not yet pumped
	quit    bool
	execs   [][]string
	records []*checker.Report
	recMu   sync.Mutex
}

type harnessOpt func(*Deps)

func newHarness(t *testing.T, w, h int, opts ...harnessOpt) *harness {
	t.Helper()
	c := loadTestCourse(t)
	home := t.TempDir()
	dir := filepath.Join(home, "ws")
	if _, _, err := workspace.Init(dir, c); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return newHarnessWith(t, c, ws, home, w, h, opts...)
}

func newHarnessWith(t *testing.T, c *course.Course, ws *workspace.Workspace, home string, w, h int, opts ...harnessOpt) *harness {
	// (the debounce of watch mode is real time; nothing asserts on it)
	t.Helper()
	hs := &harness{t: t, ws: ws, c: c, clock: &clock{t: t0}, msgs: make(chan tea.Msg, 64)}
	hs.fake = &fakeChecker{clock: hs.clock, report: failingReport()}
	d := Deps{Course: c, Workspace: ws, Unmet: fakeUnmet, NoColor: true, Width: w, Height: h, Editor: "true"}
	d.Record = func(e *course.Exercise, r *checker.Report) {
		hs.recMu.Lock()
		hs.records = append(hs.records, r)
		hs.recMu.Unlock()
		_ = ws.UpdateProgress(func(p *workspace.Progress) error {
			p.Exercise(e.ID).Record(workspace.Attempt{Target: workspace.TargetYours, Verdict: r.Verdict, Stage: r.Stage})
			p.LastExercise = e.ID
			return nil
		})
	}
	for _, o := range opts {
		o(&d)
	}
	hs.m = New(d)
	s := hs.m.s
	s.now = hs.clock.now
	s.home = home
	s.after = func(_ time.Duration, msg tea.Msg) tea.Cmd {
		switch msg.(type) {
		case tickMsg:
			return nil // elapsed-time refreshes would never end
		case watchFireMsg:
			// Saves are debounced for real: an editor's save is several events.
			hs.waiting++
			go func() {
				time.Sleep(watchDelay)
				hs.msgs <- msg
			}()
			return nil
		}
		return msgCmd(msg)
	}
	s.wait = func(c tea.Cmd) tea.Cmd {
		hs.waiting++
		go func() { hs.msgs <- c() }()
		return nil
	}
	s.check = func(ctx context.Context, t checker.Target, events func(checker.Event)) *checker.Report {
		return hs.fake.check(ctx, t, events)
	}
	s.exec = func(name string, args []string, done func(error) tea.Msg) tea.Cmd {
		hs.execs = append(hs.execs, append([]string{name}, args...))
		return msgCmd(done(nil))
	}
	hs.run(hs.m.Init())
	return hs
}

func (h *harness) recordCount() int {
	h.recMu.Lock()
	defer h.recMu.Unlock()
	return len(h.records)
}

// send delivers msg and everything its commands produce.
func (h *harness) send(msg tea.Msg) {
	h.t.Helper()
	_, cmd := h.m.Update(msg)
	h.run(cmd)
}

func (h *harness) run(cmd tea.Cmd) {
	h.t.Helper()
	if cmd == nil {
		return
	}
	msg := cmd()
	switch msg := msg.(type) {
	case nil:
	case tea.BatchMsg:
		for _, c := range msg {
			h.run(c)
		}
	case tea.QuitMsg:
		h.quit = true
	default:
		h.send(msg)
	}
}

// pump delivers the next message of a waiting command (one must arrive within 10 s).
func (h *harness) pump() {
	h.t.Helper()
	if h.waiting == 0 {
		h.t.Fatal("nothing is waiting")
	}
	select {
	case msg := <-h.msgs:
		h.waiting--
		if msg != nil {
			h.send(msg)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatal("no waiting command finished in 10 s")
	}
}

// pumpUntil pumps until cond holds.
func (h *harness) pumpUntil(what string, cond func() bool) {
	h.t.Helper()
	for i := 0; !cond(); i++ {
		if h.waiting == 0 || i > 1000 {
			h.t.Fatalf("never reached: %s\n%s", what, h.view())
		}
		h.pump()
	}
}

// keyMsg makes a key press from its name ("enter", "esc", "ctrl+c", "up", or runes).
func keyMsg(k string) tea.KeyMsg {
	types := map[string]tea.KeyType{
		"enter": tea.KeyEnter, "esc": tea.KeyEsc, "ctrl+c": tea.KeyCtrlC, "up": tea.KeyUp,
		"down": tea.KeyDown, "left": tea.KeyLeft, "right": tea.KeyRight, "pgdown": tea.KeyPgDown,
		"pgup": tea.KeyPgUp, "backspace": tea.KeyBackspace, "home": tea.KeyHome, "end": tea.KeyEnd,
	}
	if t, ok := types[k]; ok {
		return tea.KeyMsg{Type: t}
	}
	if k == " " {
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// press sends keys one after the other.
func (h *harness) press(ks ...string) {
	h.t.Helper()
	for _, k := range ks {
		h.send(keyMsg(k))
	}
}

// typeText types each rune.
func (h *harness) typeText(s string) {
	h.t.Helper()
	for _, r := range s {
		h.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

func (h *harness) view() string { return h.m.View() }

func (h *harness) mustShow(words ...string) {
	h.t.Helper()
	v := h.view()
	for _, w := range words {
		if !strings.Contains(v, w) {
			h.t.Fatalf("the screen lacks %q:\n%s", w, v)
		}
	}
}

func (h *harness) mustNotShow(words ...string) {
	h.t.Helper()
	v := h.view()
	for _, w := range words {
		if strings.Contains(v, w) {
			h.t.Fatalf("the screen shows %q:\n%s", w, v)
		}
	}
}

func (h *harness) progress() *workspace.Progress {
	h.t.Helper()
	p, _, err := h.ws.LoadProgress()
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// openExercise goes from the map to exercise id.
func (h *harness) openExercise(id string) {
	h.t.Helper()
	if h.m.screen != screenMap {
		h.t.Fatalf("not on the map (screen %d)", h.m.screen)
	}
	for i := 0; i < 50; i++ {
		if r := h.m.cmap.selected(); r.exercise != nil && r.exercise.ID == id {
			h.press("enter")
			if h.m.screen != screenExercise || h.m.ex.e.ID != id {
				h.t.Fatalf("enter did not open %s", id)
			}
			return
		}
		h.press("down")
	}
	h.t.Fatalf("no row for %s on the map", id)
}

// failingReport is a check that failed at correctness on rank 1.
func failingReport() *checker.Report {
	return &checker.Report{
		Exercise: "module0/sum", Title: "Add two vectors on two ranks", Module: "module0", Target: "yours",
		Verdict: checker.Failed, Stage: checker.StageCorrectness, Fault: checker.FaultYou,
		Headline: "case small: 1000 of 1000 elements wrong on rank 1",
		Message:  "Case small (n=1000) is wrong on rank 1: element 0 is 0, it should be 3.\nEvery element was left unwritten.",
		Stages: []checker.StageResult{
			{Name: "environment", Status: "ok"},
			{Name: "build", Status: "ok", Duration: checker.Seconds(420 * time.Millisecond)},
			{Name: "policy", Status: "ok", Duration: checker.Seconds(15 * time.Millisecond)},
			{Name: "run", Status: "ok", Duration: checker.Seconds(180 * time.Millisecond)},
			{Name: "correctness", Status: "failed", Detail: "case small: 1000 of 1000 elements wrong on rank 1"},
			{Name: "performance", Status: "skipped"},
		},
		Cases: []checker.CaseResult{
			{Case: "small", Rank: 0, OK: true, N: 1000, Checked: 1000},
			{Case: "small", Rank: 1, OK: false, N: 1000, Checked: 1000, Bad: 1000, Unwritten: 1000,
				First: []checker.Mismatch{{I: 0, Got: "0", Want: "3"}, {I: 1, Got: "0", Want: "5"}}},
			{Case: "odd", Rank: 0, OK: true, N: 1001, Checked: 1001},
			{Case: "odd", Rank: 1, OK: true, N: 1001, Checked: 1001},
		},
		Run:      &checker.RunSummary{Dir: "/tmp/mgpu-runs/module0-sum/run-1", FirstFailed: -1},
		Started:  t0,
		Duration: checker.Seconds(1300 * time.Millisecond),
	}
}

// perfReport is a passing check of the timed exercise with three sizes.
func perfReport() *checker.Report {
	return &checker.Report{
		Exercise: "module0/allreduce", Title: "An all-reduce as fast as the library's", Module: "module0", Target: "yours",
		Verdict: checker.Passed, Stage: checker.StagePerformance,
		Headline: "busbw 312.0 GB/s at large, 0.93× the library all-reduce (target 0.80×)",
		Stages: []checker.StageResult{
			{Name: "environment", Status: "ok", Detail: "4 GPU(s)"},
			{Name: "build", Status: "ok", Duration: checker.Seconds(2100 * time.Millisecond)},
			{Name: "policy", Status: "ok", Duration: checker.Seconds(30 * time.Millisecond)},
			{Name: "run", Status: "ok", Duration: checker.Seconds(3200 * time.Millisecond)},
			{Name: "correctness", Status: "ok"},
			{Name: "performance", Status: "ok", Duration: checker.Seconds(900 * time.Millisecond), Detail: "busbw 312.0 GB/s"},
		},
		Cases: []checker.CaseResult{
			{Case: "small", Rank: 0, OK: true, N: 4096}, {Case: "small", Rank: 1, OK: true, N: 4096},
			{Case: "small", Rank: 2, OK: true, N: 4096}, {Case: "small", Rank: 3, OK: true, N: 4096},
		},
		Perf: &checker.PerfResult{
			Metric: "busbw", Unit: "GB/s", Case: "large", Baseline: "the library all-reduce",
			Cases: []checker.PerfCase{
				{Case: "tiny", Bytes: 4096, Yours: 0.15, Baseline: 0.21, Ratio: 0.71, CILow: 0.66, CIHigh: 0.77},
				{Case: "medium", Bytes: 1 << 20, Yours: 41.5, Baseline: 52.0, Ratio: 0.80, CILow: 0.77, CIHigh: 0.83},
				{Case: "large", Bytes: 256 << 20, Yours: 312.0, Baseline: 335.5, Ratio: 0.93, CILow: 0.91, CIHigh: 0.95},
			},
			Ratio: 0.93, CILow: 0.91, CIHigh: 0.95, Target: 0.8, Runs: 1, Samples: 40, Outcome: checker.Passed,
		},
		Started:  t0,
		Duration: checker.Seconds(6300 * time.Millisecond),
	}
}

// runEvents is a check of the sum exercise up to a running, half-failed run.
func runEvents() []timedEvent {
	return []timedEvent{
		{0, checker.StageStarted{Stage: "environment"}},
		{10 * time.Millisecond, checker.StageDone{Stage: "environment", Status: "ok"}},
		{0, checker.StageStarted{Stage: "build"}},
		{200 * time.Millisecond, checker.BuildLine{Line: "sum.c: In function 'sum':"}},
		{0, checker.BuildLine{Line: "sum.c:1:55: warning: unused parameter 'out' [-Wunused-parameter]"}},
		{220 * time.Millisecond, checker.StageDone{Stage: "build", Status: "ok", Duration: 420 * time.Millisecond}},
		{0, checker.StageStarted{Stage: "policy"}},
		{15 * time.Millisecond, checker.StageDone{Stage: "policy", Status: "ok", Duration: 15 * time.Millisecond}},
		{0, checker.StageStarted{Stage: "run"}},
		{0, checker.RunStarted{Ranks: 2, Run: 1, Dir: "/tmp/run-1"}},
		{100 * time.Millisecond, checker.RankLine{Rank: 0, Line: "rank 0: case small n=1000"}},
		{10 * time.Millisecond, checker.RankLine{Rank: 1, Line: "rank 1: case small n=1000"}},
		{300 * time.Millisecond, checker.RankLine{Rank: 1, Line: "rank 1: \x1b[31mcase odd n=1001\x1b[0m"}},
		{500 * time.Millisecond, checker.RankState{Rank: 0, State: "done"}},
		{700 * time.Millisecond, checker.RankLine{Rank: 1, Line: "still going"}},
	}
}

func teaWindow(w, h int) tea.WindowSizeMsg { return tea.WindowSizeMsg{Width: w, Height: h} }
