package checker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/build"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// These tests drive the pipeline with a fake builder and a fake launcher that writes the
// records a harness would, so that every run and correctness path is exercised exactly.

const baseManifest = `id: module0/ex
title: Fake
kind: c
task: task.md
files: [a.c]
driver: driver.c
launch:
  launcher: local
  ranks: "2"
requires:
  gpus: 0
  libs: [cc]
cases:
  - {name: small, n: 8}
  - {name: big, n: 64, on: "0"}
timeout: 5s
starter:
  fails_at: correctness
`

func loadFake(t *testing.T, manifest string) *course.Exercise {
	t.Helper()
	driver := "int main(void) { return 0; }\n"
	if strings.Contains(manifest, "verifier: true") { // a split driver hands its outputs over
		driver = "int main(void) { mgpu_hand_over(0, \"t\", 0, 0); return 0; }\n"
	}
	fsys := fstest.MapFS{
		"lessons/course.yaml":                  {Data: []byte("title: t\nmodules: [module0-x]\n")},
		"lessons/module0-x/module.yaml":        {Data: []byte("id: module0\ntitle: x\nexercises: [ex]\n")},
		"exercises/module0-x/ex/exercise.yaml": {Data: []byte(manifest)},
		"exercises/module0-x/ex/task.md":       {Data: []byte("# task\n")},
		"exercises/module0-x/ex/driver.c":      {Data: []byte(driver)},
		"exercises/module0-x/ex/starter/a.c":   {Data: []byte("/* starter */\n")},
		"exercises/module0-x/ex/solution/a.c":  {Data: []byte("/* solution */\n")},
	}
	c, err := course.Load(fsys)
	if err != nil {
		t.Fatalf("fake course: %v", err)
	}
	return c.Exercise("module0/ex")
}

type fakeEnv struct {
	unmet []string
	gpus  int
	asked course.Requirements // what the last Unmet call asked for
}

func (f *fakeEnv) Unmet(req course.Requirements, _ course.Launch) []string {
	f.asked = req
	return f.unmet
}
func (f *fakeEnv) Toolchain(bool) *build.Toolchain { return &build.Toolchain{CC: "cc"} }
func (f *fakeEnv) GPUCount() int                   { return f.gpus }
func (f *fakeEnv) Python() string                  { return "" }
func (f *fakeEnv) MPI(bool) *launch.MPI            { return nil }

type fakeBuilder struct {
	calls int
	res   *build.Result
	err   error
	req   build.Request
}

func (f *fakeBuilder) Build(_ context.Context, r build.Request) (*build.Result, error) {
	f.calls++
	f.req = r
	if f.err != nil {
		return nil, f.err
	}
	if f.res != nil {
		return f.res, nil
	}
	return &build.Result{OK: true, Binary: "/bin/true", Objects: map[string]string{}}, nil
}

// fakeLauncher runs script for each launch; script writes rank files and returns the result.
type fakeLauncher struct {
	runs   int
	specs  []launch.Spec
	script func(run int, s launch.Spec) (*launch.Result, error)
}

func (f *fakeLauncher) Launch(_ context.Context, s launch.Spec) (*launch.Result, error) {
	f.runs++
	f.specs = append(f.specs, s)
	return f.script(f.runs, s)
}

// rankWriter writes rank r's records.
type rankWriter struct {
	t    *testing.T
	spec launch.Spec
	dir  string
	rank int
	b    strings.Builder
}

func newRank(t *testing.T, s launch.Spec, rank int) *rankWriter {
	w := &rankWriter{t: t, spec: s, dir: s.RunDir, rank: rank}
	w.rec(`"t":"start","world":%d,"local_rank":%d,"device":-1,"gpu":"","pid":%d,"harness":"c/1"`, s.Ranks, rank, 1000+rank)
	return w
}

func (w *rankWriter) rec(format string, args ...any) *rankWriter {
	fmt.Fprintf(&w.b, `{"rank":%d,`+format+"}\n", append([]any{w.rank}, args...)...)
	return w
}

func (w *rankWriter) okCase(name string, n int) *rankWriter {
	return w.rec(`"t":"case","case":%q,"n":%d,"ok":true,"checked":%d,"bad":0,"unwritten":0,"guard_hits":0,"max_abs_err":0,"max_rel_err":0,"first":[]`, name, n, n)
}

func (w *rankWriter) raw(s string) *rankWriter { w.b.WriteString(s); return w }

// done ends the records with the summary a harness computes of what came before.
func (w *rankWriter) done() *rankWriter {
	return w.rec(`"t":"done","summary":%s`, summarize(w.t, w.b.String()))
}

// write sends the records over the run's channel as the harness would.
func (w *rankWriter) write() { sendRecords(w.t, w.spec, w.rank, w.b.String()) }

func result(ranks ...launch.RankResult) *launch.Result {
	res := &launch.Result{FirstFailed: -1, Elapsed: 10 * time.Millisecond}
	now := time.Now()
	for i, r := range ranks {
		r.Rank = i
		if r.State == "" {
			r.State = launch.StateDone
		}
		if r.Started.IsZero() {
			r.Started = now
			r.Ended = now.Add(time.Duration(i+1) * time.Millisecond)
		}
		res.Ranks = append(res.Ranks, r)
	}
	return res
}

// goodRun: both ranks check their cases and finish.
func goodRun(t *testing.T, s launch.Spec) {
	newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
	newRank(t, s, 1).okCase("small", 8).done().write()
}

type setup struct {
	env *fakeEnv
	b   *fakeBuilder
	l   *fakeLauncher
	c   *Checker
	tg  Target
}

func newSetup(t *testing.T, manifest string, script func(t *testing.T, run int, s launch.Spec) *launch.Result) *setup {
	t.Helper()
	e := loadFake(t, manifest)
	dir := t.TempDir()
	learner := filepath.Join(dir, "ws", "a.c")
	if err := os.MkdirAll(filepath.Dir(learner), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(learner, []byte("/* learner */\nint x;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	st := &setup{env: &fakeEnv{}, b: &fakeBuilder{}}
	st.l = &fakeLauncher{script: func(run int, s launch.Spec) (*launch.Result, error) {
		return script(t, run, s), nil
	}}
	st.c = &Checker{
		Harness:  fstest.MapFS{"mgpu.h": {Data: []byte("/* h */")}, "mgpu_core.c": {Data: []byte("/* core */")}, "mgpu_chan.c": {Data: []byte("/* chan */")}},
		Builder:  st.b,
		Launcher: st.l,
		Env:      st.env,
		WorkDir:  filepath.Join(dir, "work"),
	}
	st.tg = Target{Exercise: e, Files: map[string]string{"a.c": learner}, Label: "yours", Root: filepath.Join(dir, "ws")}
	return st
}

func (st *setup) check(t *testing.T) *Report {
	t.Helper()
	r := st.c.Check(context.Background(), st.tg)
	if r == nil {
		t.Fatal("nil report")
	}
	return r
}

func expect(t *testing.T, r *Report, verdict, stage, fault string, words ...string) {
	t.Helper()
	if r.Verdict != verdict || r.Stage != stage || r.Fault != fault {
		t.Fatalf("got verdict %q stage %q fault %q (%s)\n%s", r.Verdict, r.Stage, r.Fault, r.Headline, r.Message)
	}
	all := strings.ToLower(r.Headline + "\n" + r.Message)
	for _, w := range words {
		if !strings.Contains(all, strings.ToLower(w)) {
			t.Errorf("report lacks %q:\n%s\n%s", w, r.Headline, r.Message)
		}
	}
}

func TestPipelinePassesAndSetsEnvironment(t *testing.T) {
	m := strings.Replace(baseManifest, "  ranks: \"2\"\n", "  ranks: \"2\"\n  env: {FOO: bar}\n", 1)
	st := newSetup(t, m, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		goodRun(t, s)
		return result(launch.RankResult{}, launch.RankResult{})
	})
	st.b.res = &build.Result{OK: true, Binary: "/bin/prog", Objects: map[string]string{}, RuntimeEnv: []string{"LD_LIBRARY_PATH=/x"}}
	r := st.check(t)
	expect(t, r, Passed, StageCorrectness, "")
	if r.ExitCode() != 0 {
		t.Fatalf("exit %d", r.ExitCode())
	}
	s := st.l.specs[0]
	env := strings.Join(s.Env, "\n")
	for _, want := range []string{"FOO=bar", "LD_LIBRARY_PATH=/x", "MGPU_EXERCISE=module0/ex", "MGPU_CASES=small=8;big=64", "MGPU_PERF=0", "MGPU_LEARNER_FILES=a.c", "MGPU_RECORDS=unix:"} {
		if !strings.Contains(env, want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	// The seed travels on the records channel only, where the learner's code cannot read it.
	if strings.Contains(env, "MGPU_SEED") {
		t.Errorf("the seed is in the environment:\n%s", env)
	}
	if s.Ranks != 2 || s.Timeout != 5*time.Second || s.Argv[0] != "/bin/prog" || s.Launcher != launch.Local {
		t.Errorf("spec %+v", s)
	}
	// The learner's file is compiled in place and shown relative to the workspace.
	var learner *build.Source
	for i := range st.b.req.Sources {
		if st.b.req.Sources[i].Role == build.RoleLearner {
			learner = &st.b.req.Sources[i]
		}
	}
	if learner == nil || learner.Show != "a.c" || learner.Path != st.tg.Files["a.c"] {
		t.Fatalf("learner source %+v", learner)
	}
	if len(r.Cases) != 3 {
		t.Fatalf("cases %+v", r.Cases)
	}
	// The perf stage is skipped and says why.
	last := r.Stages[len(r.Stages)-1]
	if last.Name != StagePerformance || last.Status != StatusSkipped {
		t.Fatalf("last stage %+v", last)
	}
}

func TestPipelineSeedsDiffer(t *testing.T) {
	st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		goodRun(t, s)
		return result(launch.RankResult{}, launch.RankResult{})
	})
	r1, r2 := st.check(t), st.check(t)
	if r1.Run.Seed == r2.Run.Seed {
		t.Fatalf("two runs got the same seed %s", r1.Run.Seed)
	}
}

func TestPipelineRefusedBeforeBuilding(t *testing.T) {
	st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		t.Fatal("launched")
		return nil
	})
	st.env.unmet = []string{"4 GPUs (this machine has 0)", "NCCL"}
	r := st.check(t)
	expect(t, r, Refused, StageEnvironment, FaultMachine, "4 GPUs", "NCCL")
	if r.ExitCode() != 3 || st.b.calls != 0 {
		t.Fatalf("exit %d, builder called %d times", r.ExitCode(), st.b.calls)
	}
}

func TestPipelineBuildFailures(t *testing.T) {
	noRun := func(t *testing.T, run int, s launch.Spec) *launch.Result { t.Fatal("launched"); return nil }
	t.Run("learner error", func(t *testing.T) {
		st := newSetup(t, baseManifest, noRun)
		st.b.res = &build.Result{OK: false, Log: "a.c:2:5: error: boom\n", Diagnostics: []build.Diagnostic{
			{File: "a.c", Line: 2, Severity: "error", Msg: "boom"}, {File: "a.c", Line: 3, Severity: "error", Msg: "more"}}}
		r := st.check(t)
		expect(t, r, Failed, StageBuild, FaultYou, "a.c:2", "boom", "2 errors", "build.log", "int x;")
		if r.Build == nil || r.Build.Log == "" || !r.Build.Diagnostics[0].Learner {
			t.Fatalf("build summary %+v", r.Build)
		}
		if data, err := os.ReadFile(r.Build.Log); err != nil || !strings.Contains(string(data), "boom") {
			t.Fatalf("log file: %v %q", err, data)
		}
	})
	t.Run("course error", func(t *testing.T) {
		st := newSetup(t, baseManifest, noRun)
		st.b.res = &build.Result{OK: false, Log: "x", Diagnostics: []build.Diagnostic{
			{File: "exercises/module0-x/ex/driver.c", Line: 1, Severity: "error", Msg: "oops"}}}
		r := st.check(t)
		expect(t, r, Errored, StageBuild, FaultRunner, "course", "driver.c:1")
		if r.ExitCode() != 4 {
			t.Fatalf("exit %d", r.ExitCode())
		}
	})
	t.Run("undefined reference", func(t *testing.T) {
		st := newSetup(t, baseManifest, noRun)
		st.b.res = &build.Result{OK: false, Log: "/usr/bin/ld: driver.o: in function `main':\ndriver.c:(.text+0x1): undefined reference to `vec_sum'\ncollect2: error: ld returned 1 exit status\n"}
		r := st.check(t)
		expect(t, r, Failed, StageBuild, FaultYou, "vec_sum", "link")
	})
	t.Run("missing library", func(t *testing.T) {
		st := newSetup(t, baseManifest, noRun)
		st.b.res = &build.Result{OK: false, Log: "/usr/bin/ld: cannot find -lnccl: No such file or directory\n"}
		r := st.check(t)
		expect(t, r, Errored, StageBuild, FaultRunner, "library")
	})
	t.Run("builder broken", func(t *testing.T) {
		st := newSetup(t, baseManifest, noRun)
		st.b.err = errors.New("cannot exec cc")
		r := st.check(t)
		expect(t, r, Errored, StageBuild, FaultRunner, "cannot exec cc")
	})
	t.Run("learner file missing", func(t *testing.T) {
		st := newSetup(t, baseManifest, noRun)
		os.Remove(st.tg.Files["a.c"])
		r := st.check(t)
		expect(t, r, Failed, StageBuild, FaultYou, "a.c", "missing", "reset")
	})
}

func TestPipelineRunFailures(t *testing.T) {
	cases := []struct {
		name                  string
		script                func(t *testing.T, s launch.Spec) *launch.Result
		verdict, stage, fault string
		words                 []string
	}{
		{"launcher error", nil, Errored, StageRun, FaultRunner, []string{"launcher failed", "no such program"}},
		{"learner error record", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).rec(`"t":"error","where":"learner","call":"cudaMemcpy(d, h, n, k)","file":"a.c","line":12,"code":1,"msg":"invalid argument"`).write()
			res := result(launch.RankResult{}, launch.RankResult{State: launch.StateFailed, ExitCode: 1, Tail: "[rank 1] cudaMemcpy failed\n"})
			res.FirstFailed = 1
			return res
		}, Failed, StageRun, FaultYou, []string{"rank 1", "cudaMemcpy", "a.c:12", "invalid argument", "your code", "| [rank 1] cudaMemcpy failed"}},
		{"harness error record", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).rec(`"t":"error","where":"harness","call":"mgpu_init","file":"mgpu_core.c","line":99,"code":0,"msg":"MGPU_CASES is malformed"`).write()
			newRank(t, s, 1).okCase("small", 8).done().write()
			res := result(launch.RankResult{State: launch.StateFailed, ExitCode: 1}, launch.RankResult{})
			res.FirstFailed = 0
			return res
		}, Errored, StageRun, FaultRunner, []string{"mgpu_init", "malformed"}},
		{"sticky error in driver blames the kernel", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).rec(`"t":"error","where":"driver","call":"cudaDeviceSynchronize()","file":"driver.cu","line":40,"code":700,"msg":"an illegal memory access was encountered"`).write()
			newRank(t, s, 1).okCase("small", 8).done().write()
			res := result(launch.RankResult{State: launch.StateFailed, ExitCode: 1}, launch.RankResult{})
			res.FirstFailed = 0
			return res
		}, Failed, StageRun, FaultYou, []string{"illegal memory access", "out of bounds"}},
		{"signal", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).write()
			newRank(t, s, 1).okCase("small", 8).done().write()
			res := result(launch.RankResult{State: launch.StateSignaled, ExitCode: -1, Signal: "SIGSEGV", Tail: "about to crash\n"}, launch.RankResult{})
			res.FirstFailed = 0
			return res
		}, Failed, StageRun, FaultYou, []string{"rank 0", "SIGSEGV", "about to crash"}},
		{"killed ranks are not blamed", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).write()
			newRank(t, s, 1).write()
			res := result(launch.RankResult{State: launch.StateKilled, ExitCode: -1, Signal: "SIGTERM"}, launch.RankResult{State: launch.StateSignaled, ExitCode: -1, Signal: "SIGABRT"})
			res.FirstFailed = 1
			return res
		}, Failed, StageRun, FaultYou, []string{"rank 1", "SIGABRT"}},
		{"exit 0 without done", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).okCase("small", 8).write()
			return result(launch.RankResult{}, launch.RankResult{})
		}, Failed, StageRun, FaultYou, []string{"crash: no done record", "rank 1"}},
		{"no record file", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			return result(launch.RankResult{}, launch.RankResult{})
		}, Failed, StageRun, FaultYou, []string{"no done record", "rank 1", "never started"}},
		{"truncated last record", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).raw(`{"t":"case","ra`).write()
			res := result(launch.RankResult{}, launch.RankResult{State: launch.StateSignaled, ExitCode: -1, Signal: "SIGKILL"})
			res.FirstFailed = 1
			return res
		}, Failed, StageRun, FaultYou, []string{"rank 1", "SIGKILL"}},
		{"garbage record", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).raw("garbage\n").okCase("big", 64).done().write()
			newRank(t, s, 1).okCase("small", 8).done().write()
			return result(launch.RankResult{}, launch.RankResult{})
		}, Errored, StageRun, FaultRunner, []string{"rank-0.jsonl:3", "not a JSON record"}},
		{"hung", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).write()
			newRank(t, s, 1).okCase("small", 8).done().write()
			res := result(launch.RankResult{State: launch.StateHung, ExitCode: -1, Signal: "SIGKILL", Tail: "waiting in allreduce\n"}, launch.RankResult{})
			res.TimedOut = true
			return res
		}, Failed, StageRun, FaultYou, []string{"hung", "rank 0 never finished", "ncclGroupStart", "collective", "waiting in allreduce"}},
		{"hung under mpirun (states unknown)", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).okCase("small", 8).write()
			res := result(launch.RankResult{State: launch.StateUnknown}, launch.RankResult{State: launch.StateUnknown})
			res.TimedOut = true
			return res
		}, Failed, StageRun, FaultYou, []string{"rank 1 never finished"}},
		{"wrong case", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).rec(`"t":"case","case":"small","n":8,"ok":false,"checked":8,"bad":1,"unwritten":1,"guard_hits":4,"max_abs_err":3,"max_rel_err":0.5,"first":[{"i":7,"got":"NaN(poison)","want":"5"}],"msg":"driver says hi"`).done().write()
			return result(launch.RankResult{}, launch.RankResult{})
		}, Failed, StageCorrectness, FaultYou, []string{"case small", "rank 1", "[7] got NaN(poison), want 5", "never written", "guard", "driver says hi"}},
		{"missing case", func(t *testing.T, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).done().write() // big is expected on rank 0
			newRank(t, s, 1).okCase("small", 8).done().write()
			return result(launch.RankResult{}, launch.RankResult{})
		}, Errored, StageCorrectness, FaultRunner, []string{"big on rank 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
				return tc.script(t, s)
			})
			if tc.script == nil {
				st.l.script = func(int, launch.Spec) (*launch.Result, error) { return nil, errors.New("no such program") }
			}
			r := st.check(t)
			expect(t, r, tc.verdict, tc.stage, tc.fault, tc.words...)
		})
	}
}

const perfManifest = baseManifest + `perf:
  case: main
  metric: time
  baseline: the loop
  min_ratio: 0.8
  suspect_above: 2
  fail_hint: try harder
  cases: [{name: main, n: 100}]
`

// perfRun writes a good correctness run plus timings with the given yours/baseline times.
func perfRun(t *testing.T, s launch.Spec, yours, base []float64) *launch.Result {
	js := func(xs []float64) string {
		var p []string
		for _, x := range xs {
			p = append(p, fmt.Sprint(x))
		}
		return "[" + strings.Join(p, ",") + "]"
	}
	for r := 0; r < 2; r++ {
		w := newRank(t, s, r).okCase("small", 8)
		if r == 0 {
			w.okCase("big", 64)
		}
		w.rec(`"t":"timing","case":"main","who":"yours","bytes":800,"factor":1,"metric":"time","us":%s,"wall_us":%s`, js(yours), js(yours))
		w.rec(`"t":"timing","case":"main","who":"baseline","bytes":800,"factor":1,"metric":"time","us":%s,"wall_us":%s`, js(base), js(base))
		w.rec(`"t":"value","name":"gbps","value":12.5,"unit":"GB/s"`).rec(`"t":"note","msg":"hello"`)
		w.done().write()
	}
	return result(launch.RankResult{}, launch.RankResult{})
}

func steady(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v * (1 + 0.01*float64(i%3-1))
	}
	return out
}

func TestPipelinePerf(t *testing.T) {
	t.Run("skipped without Perf", func(t *testing.T) {
		st := newSetup(t, perfManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			if !strings.Contains(strings.Join(s.Env, " "), "MGPU_PERF=0") {
				t.Error("MGPU_PERF should be 0")
			}
			return perfRun(t, s, steady(300, 20), steady(100, 20))
		})
		r := st.check(t)
		expect(t, r, Passed, StageCorrectness, "")
		if r.Perf != nil || len(r.Notes) == 0 || !strings.Contains(strings.Join(r.Notes, " "), "not judged") {
			t.Fatalf("perf %+v notes %q", r.Perf, r.Notes)
		}
	})
	t.Run("pass", func(t *testing.T) {
		st := newSetup(t, perfManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			env := strings.Join(s.Env, " ")
			for _, w := range []string{"MGPU_PERF=1", "MGPU_PERF_CASES=main=100", "MGPU_PERF_MIN_REPS=", "MGPU_PERF_BUDGET_MS="} {
				if !strings.Contains(env, w) {
					t.Errorf("env lacks %s", w)
				}
			}
			return perfRun(t, s, steady(100, 20), steady(100, 20))
		})
		st.c.Perf = true
		r := st.check(t)
		expect(t, r, Passed, StagePerformance, "", "passed")
		if st.l.runs != 1 || r.Perf == nil || r.Perf.Outcome != Passed || len(r.Values) != 2 || r.Notes[0] != "hello" {
			t.Fatalf("runs %d perf %+v values %+v notes %q", st.l.runs, r.Perf, r.Values, r.Notes)
		}
	})
	t.Run("fail", func(t *testing.T) {
		st := newSetup(t, perfManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			return perfRun(t, s, steady(300, 20), steady(100, 20))
		})
		st.c.Perf = true
		r := st.check(t)
		expect(t, r, Failed, StagePerformance, FaultYou, "too slow", "try harder")
	})
	t.Run("undecided re-runs, then inconclusive", func(t *testing.T) {
		st := newSetup(t, perfManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			// Ratios spread across the target: 0.6 .. 1.1.
			y := []float64{100, 160, 110, 150, 120, 140, 130, 90, 165, 105}
			return perfRun(t, s, y, steady(100, 10))
		})
		st.c.Perf = true
		st.c.MaxPerfRuns = 2
		r := st.check(t)
		expect(t, r, Inconclusive, StagePerformance, "", "inconclusive")
		if st.l.runs != 2 || r.Perf.Runs != 2 || r.Perf.Samples != 20 || r.ExitCode() != 5 || r.Run.Runs != 2 {
			t.Fatalf("runs %d, perf %+v", st.l.runs, r.Perf)
		}
	})
	t.Run("correctness re-checked on every run", func(t *testing.T) {
		st := newSetup(t, perfManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			if run == 2 {
				newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
				newRank(t, s, 1).rec(`"t":"case","case":"small","n":8,"ok":false,"checked":8,"bad":2,"unwritten":0,"guard_hits":0,"max_abs_err":1,"max_rel_err":1,"first":[]`).done().write()
				return result(launch.RankResult{}, launch.RankResult{})
			}
			y := []float64{100, 160, 110, 150, 120, 140, 130, 90, 165, 105}
			return perfRun(t, s, y, steady(100, 10))
		})
		st.c.Perf = true
		r := st.check(t)
		expect(t, r, Failed, StageCorrectness, FaultYou, "case small", "rank 1")
	})
	t.Run("no timings", func(t *testing.T) {
		st := newSetup(t, perfManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			goodRun(t, s)
			return result(launch.RankResult{}, launch.RankResult{})
		})
		st.c.Perf = true
		r := st.check(t)
		expect(t, r, Errored, StagePerformance, FaultRunner, "main")
	})
}

func TestPipelineRanks(t *testing.T) {
	m := strings.Replace(baseManifest, `ranks: "2"`, `ranks: all`, 1)
	var got []int
	st := newSetup(t, m, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		got = append(got, s.Ranks)
		var rr []launch.RankResult
		for r := 0; r < s.Ranks; r++ {
			w := newRank(t, s, r).okCase("small", 8)
			if r == 0 {
				w.okCase("big", 64)
			}
			w.done().write()
			rr = append(rr, launch.RankResult{})
		}
		return result(rr...)
	})
	st.check(t) // no GPUs: 2
	st.env.gpus = 4
	st.check(t)
	st.c.Ranks = 3
	st.check(t)
	if fmt.Sprint(got) != "[2 4 3]" {
		t.Fatalf("ranks %v, want [2 4 3]", got)
	}
}

func TestPipelineEvents(t *testing.T) {
	st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		goodRun(t, s)
		if s.Output != nil {
			s.Output(1, "hello from 1")
		}
		return result(launch.RankResult{}, launch.RankResult{})
	})
	var evs []string
	st.c.Events = func(e Event) {
		switch e := e.(type) {
		case StageStarted:
			evs = append(evs, "start:"+e.Stage)
		case StageDone:
			evs = append(evs, "done:"+e.Stage+":"+e.Status)
		case RunStarted:
			evs = append(evs, fmt.Sprintf("run:%d", e.Ranks))
		case RankLine:
			evs = append(evs, fmt.Sprintf("line:%d:%s", e.Rank, e.Line))
		case RankState:
			evs = append(evs, fmt.Sprintf("state:%d:%s", e.Rank, e.State))
		}
	}
	st.check(t)
	got := strings.Join(evs, " ")
	want := "start:environment done:environment:ok start:build done:build:ok start:policy done:policy:ok start:run run:2 line:1:hello from 1 state:0:done state:1:done done:run:ok start:correctness done:correctness:ok start:performance done:performance:skipped"
	if got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}
}

func TestBuildOnly(t *testing.T) {
	st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		t.Fatal("Build must not run the program")
		return nil
	})
	r := st.c.Build(context.Background(), st.tg)
	expect(t, r, Passed, StagePolicy, "", "built")
	if len(r.Stages) != 3 {
		t.Fatalf("stages %+v", r.Stages)
	}
}

func TestCheckerMisconfigured(t *testing.T) {
	r := (&Checker{}).Check(context.Background(), Target{})
	expect(t, r, Errored, StageEnvironment, FaultRunner, "without")
}

func TestExitCodes(t *testing.T) {
	codes := map[string]int{Passed: 0, Failed: 1, Refused: 3, Errored: 4, Inconclusive: 5}
	for v, c := range codes {
		if got := (&Report{Verdict: v}).ExitCode(); got != c {
			t.Errorf("%s: %d, want %d", v, got, c)
		}
	}
	rs := []*Report{{Verdict: Passed}, {Verdict: Inconclusive}, {Verdict: Failed}, {Verdict: Refused}}
	if got := ExitCode(rs); got != 1 {
		t.Errorf("combined %d, want 1", got)
	}
	if got := ExitCode(append(rs, &Report{Verdict: Errored})); got != 4 {
		t.Errorf("combined with an error %d, want 4", got)
	}
	if ExitCode(nil) != 0 {
		t.Error("no reports")
	}
}

func TestPipelineDistrustsCaseRecords(t *testing.T) {
	t.Run("ok with wrong elements", func(t *testing.T) {
		st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).rec(`"t":"case","case":"small","n":8,"ok":true,"checked":8,"bad":1,"unwritten":0,"guard_hits":0,"max_abs_err":1,"max_rel_err":1,"first":[]`).done().write()
			return result(launch.RankResult{}, launch.RankResult{})
		})
		expect(t, st.check(t), Failed, StageCorrectness, FaultYou, "case small", "rank 1")
	})
	t.Run("ok without checking", func(t *testing.T) {
		st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).rec(`"t":"case","case":"small","n":8,"ok":true,"checked":0,"bad":0,"unwritten":0,"guard_hits":0,"max_abs_err":0,"max_rel_err":0,"first":[]`).done().write()
			return result(launch.RankResult{}, launch.RankResult{})
		})
		expect(t, st.check(t), Errored, StageCorrectness, FaultRunner, "checked nothing", "small on rank 1")
	})
	t.Run("duplicate record, one failing", func(t *testing.T) {
		st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			newRank(t, s, 0).okCase("small", 8).okCase("big", 64).done().write()
			newRank(t, s, 1).okCase("small", 8).rec(`"t":"case","case":"small","n":8,"ok":false,"checked":8,"bad":3,"unwritten":0,"guard_hits":0,"max_abs_err":1,"max_rel_err":1,"first":[]`).done().write()
			return result(launch.RankResult{}, launch.RankResult{})
		})
		expect(t, st.check(t), Failed, StageCorrectness, FaultYou, "3 of 8")
	})
	t.Run("rendezvous timeout blames the missing rank", func(t *testing.T) {
		st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
			newRank(t, s, 0).rec(`"t":"error","where":"harness","call":"mgpu_barrier","file":"mgpu_core.c","line":908,"code":0,"msg":"barrier \"x\" (#1): rank 1 did not arrive within 60 s (crashed, hung, or at a different barrier)"`).write()
			newRank(t, s, 1).okCase("small", 8).done().write()
			res := result(launch.RankResult{State: launch.StateFailed, ExitCode: 1}, launch.RankResult{})
			res.FirstFailed = 0
			return res
		})
		expect(t, st.check(t), Failed, StageRun, FaultYou, "rank 1 did not arrive", "never came")
	})
}

// The environment stage asks for what building needs too, so a machine without the compiler
// refuses the check with the reason instead of failing at the build stage.
func TestEnvironmentAsksForTheCompiler(t *testing.T) {
	m := strings.Replace(baseManifest, "  libs: [cc]\n", "", 1)
	st := newSetup(t, m, func(t *testing.T, run int, s launch.Spec) *launch.Result { return nil })
	st.env.unmet = []string{"needs cc"}
	r := st.check(t)
	if !slices.Contains(st.env.asked.Libs, "cc") {
		t.Errorf("Unmet was asked for %v, want cc among them", st.env.asked.Libs)
	}
	if r.Verdict != Refused || r.ExitCode() != 3 {
		t.Errorf("verdict %s (exit %d), want refused (3)", r.Verdict, r.ExitCode())
	}
	if st.b.calls != 0 {
		t.Errorf("the builder ran %d times for a refused check", st.b.calls)
	}
}

func TestPipelineTorchrunChoice(t *testing.T) {
	var specs []launch.Spec
	st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		specs = append(specs, s)
		goodRun(t, s)
		return result(launch.RankResult{}, launch.RankResult{})
	})
	// The loader only lets Python exercises name torchrun; the launch choice is all that matters here.
	st.tg.Exercise.Launch.Launcher = launch.Torchrun
	st.b.res = &build.Result{OK: true, Binary: "/bin/prog", Objects: map[string]string{}}
	expect(t, st.check(t), Passed, StageCorrectness, "")
	st.c.Torchrun = "/venv/bin/torchrun"
	expect(t, st.check(t), Passed, StageCorrectness, "")
	if len(specs) != 2 || specs[0].UseTorchrun || specs[0].Torchrun != "" {
		t.Fatalf("default must spawn ranks directly: %+v", specs)
	}
	if !specs[1].UseTorchrun || specs[1].Torchrun != "/venv/bin/torchrun" || specs[1].Launcher != launch.Torchrun {
		t.Fatalf("Checker.Torchrun must reach the launcher: %+v", specs[1])
	}
	// Other launchers ignore it.
	st2 := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		if s.UseTorchrun {
			t.Errorf("local launch asked for torchrun")
		}
		goodRun(t, s)
		return result(launch.RankResult{}, launch.RankResult{})
	})
	st2.b.res = st.b.res
	st2.c.Torchrun = "/venv/bin/torchrun"
	expect(t, st2.check(t), Passed, StageCorrectness, "")
}
