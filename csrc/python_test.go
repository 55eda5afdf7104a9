package csrc

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The Python harness's run-time integrity checks (docs/protocol.md §4), with a "learner" module
// that does what the static policy would refuse, to prove the second line holds on its own.

const evilLearner = `import gc, os, pickle, sys
import torch
class Own:
    count = 0
def record(h):
    h.note("forged")
def rebind():
    torch.isnan = lambda t: torch.zeros_like(t, dtype=torch.bool)
class Sneaky(torch.Tensor):
    pass
def sneaky(t):
    return t.as_subclass(Sneaky)
def peek():
    return hasattr(sys.modules["__main__"], "h") or "mgpu_harness" in sys.modules
def unpickle():
    return pickle.loads(pickle.dumps(len))
def walk_gc():
    return len(gc.get_objects())
def open_fd():
    b = sys.stdout.buffer
    return type(getattr(b, "raw", b))(1, "wb", closefd=False)
def frame():
    return sys._getframe(1)
def evaluated():
    return pickle.loads(b"cbuiltins\neval\n(Vsys._getframe(0)\ntR.")
def dispatched():
    import functools
    return functools.singledispatch(sys._getframe)(0)
def logframe():
    import torch
    return torch.export.logging.currentframe()
def spawn():
    import torch.utils.collect_env as ce
    return ce.run("echo forged")
class One(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(torch.ones(4))
    def forward(self, x):
        return (self.p * x).sum()
def ddp():
    # DDP's C++ reducer all-reduces the gradient: no Python function of torch.distributed runs.
    d = torch.nn.parallel.DistributedDataParallel(One())
    d(torch.ones(4)).backward()
def ordinary(library_call):
    import heapq, statistics
    library_call()  # a library (here helperlib) starting a tool (file) the policy lets start
    Own.count += 1
    os.environ["MGPU_TEST_OWN"] = "1"
    return statistics.mean([heapq.nsmallest(1, [3, 1])[0], Own.count])
def later():
    import torch.distributed as dist
    return lambda: dist.barrier()  # run by the driver after this call has returned
def later_forbidden(t):
    import torch.distributed as dist
    return lambda: dist.isend(t, 0)
def shadow(t):
    t.numel = lambda: 0
def tag(t):
    t.mine = 1  # no attribute of a tensor's class: kept
    t.grad = torch.zeros(4)  # a data attribute: set as ever
    return t.mine
`

const guardDriver = `import sys, torch, mgpu_harness
h = mgpu_harness.init(default_cases={"a": 4})
ev = h.import_learner("evil")
what = sys.argv[1]
if what == "record":
    ev.record(h)
elif what == "rebind":
    ev.rebind()
    h.check_equal("a", torch.zeros(4), torch.zeros(4))
elif what == "subclass":
    h.check_equal("a", ev.sneaky(torch.zeros(4)), torch.zeros(4))
elif what == "honest":
    h.check_equal("a", torch.zeros(4), torch.zeros(4))
elif what == "p2pop":
    # torch.distributed.isend is policed (MGPU_FORBID); outside forbid() the driver may still
    # build a P2POp with it before any policed call has run.
    import torch.distributed as dist
    h.init_process_group()
    dist.P2POp(dist.isend, torch.zeros(4), 0)
    h.check_equal("a", torch.zeros(4), torch.zeros(4))
elif what == "peek":
    h.record_case("a", not ev.peek(), n=1)
elif what in ("unpickle", "walk_gc", "open_fd", "frame", "evaluated", "spawn", "dispatched", "logframe"):
    with h.forbid():
        getattr(ev, what)()
    h.record_case("a", True, n=1)
elif what == "chain":
    h.import_learner("evil_chain")
    h.record_case("a", True, n=1)
elif what == "toplevel":
    h.import_learner("evil_top")
    h.record_case("a", True, n=1)
elif what == "ordinary":
    import helperlib
    with h.forbid():
        h.record_case("a", ev.ordinary(helperlib.arch) == 1.0, n=1)
elif what == "tol":
    want = torch.tensor([1.0, 2.0, 3.0, 4.0])
    r = h.compare(want + torch.tensor([0.5, 0.0, 0.0, 2.0]), want, tol=torch.tensor([1.0, 0.0, 0.0, 1.0]))
    h.record_case("a", r.bad == 1 and r.first[0]["i"] == 3, n=1)
elif what in ("late", "late_forbidden"):
    import torch.distributed as dist
    h.init_process_group()
    with h.forbid():
        fn = ev.later() if what == "late" else ev.later_forbidden(torch.zeros(4))
    fn()
    h.record_case("a", True, n=1)
elif what == "shadow":
    t = torch.zeros(4)
    with h.forbid():
        ev.shadow(t)
    h.record_case("a", t.numel() == 4, n=1)
elif what == "tag":
    t = torch.zeros(4)
    with h.forbid():
        ok = ev.tag(t) == 1
    h.record_case("a", ok and t.numel() == 4 and t.grad is not None, n=1)
elif what == "census":
    # Every route a collective can take is counted, each call once, with its bytes.
    import torch.distributed as dist
    import torch.distributed._functional_collectives as fc
    h.init_process_group()
    t = torch.ones(8)
    with h.count_collectives() as seen:
        dist.all_reduce(t)                                  # ProcessGroup method, dispatcher op
        dist.all_gather_into_tensor(torch.empty(8), t)      # another kind
        fc.all_reduce(t, "sum", dist.group.WORLD) + 1       # a functional collective
        dist.group.WORLD._get_backend(torch.device("cpu")).broadcast([t]).wait()  # no dispatcher
        dist.all_to_all_single(torch.empty(2), t[:2].clone())  # received: the output's bytes
        fc.all_to_all_single(t, [8], [8], dist.group.WORLD)  # received: the result's
        dist.barrier()                                      # receives nothing
    dist.all_reduce(t)                                      # after the block: not counted
    # (a barrier's bytes are those of a dummy tensor torch makes: not compared)
    got = [(c.kind, None if c.kind == "barrier" else c.bytes, c.received) for c in seen
           if c.kind != "wait"]
    want = [("all_reduce", 32, 32), ("all_gather", 32, 32), ("all_reduce", 32, 32),
            ("broadcast", 32, 32), ("all_to_all", 8, 8), ("all_to_all", 32, 32),
            ("barrier", None, 0)]
    h.record_case("a", got == want, n=1, msg=str(got))
elif what == "cpp-route":
    h.init_process_group()
    with h.forbid(["torch.distributed.all_reduce"]):
        ev.ddp()
    h.record_case("a", True, n=1)
elif what == "meta":
    h.check_equal("a", torch.empty(4, device="meta"), torch.zeros(4))
elif what == "reading":
    got = mgpu_harness.Unreadable.reading(lambda: torch.zeros(2).view(3), "gradients")
    h.check_equal("a", got, torch.zeros(2))
elif what == "inf":
    h.check_equal("a", torch.tensor([float("inf"), float("-inf"), 0.0, 0.0]), torch.zeros(4))
sys.exit(h.finish())
`

// torchPython is a python that can import torch: $MGPU_LEARN_PYTHON, else the CI venv.
func torchPython(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("MGPU_LEARN_PYTHON"), filepath.Join("..", ".tools", "venv", "bin", "python")}
	for _, py := range cands {
		if py == "" {
			continue
		}
		if err := exec.Command(py, "-c", "import torch").Run(); err == nil {
			return py
		}
	}
	t.Skip("no python with torch (set MGPU_LEARN_PYTHON)")
	return ""
}

func TestPythonHarnessGuards(t *testing.T) {
	py := torchPython(t)
	dir := t.TempDir()
	// evil_top.py walks the garbage collector in its top-level code, while it is imported.
	evilTop := "import gc\nN = len(gc.get_objects())\n"
	// helperlib.py stands for a library (torch) that calls the standard library for the learner.
	helper := "import platform\ndef arch():\n    return platform.architecture()\n"
	// evil_chain.py names the pprint module through torch's attributes, a name no list refuses.
	evilChain := "import torch.fx.graph as g\ndef show(x):\n    return g.pprint.pformat(x)\n"
	for name, body := range map[string]string{"evil.py": evilLearner, "drv.py": guardDriver, "evil_top.py": evilTop,
		"helperlib.py": helper, "evil_chain.py": evilChain} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pyDir, _ := filepath.Abs("python")
	for _, tc := range []struct {
		what, last, want string
		exit             int
	}{
		{"honest", "done", "", 0},
		{"record", "error", "learner code asked the harness to write a 'note' record", 1},
		{"rebind", "error", "torch.isnan was replaced", 1},
		{"subclass", "done", "not a torch.Tensor", 0},
		// Infinities in a result are reported as mismatches (they once crashed the formatting).
		{"inf", "done", `"got":"-inf"`, 0},
		{"p2pop", "done", "", 0},
		{"tol", "done", `"ok":true`, 0},    // a tolerance per element
		{"census", "done", `"ok":true`, 0}, // h.count_collectives
		// A forbidden collective launched from C++ (DDP's reducer) is seen at the dispatcher.
		{"cpp-route", "error", "through torch.ops.c10d.allreduce_", 1},
		// A result with no values to read is a wrong result with its reason, not a crash.
		{"meta", "done", "a meta tensor", 0},
		{"reading", "done", "gradients that cannot be read (RuntimeError", 0},
		// The run-time policy (audit hook): routes the static policy would refuse, taken anyway.
		{"peek", "done", `"ok":true`, 0}, // the driver's globals and the harness are out of sys.modules
		{"unpickle", "error", "pickle.find_class", 1},
		{"walk_gc", "error", "gc.get_objects", 1},
		{"open_fd", "error", "'open'", 1},
		{"frame", "error", "sys._getframe", 1},
		{"evaluated", "error", "evil.py", 1},
		{"spawn", "error", "started a process (sh)", 1}, // a library's subprocess, learner code on the stack
		{"dispatched", "error", "sys._getframe", 1},     // called for it by functools.singledispatch
		{"logframe", "error", "sys._getframe", 1},       // logging (reached through torch) stands for its caller
		{"toplevel", "error", "evil_top.py", 1},         // judged while the learner's module is imported
		{"chain", "error", "the module pprint", 1},      // attribute chains resolved against the real objects
		{"ordinary", "done", `"ok":true`, 0},            // its own class, a fresh allowed import, os.environ
		// Learner code run after its call has returned may not communicate, and a forbidden
		// call is the learner's whenever learner code is on the stack.
		{"late", "error", "while the driver was not calling it", 1},
		{"late_forbidden", "error", "your code called torch.distributed.isend", 1},
		// No instance attribute may hide a tensor's method (t.numel = ...); others are kept.
		{"shadow", "error", "an attribute 'numel' on a tensor", 1},
		{"tag", "done", `"ok":true`, 0},
	} {
		t.Run(tc.what, func(t *testing.T) {
			run := filepath.Join(dir, tc.what)
			cmd := exec.Command(py, filepath.Join(dir, "drv.py"), tc.what)
			cmd.Env = append(os.Environ(), "MGPU_RUN_DIR="+run, "PYTHONPATH="+pyDir+string(os.PathListSeparator)+dir,
				"MGPU_RECORDS=", "PYTHONDONTWRITEBYTECODE=1", "MGPU_FORBID=torch.distributed.isend",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(freePort(t)))
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\n%s", code, tc.exit, out)
			}
			f, err := os.Open(filepath.Join(run, "rank-0.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var recs []map[string]any
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				var r map[string]any
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("%q: %v", sc.Text(), err)
				}
				recs = append(recs, r)
			}
			last := recs[len(recs)-1]
			if last["t"] != tc.last {
				t.Fatalf("last record %v, want %q", last, tc.last)
			}
			all, _ := json.Marshal(recs)
			if tc.want != "" && !strings.Contains(string(all), tc.want) {
				t.Fatalf("records lack %q: %s", tc.want, all)
			}
			if tc.last == "error" && last["where"] != "policy" {
				t.Fatalf("error not a policy error: %v", last)
			}
		})
	}
}

func TestPythonPolicy(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	evil := `import sys, torch
import torch.distributed as dist
import mgpu_harness
h = sys.modules["mgpu_harness"]
torch.eq = lambda a, b: True
f = getattr(torch, "e" + "q")
g = (lambda: 0).__globals__
eval("1")
open("/proc/self/mem")
class T(torch.Tensor): pass
class M:
    def __eq__(self, o): return True
import os
os.write(3, b"x")
m = torch.sys.modules["__main__"]
import __main__ as drv
import pickle
g = getattr
s = "{0.sys}".format(torch)
from typing import get_type_hints
import torch.utils.cpp_extension
w = dist.distributed_c10d._world
T = type("T", (), {})
import json
fmt = "{}"
fmt.format(1)
torch.load("x")
import triton.runtime
import operator, numpy as np
get = operator.attrgetter("x")
v = np.lib.stride_tricks.as_strided
match torch:
    case object(sys=s, __closure__=c, _chan=ch): pass
tt = torch
w = tt.load
arr = torch.zeros(4).numpy()
torch.ops._c10d_functional.all_reduce_coalesced([arr], "sum", "0")
import torch.distributed._functional_collectives as funcol
from torch.ops import c10d
y = torch.ops.c10d.allreduce_
torch.autograd.profiler.profile().__exit__(None, None, None)
from torch import profiler
s = dist.TCPStore("127.0.0.1", 29999, 2, True)
from torch.distributed import FileStore
import torch.distributed.rpc as rpc
import torch.distributed._symmetric_memory as symm_mem
import functools, dataclasses
functools.update_wrapper(m, dist.all_reduce, assigned=("__globals__",), updated=())
Box = dataclasses.make_dataclass("Box", [("__globals__", object, None)])
match m:
    case Box(g): pass
from functools import wraps
store = next(dist.rendezvous("tcp://127.0.0.1:1?rank=0&world_size=1"))
match 3:
    case int(n) if n > 2: pass
torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)
from torch.nn.modules.module import register_module_full_backward_hook
with torch.autograd.graph.saved_tensors_hooks(abs, abs): pass
`
	honest := `import os
import torch
import torch.distributed as dist
from torch import nn
class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(d))
    def forward(self, x):
        rank = int(os.environ.get("LOCAL_RANK", "0"))
        dist.all_reduce(x)
        x.data = x.data / dist.get_world_size()
        return getattr(x, "shape"), rank
    def parts(self):
        self._cache = [m for m in self.modules()]
        return self._cache, "{} {:>4}".format(1, 2), f"{self.w.shape}"
import statistics, heapq, math, operator, functools
from collections import defaultdict
def numel(shape):
    return functools.reduce(operator.mul, shape, 1)
def flat(ts, out):
    torch._foreach_copy_(out, ts)
    return statistics.mean([1, 2]), type(out)
def hooks(model, t):
    model.register_forward_hook(lambda m, i, o: o)
    return t.register_hook(lambda g: g)
`
	ep, hp := filepath.Join(dir, "evil.py"), filepath.Join(dir, "honest.py")
	os.WriteFile(ep, []byte(evil), 0o644)
	os.WriteFile(hp, []byte(honest), 0o644)
	run := func(p string) []string {
		out, err := exec.Command(py, filepath.Join("python", "mgpu_policy.py"), p).Output()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l == "" {
				continue
			}
			var f struct {
				Line int
				What string
			}
			if err := json.Unmarshal([]byte(l), &f); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, strconv.Itoa(f.Line)+" "+f.What)
		}
		return lines
	}
	if got := run(hp); len(got) != 0 {
		t.Fatalf("honest code refused: %q", got)
	}
	got := strings.Join(run(ep), "\n")
	if strings.Contains(got, "\n55 ") {
		t.Errorf("case int(n) (a builtin type matching its subject) refused:\n%s", got)
	}
	for _, want := range []string{"3 import mgpu_harness", "4 sys.modules", "5 torch.eq = ...", "6 getattr(..., <computed name>)",
		"7 .__globals__", "8 eval", "9 open", "10 class T(torch.Tensor)", "12 def __eq__", "14 os.write",
		"15 .sys", "16 import __main__", "17 import pickle", "18 getattr", "19 {0.sys}",
		"20 from typing import get_type_hints", "21 import torch.utils.cpp_extension",
		"22 torch.distributed.distributed_c10d._world", "23 type(name, bases, dict)", "24 import json",
		"26 .format(...)", "27 torch.load", "28 import triton.runtime", "29 import numpy",
		"30 .attrgetter", "33 case ...(sys=...)", "33 case ...(__closure__=...)", "33 case ...(_chan=...)", "35 torch.load", "36 .numpy",
		"37 torch.ops._c10d_functional.all_reduce_coalesced", "38 import torch.distributed._functional_collectives",
		"39 from torch.ops import", "40 torch.ops.c10d.allreduce_",
		"41 torch.autograd.profiler", "42 from torch import profiler", "43 torch.distributed.TCPStore",
		"44 from torch.distributed import FileStore", "45 import torch.distributed.rpc",
		"46 import torch.distributed._symmetric_memory", "48 .update_wrapper", "49 .make_dataclass",
		"51 case C(<positional pattern>)", "52 from functools import wraps", "53 torch.distributed.rendezvous",
		"56 torch.nn.modules.module.register_module_forward_hook", "57 from torch.nn.modules.module import register_module_full_backward_hook",
		"58 torch.autograd.graph.saved_tensors_hooks"} {
		if !strings.Contains(got, want) {
			t.Errorf("no finding %q in:\n%s", want, got)
		}
	}
}

// freePort is a TCP port nothing listens on right now (for a one-rank process group).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
