package checker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/build"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// A run whose warm interpreter died under the ranks proves nothing: it is run again cold, on a
// fresh channel, and only that run is judged.
func TestPipelineRerunsColdWhenWarmRanksAreLost(t *testing.T) {
	st := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		if run == 1 {
			// Records that would pass, from ranks whose ends are unknown.
			goodRun(t, s)
			res := result(launch.RankResult{State: launch.StateUnknown, ExitCode: -1}, launch.RankResult{State: launch.StateUnknown, ExitCode: -1})
			res.Warm = 2
			return res
		}
		goodRun(t, s)
		return result(launch.RankResult{}, launch.RankResult{})
	})
	lost := st.l.script
	st.l.script = func(run int, s launch.Spec) (*launch.Result, error) {
		res, err := lost(run, s)
		if run == 1 {
			return res, launch.ErrWarmLost
		}
		return res, err
	}
	r := st.check(t)
	expect(t, r, Passed, StageCorrectness, "")
	if st.l.runs != 2 {
		t.Fatalf("%d launches, want the lost one and a cold one", st.l.runs)
	}
	first, second := st.l.specs[0], st.l.specs[1]
	if first.NoWarm || !second.NoWarm {
		t.Errorf("NoWarm: first %v, second %v", first.NoWarm, second.NoWarm)
	}
	if envValue(first.Env, "MGPU_RECORDS") == envValue(second.Env, "MGPU_RECORDS") {
		t.Error("the cold run reused the lost run's records channel")
	}
	if d := stageDetail(r, StageRun); strings.Contains(d, "warm") {
		t.Errorf("run detail %q: the judged run was cold", d)
	}

	// A run from a warm interpreter says so.
	st2 := newSetup(t, baseManifest, func(t *testing.T, run int, s launch.Spec) *launch.Result {
		goodRun(t, s)
		res := result(launch.RankResult{Warm: true}, launch.RankResult{Warm: true})
		res.Warm = 2
		return res
	})
	r = st2.check(t)
	expect(t, r, Passed, StageCorrectness, "")
	if d := stageDetail(r, StageRun); !strings.Contains(d, "2 rank(s) from a warm interpreter") {
		t.Errorf("run detail %q", d)
	}
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func stageDetail(r *Report, name string) string {
	for _, s := range r.Stages {
		if s.Name == name {
			return s.Detail
		}
	}
	return ""
}

// pyEnv is a machine without GPUs whose Python has torch.
type pyEnv struct{ py string }

func (e *pyEnv) Unmet(course.Requirements, course.Launch) []string { return nil }
func (e *pyEnv) Toolchain(bool) *build.Toolchain                   { return nil }
func (e *pyEnv) GPUCount() int                                     { return 0 }
func (e *pyEnv) Python() string                                    { return e.py }
func (e *pyEnv) MPI(bool) *launch.MPI                              { return nil }

func torchPython(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("warm ranks are Linux-only")
	}
	for _, c := range []string{os.Getenv("MGPU_LEARN_PYTHON"), filepath.Join("..", ".tools", "venv", "bin", "python")} {
		if c != "" && exec.Command(c, "-c", "import torch").Run() == nil {
			abs, _ := filepath.Abs(c)
			return abs
		}
	}
	t.Skip("no python with torch (set MGPU_LEARN_PYTHON)")
	return ""
}

const warmManifest = `id: module1/%s
title: Warm
kind: python
task: task.md
files: [leak.py]
driver: driver.py
launch:
  launcher: torchrun
  ranks: "2"
requires:
  gpus: 0
  libs: [torch]
cases:
  - {name: fresh, n: 1}
timeout: 60s
starter:
  fails_at: correctness
`

// The learner's code changes process-wide state the static policy allows (torch's default
// dtype and its random generator, a global of its own module) and reports what it found of an
// earlier check.
const leakLearner = `import torch

CALLS = []


def visit():
    seen = []
    if torch.get_default_dtype() != torch.float32:
        seen.append("torch's default dtype")
    if torch.initial_seed() == 1234:
        seen.append("torch's seed")
    if CALLS:
        seen.append("the module's global")
    CALLS.append(1)
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(1234)
    return seen
`

const leakDriver = `import sys
import torch
import torch.distributed as dist
import mgpu_harness

h = mgpu_harness.init(default_cases={"fresh": 1})
assert not torch.cuda.is_initialized()
learner = h.import_learner("leak")
with h.forbid():
    seen = learner.visit()
h.init_process_group()  # gloo between two forked ranks
t = torch.tensor([float(h.rank + 1)], dtype=torch.float32)
dist.all_reduce(t)
if t.item() != h.world * (h.world + 1) / 2:
    seen.append(f"an all-reduce sum of {t.item()}")
h.record_case("fresh", not seen, n=1, msg=("saw " + ", ".join(seen)) if seen else None)
sys.exit(h.finish())
`

// A driver whose rank forks before the harness starts: the records come from the child, not
// from the process the launcher started.
const forkDriver = `import os, sys
pid = os.fork()
if pid:
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
import mgpu_harness
h = mgpu_harness.init(default_cases={"fresh": 1})
learner = h.import_learner("leak")
h.record_case("fresh", True, n=1)
sys.exit(h.finish())
`

func warmCourse(t *testing.T) *course.Course {
	t.Helper()
	fsys := fstest.MapFS{
		"lessons/course.yaml":           {Data: []byte("title: t\nmodules: [module1-x]\n")},
		"lessons/module1-x/module.yaml": {Data: []byte("id: module1\ntitle: x\nexercises: [leak, forked]\n")},
	}
	for name, driver := range map[string]string{"leak": leakDriver, "forked": forkDriver} {
		dir := "exercises/module1-x/" + name + "/"
		fsys[dir+"exercise.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(warmManifest, "%s", name, 1))}
		fsys[dir+"task.md"] = &fstest.MapFile{Data: []byte("# task\n")}
		fsys[dir+"driver.py"] = &fstest.MapFile{Data: []byte(driver)}
		fsys[dir+"starter/leak.py"] = &fstest.MapFile{Data: []byte(leakLearner)}
		fsys[dir+"solution/leak.py"] = &fstest.MapFile{Data: []byte(leakLearner)}
	}
	c, err := course.Load(fsys)
	if err != nil {
		t.Fatalf("warm course: %v", err)
	}
	return c
}

// Two checks through one pool: the second check's ranks see nothing the first one's learner
// code changed, and both ran from the warm interpreter. A rank whose records come from a
// process it forked is still caught by the channel's peer check.
func TestWarmChecksShareNothing(t *testing.T) {
	py := torchPython(t)
	c := warmCourse(t)
	script, err := os.ReadFile("../csrc/python/mgpu_zygote.py")
	if err != nil {
		t.Fatal(err)
	}
	pool := launch.NewWarmPool(script)
	defer pool.Close()
	ctx := launch.WithWarm(context.Background(), pool)
	dir := t.TempDir()
	ck := &Checker{
		Course:   c,
		Harness:  os.DirFS("../csrc"),
		Launcher: launch.New(),
		Env:      &pyEnv{py: py},
		WorkDir:  filepath.Join(dir, "work"),
	}
	for i := 0; i < 2; i++ {
		tg, err := SolutionTarget(c.Exercise("module1/leak"), filepath.Join(dir, "solutions"))
		if err != nil {
			t.Fatal(err)
		}
		r := ck.Check(ctx, tg)
		expect(t, r, Passed, StageCorrectness, "")
		if d := stageDetail(r, StageRun); !strings.Contains(d, "from a warm interpreter") {
			t.Fatalf("check %d: run detail %q (%s)", i+1, d, pool.Stats().LastErr)
		}
	}

	tg, err := SolutionTarget(c.Exercise("module1/forked"), filepath.Join(dir, "solutions"))
	if err != nil {
		t.Fatal(err)
	}
	r := ck.Check(ctx, tg)
	expect(t, r, Failed, StageRun, FaultYou, "records not written by the harness", "not from the rank's own process")
	if r.Run == nil || len(r.Run.Ranks) != 2 {
		t.Fatalf("run summary %+v", r.Run)
	}
	if st := pool.Stats(); st.Forks < 6 {
		t.Errorf("pool forked %d ranks, want all 6 warm", st.Forks)
	}
}
