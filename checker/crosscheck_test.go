package checker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

const crossManifest = `id: module1/pass-right
title: Pass a value to the right
kind: python
task: task.md
files: [pass.py]
driver: driver.py
launch:
  launcher: torchrun
  ranks: "2"
requires:
  gpus: 0
  libs: [torch]
cases:
  - {name: one, n: 1}
timeout: 60s
starter:
  fails_at: correctness
`

// Every rank must end up with the value of its left neighbour, rank - 1.
const crossDriver = `import sys
import torch
import mgpu_harness

h = mgpu_harness.init(default_cases={"one": 1})
learner = h.import_learner("pass")
h.init_process_group()
with h.forbid():
    got = learner.from_left(torch.tensor([float(h.rank)]))
want = float((h.rank - 1) % h.world)
h.record_case("one", got.item() == want, n=1, msg=f"got {got.item()}, want {want} (world {h.world})")
sys.exit(h.finish())
`

const crossRight = `import torch
import torch.distributed as dist


def from_left(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    out = torch.empty_like(x)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, (rank + 1) % world),
                                   dist.P2POp(dist.irecv, out, (rank - 1) % world)])
    for r in reqs:
        r.wait()
    return out
`

// The same exchange the wrong way round: on two ranks left and right are one rank.
var crossWrong = strings.NewReplacer("(rank + 1)", "(rank - 1)", "out, (rank - 1)", "out, (rank + 1)").Replace(crossRight)

// A check of two ranks that passes is run again with three on the CPU (Checker.CrossCheck):
// code that sends the wrong way, right only on two ranks, fails there with a note saying why;
// the right code passes both; without CrossCheck the wrong code passes, which is the hole.
func TestCrossCheck(t *testing.T) {
	py := torchPython(t)
	fsys := fstest.MapFS{
		"lessons/course.yaml":           {Data: []byte("title: t\nmodules: [module1-x]\n")},
		"lessons/module1-x/module.yaml": {Data: []byte("id: module1\ntitle: x\nexercises: [pass-right]\n")},
	}
	dir := "exercises/module1-x/pass-right/"
	fsys[dir+"exercise.yaml"] = &fstest.MapFile{Data: []byte(crossManifest)}
	fsys[dir+"task.md"] = &fstest.MapFile{Data: []byte("# task\n")}
	fsys[dir+"driver.py"] = &fstest.MapFile{Data: []byte(crossDriver)}
	fsys[dir+"starter/pass.py"] = &fstest.MapFile{Data: []byte(crossWrong)}
	fsys[dir+"solution/pass.py"] = &fstest.MapFile{Data: []byte(crossRight)}
	c, err := course.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	e := c.Exercise("module1/pass-right")
	work := t.TempDir()
	ck := &Checker{
		Course:   c,
		Harness:  os.DirFS("../csrc"),
		Launcher: launch.New(),
		Env:      &pyEnv{py: py},
		WorkDir:  filepath.Join(work, "work"),
	}
	yours := func(src string) Target {
		p := filepath.Join(t.TempDir(), "pass.py")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return Target{Exercise: e, Files: map[string]string{"pass.py": p}, Label: "yours"}
	}
	ctx := context.Background()

	r := ck.Check(ctx, yours(crossWrong))
	expect(t, r, Passed, StageCorrectness, "")

	ck.CrossCheck = true
	r = ck.Check(ctx, yours(crossWrong))
	expect(t, r, Failed, StageCorrectness, FaultYou, "got 1.0, want 2.0 (world 3)")
	if r.Run == nil || len(r.Run.Ranks) != CrossRanks || !strings.Contains(strings.Join(r.Notes, "\n"), "correct with 2 ranks, wrong with 3") {
		t.Errorf("cross-check failure: run %+v notes %q", r.Run, r.Notes)
	}

	r = ck.Check(ctx, yours(crossRight))
	expect(t, r, Passed, StageCorrectness, "")
	if len(r.Run.Ranks) != 2 || !strings.Contains(strings.Join(r.Notes, "\n"), "also correct with 3 ranks") {
		t.Errorf("cross-check pass: %d ranks, notes %q", len(r.Run.Ranks), r.Notes)
	}
}

func TestCrossRanks(t *testing.T) {
	e := &course.Exercise{}
	if got := crossRanks(e); got != CrossRanks {
		t.Fatalf("default: %d ranks, want %d", got, CrossRanks)
	}
	e.Launch.CrossCheckRanks = 4
	if got := crossRanks(e); got != 4 {
		t.Fatalf("launch.cross_check_ranks 4: %d ranks", got)
	}
	if got := crossRanks(nil); got != CrossRanks {
		t.Fatalf("no exercise: %d ranks", got)
	}
}
