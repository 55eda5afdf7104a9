package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testPython is a real interpreter (not a shim that execs one), or the test is skipped.
func testPython(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("warm ranks are Linux-only")
	}
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skip("no python3")
	}
	return strings.TrimSpace(string(out))
}

// testPool is a pool whose zygotes preload json only (fast), closed with the test.
func testPool(t *testing.T, preload ...string) *WarmPool {
	t.Helper()
	script, err := os.ReadFile(filepath.Join("..", "..", "csrc", "python", "mgpu_zygote.py"))
	if err != nil {
		t.Fatal(err)
	}
	p := NewWarmPool(script)
	p.Preload = []string{"json"}
	if len(preload) > 0 {
		p.Preload = preload
	}
	t.Cleanup(func() {
		p.Close()
	})
	return p
}

// pyDriver writes a driver script into a fresh directory and returns its path.
func pyDriver(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "driver.py")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// describe prints what a rank sees of itself as one JSON line: the test compares warm ranks
// with cold ones.
const describe = `import os, sys, json, subprocess
cenv = subprocess.run(["env", "-0"], capture_output=True).stdout.decode().split("\0")
print("DESC " + json.dumps({
    "argv": sys.argv, "path": sys.path, "env": dict(os.environ),
    "cenv": sorted(e for e in cenv if e), "cwd": os.getcwd(), "pid": os.getpid(),
    "main": sys.modules["__main__"].__file__, "name": __name__,
    "orig_argv": sys.orig_argv[1:], "bytecode": sys.dont_write_bytecode,
    "fds": sorted(int(f) for f in os.listdir("/proc/self/fd")),
    "pgid": os.getpgid(0) == os.getpid(),
}), flush=True)
`

type description struct {
	Argv     []string          `json:"argv"`
	Path     []string          `json:"path"`
	Env      map[string]string `json:"env"`
	CEnv     []string          `json:"cenv"`
	Cwd      string            `json:"cwd"`
	PID      int               `json:"pid"`
	Main     string            `json:"main"`
	Name     string            `json:"name"`
	OrigArgv []string          `json:"orig_argv"`
	Bytecode bool              `json:"bytecode"`
	FDs      []int             `json:"fds"`
	PGID     bool              `json:"pgid"`
}

func describeOf(t *testing.T, tail string) description {
	t.Helper()
	for _, line := range strings.Split(tail, "\n") {
		if rest, ok := strings.CutPrefix(line, "DESC "); ok {
			var d description
			if err := json.Unmarshal([]byte(rest), &d); err != nil {
				t.Fatalf("%v: %s", err, rest)
			}
			return d
		}
	}
	t.Fatalf("no description in %q", tail)
	return description{}
}

func warmLaunch(t *testing.T, pool *WarmPool, s Spec) *Result {
	t.Helper()
	res, err := New().Launch(WithWarm(context.Background(), pool), s)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	return res
}

// A warm rank is the process `python driver.py` would have been: same argv, sys.path,
// environment (Python's and the C library's), working directory, __main__, descriptors.
func TestWarmRankLooksLikeColdRank(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t)
	drv := pyDriver(t, describe)
	lib := t.TempDir()
	s := spec(t, Local, 2, py, drv, "arg1", "two words")
	s.Dir = t.TempDir()
	s.Env = []string{"PYTHONPATH=" + lib + ":relative/dir", "PYTHONDONTWRITEBYTECODE=1", "MGPU_TEST_FOO=bar"}

	cold := launch(t, context.Background(), s)
	warm := warmLaunch(t, pool, s)
	if cold.Warm != 0 || warm.Warm != 2 {
		t.Fatalf("Warm: cold %d, warm %d; warm tails %q", cold.Warm, warm.Warm, warm.Ranks[0].Tail)
	}
	for r := 0; r < 2; r++ {
		if cold.Ranks[r].State != StateDone || warm.Ranks[r].State != StateDone {
			t.Fatalf("rank %d: cold %s, warm %s: %s", r, cold.Ranks[r].State, warm.Ranks[r].State, warm.Ranks[r].Tail)
		}
		if !warm.Ranks[r].Warm || cold.Ranks[r].Warm {
			t.Errorf("rank %d: RankResult.Warm cold %v warm %v", r, cold.Ranks[r].Warm, warm.Ranks[r].Warm)
		}
		c, w := describeOf(t, cold.Ranks[r].Tail), describeOf(t, warm.Ranks[r].Tail)
		// A warm rank has 0, 1, 2 and the directory listing /proc/self/fd; a cold one also
		// has whatever this test inherited without close-on-exec.
		if !reflect.DeepEqual(w.FDs, []int{0, 1, 2, 3}) {
			t.Errorf("rank %d: warm descriptors %v, want [0 1 2 3]", r, w.FDs)
		}
		c.FDs, w.FDs = nil, nil
		if w.PID != warm.Ranks[r].PID {
			t.Errorf("rank %d: the result's pid %d is not the rank's own %d", r, warm.Ranks[r].PID, w.PID)
		}
		// What differs by nature between two launches.
		for _, d := range []*description{&c, &w} {
			d.PID = 0
			delete(d.Env, "MASTER_PORT")
			d.CEnv = slices.DeleteFunc(d.CEnv, func(e string) bool { return strings.HasPrefix(e, "MASTER_PORT=") })
		}
		if !reflect.DeepEqual(c, w) {
			t.Errorf("rank %d differs:\ncold %+v\nwarm %+v", r, c, w)
		}
		if w.Env["MGPU_RANK"] != strconv.Itoa(r) || w.Env["MGPU_TEST_FOO"] != "bar" {
			t.Errorf("rank %d: env %v", r, w.Env)
		}
	}
}

// Nothing one check's code does in its rank reaches the next check's ranks: each is a fresh
// fork of a zygote that only imported.
func TestWarmNoStateLeaksBetweenChecks(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t)
	first := pyDriver(t, `import json, sys, os
json.LEAK = 42
json.dumps = lambda *a, **k: "forged"
sys.modules["leaked_module"] = json
sys.path.append("/leaked/path")
os.environ["LEAKED_VAR"] = "1"
print("first ran", flush=True)
`)
	second := pyDriver(t, `import json, sys, os
found = []
if hasattr(json, "LEAK"): found.append("json.LEAK")
if json.dumps({}) != "{}": found.append("json.dumps")
if "leaked_module" in sys.modules: found.append("sys.modules")
if "/leaked/path" in sys.path: found.append("sys.path")
if "LEAKED_VAR" in os.environ: found.append("os.environ")
print("found", found, flush=True)
sys.exit(3 if found else 0)
`)
	res1 := warmLaunch(t, pool, spec(t, Local, 2, py, first))
	zpid := pool.Stats().PID
	res2 := warmLaunch(t, pool, spec(t, Local, 2, py, second))
	if res1.Warm != 2 || res2.Warm != 2 {
		t.Fatalf("Warm %d, %d: both checks must fork from the pool", res1.Warm, res2.Warm)
	}
	if zpid == 0 || pool.Stats().PID != zpid {
		t.Fatalf("zygote %d then %d: both checks must use the same zygote", zpid, pool.Stats().PID)
	}
	for r, rr := range res2.Ranks {
		if rr.State != StateDone {
			t.Errorf("rank %d of the second check saw the first's state: %s", r, rr.Tail)
		}
	}
}

// Exit codes, signals and uncaught exceptions end a warm rank as they end a cold one, and the
// supervisor's teardown works the same.
func TestWarmEndsLikeCold(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t)
	drv := pyDriver(t, `import os, sys, signal, time
what = sys.argv[1].split(",")[int(os.environ["MGPU_RANK"])]
if what not in ("ok", "hang", "ignoreterm"):
    time.sleep(0.7)  # the other ranks are up (and ignoring SIGTERM) when this one ends
if what == "exit3": sys.exit(3)
if what == "raise": raise RuntimeError("boom in the driver")
if what == "exitmsg": sys.exit("a message")
if what == "segv": os.kill(os.getpid(), signal.SIGSEGV)
if what == "hang": time.sleep(60)
if what == "ignoreterm":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring", flush=True)
    time.sleep(60)
print("ok", flush=True)
`)
	for _, tc := range []string{"ok,ok,ok", "hang,exit3,hang", "raise,hang,ignoreterm", "exitmsg,hang,hang", "hang,segv,hang"} {
		t.Run(tc, func(t *testing.T) {
			t.Parallel() // mostly waiting: sleeps and teardown grace
			s := spec(t, Local, 3, py, drv, tc)
			cold := launch(t, context.Background(), s)
			warm := warmLaunch(t, pool, s)
			if warm.Warm != 3 {
				t.Fatalf("Warm = %d", warm.Warm)
			}
			if cold.FirstFailed != warm.FirstFailed {
				t.Errorf("FirstFailed cold %d warm %d", cold.FirstFailed, warm.FirstFailed)
			}
			for r := range cold.Ranks {
				c, w := cold.Ranks[r], warm.Ranks[r]
				if c.State != w.State || c.ExitCode != w.ExitCode || c.Signal != w.Signal {
					t.Errorf("rank %d: cold %s/%d/%s, warm %s/%d/%s\n%s", r, c.State, c.ExitCode, c.Signal, w.State, w.ExitCode, w.Signal, w.Tail)
				}
			}
			for r, want := range map[string]string{"raise": "RuntimeError: boom in the driver", "exitmsg": "a message"} {
				for i, what := range strings.Split(tc, ",") {
					if what == r && !strings.Contains(warm.Ranks[i].Tail, want) {
						t.Errorf("rank %d's output lacks %q: %q", i, want, warm.Ranks[i].Tail)
					}
				}
			}
			if len(warm.Leftover) > 0 {
				t.Errorf("Leftover %v", warm.Leftover)
			}
		})
	}
}

// A timeout kills a warm rank's whole process group, its children included.
func TestWarmTimeoutLeavesNothing(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t)
	tok := token(t)
	drv := pyDriver(t, `import subprocess, sys, time
c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
print("child", c.pid, flush=True)
time.sleep(300)
`)
	s := spec(t, Local, 2, py, drv, tok)
	s.Timeout = 1500 * time.Millisecond
	s.Grace = 300 * time.Millisecond
	res := warmLaunch(t, pool, s)
	if res.Warm != 2 || !res.TimedOut {
		t.Fatalf("Warm %d TimedOut %v", res.Warm, res.TimedOut)
	}
	var kids []int
	for r, rr := range res.Ranks {
		if rr.State != StateHung || rr.Signal != "SIGTERM" {
			t.Errorf("rank %d: %s %s", r, rr.State, rr.Signal)
		}
		m := childRe.FindStringSubmatch(rr.Tail)
		if m == nil {
			t.Fatalf("rank %d did not report its child: %q", r, rr.Tail)
		}
		pid, _ := strconv.Atoi(m[1])
		kids = append(kids, pid)
	}
	assertClean(t, res, tok, kids...)
}

// A dead zygote is replaced in the background (launches meanwhile start cold); a request the
// zygote cannot take starts that launch cold and keeps the zygote. A zygote that dies under
// running ranks takes them along and Launch says their ends are unknown.
func TestWarmZygoteDeath(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t)
	ok := pyDriver(t, "print('ok')\n")
	if res := warmLaunch(t, pool, spec(t, Local, 1, py, ok)); res.Warm != 1 {
		t.Fatalf("Warm = %d", res.Warm)
	}
	zpid := pool.Stats().PID
	if err := syscall.Kill(zpid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return processGone(zpid) })
	res := warmLaunch(t, pool, spec(t, Local, 2, py, ok))
	if res.Ranks[0].State != StateDone || res.Ranks[1].State != StateDone {
		t.Fatalf("after the zygote died: Warm %d, states %v", res.Warm, states(res))
	}
	waitFor(t, func() bool { st := pool.Stats(); return st.Ready && st.PID != zpid })
	if res := warmLaunch(t, pool, spec(t, Local, 2, py, ok)); res.Warm != 2 {
		t.Fatalf("the pool did not start another zygote: Warm %d (%s)", res.Warm, pool.Stats().LastErr)
	}

	zpid = pool.Stats().PID
	big := spec(t, Local, 2, py, ok)
	for i := 0; i < 4; i++ {
		big.Env = append(big.Env, fmt.Sprintf("MGPU_TEST_BIG%d=%s", i, strings.Repeat("x", 50<<10)))
	}
	if res := warmLaunch(t, pool, big); res.Warm != 0 || res.Ranks[0].State != StateDone || res.Ranks[1].State != StateDone {
		t.Fatalf("oversized request: Warm %d, states %v", res.Warm, states(res))
	}
	if st := pool.Stats(); st.PID != zpid || !st.Ready {
		t.Errorf("an oversized request replaced the zygote: %+v (was %d)", st, zpid)
	}

	// Now under running ranks.
	tok := token(t)
	hang := pyDriver(t, "import time, sys\nprint('up', flush=True)\ntime.sleep(60)\n")
	s := spec(t, Local, 2, py, hang, tok)
	up := make(chan struct{}, 2)
	s.Output = func(rank int, line string) {
		if line == "up" {
			up <- struct{}{}
		}
	}
	done := make(chan struct{})
	var lres *Result
	var lerr error
	go func() {
		lres, lerr = New().Launch(WithWarm(context.Background(), pool), s)
		close(done)
	}()
	<-up
	<-up
	zpid = pool.Stats().PID
	syscall.Kill(zpid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Launch did not end after its zygote died")
	}
	if !errors.Is(lerr, ErrWarmLost) {
		t.Fatalf("err = %v, want ErrWarmLost", lerr)
	}
	for r, rr := range lres.Ranks {
		if rr.State != StateUnknown || rr.ExitCode != -1 {
			t.Errorf("rank %d: %s %d, want unknown", r, rr.State, rr.ExitCode)
		}
	}
	assertClean(t, lres, tok)
}

// waitFor polls cond for up to 60 s (a zygote's start on a loaded CI machine); why (optional)
// says what was seen last when it fails.
func waitFor(t *testing.T, cond func() bool, why ...func() string) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	for _, w := range why {
		t.Log(w())
	}
	t.Fatal("condition not met in 60s")
}

// A zygote is replaced after MaxForks ranks, when the environment changes, and never used
// with MGPU_LEARN_WARM=off or NoWarm.
func TestWarmReplacementAndSwitches(t *testing.T) {
	py := testPython(t)
	pool := testPool(t)
	pool.MaxForks = 2
	ok := pyDriver(t, "print('ok')\n")
	if res := warmLaunch(t, pool, spec(t, Local, 2, py, ok)); res.Warm != 2 {
		t.Fatalf("first launch: Warm %d; pool %+v", res.Warm, pool.Stats())
	}
	first := pool.Stats().PID
	var last WarmStats
	waitFor(t, func() bool { last = pool.Stats(); return last.Ready && last.PID != first }, func() string {
		return fmt.Sprintf("the pool after MaxForks: %+v", last)
	})
	res := warmLaunch(t, pool, spec(t, Local, 1, py, ok))
	if res.Warm != 1 || pool.Stats().PID == first {
		t.Fatalf("after MaxForks: Warm %d, zygote %d (first %d)", res.Warm, pool.Stats().PID, first)
	}
	waitFor(t, func() bool { return processGone(first) })

	second := pool.Stats().PID
	s := spec(t, Local, 1, py, ok)
	s.Env = []string{"SOME_SETTING=1"}
	if res := warmLaunch(t, pool, s); res.Warm != 1 || pool.Stats().PID == second {
		t.Fatalf("another environment: Warm %d, zygote %d (before %d)", res.Warm, pool.Stats().PID, second)
	}

	s.NoWarm = true
	if res := warmLaunch(t, pool, s); res.Warm != 0 {
		t.Errorf("NoWarm: Warm = %d", res.Warm)
	}
	s.NoWarm = false
	t.Setenv("MGPU_LEARN_WARM", "off")
	if res := warmLaunch(t, pool, s); res.Warm != 0 {
		t.Errorf("MGPU_LEARN_WARM=off: Warm = %d", res.Warm)
	}
}

// Closing the pool ends its zygotes; a pool whose interpreter cannot import its preloads
// starts ranks cold and says why.
func TestWarmCloseAndBadPreload(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t)
	ok := pyDriver(t, "print('ok')\n")
	warmLaunch(t, pool, spec(t, Local, 1, py, ok))
	zpid := pool.Stats().PID
	pool.Close()
	waitFor(t, func() bool { return processGone(zpid) })
	if res := warmLaunch(t, pool, spec(t, Local, 1, py, ok)); res.Warm != 0 || res.Ranks[0].State != StateDone {
		t.Errorf("closed pool: Warm %d state %s", res.Warm, res.Ranks[0].State)
	}

	bad := testPool(t, "no_such_module_here")
	res := warmLaunch(t, bad, spec(t, Local, 2, py, ok))
	if res.Warm != 0 || res.Ranks[0].State != StateDone {
		t.Errorf("bad preload: Warm %d state %s", res.Warm, res.Ranks[0].State)
	}
	if st := bad.Stats(); !strings.Contains(st.LastErr, "no_such_module_here") {
		t.Errorf("LastErr = %q", st.LastErr)
	}
}

// An optional preload ("?name") is imported where it can be; one whose import fails leaves the
// zygote fit, and the ranks still start warm.
func TestWarmOptionalPreload(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t, "json", "?no_such_module_here", "?colorsys")
	drv := pyDriver(t, "import sys\nprint('colorsys loaded:', 'colorsys' in sys.modules)\n")
	res := warmLaunch(t, pool, spec(t, Local, 1, py, drv))
	if res.Warm != 1 || res.Ranks[0].State != StateDone {
		t.Fatalf("Warm %d state %s: %s (pool: %q)", res.Warm, res.Ranks[0].State, res.Ranks[0].Tail, pool.Stats().LastErr)
	}
	if !strings.Contains(res.Ranks[0].Tail, "colorsys loaded: True") {
		t.Errorf("the optional preload that imports is not in the rank: %q", res.Ranks[0].Tail)
	}
}

func TestWarmEligibleAndZygoteEnv(t *testing.T) {
	for _, tc := range []struct {
		s    Spec
		want bool
	}{
		{Spec{Launcher: Local, Argv: []string{"/v/bin/python", "/d/driver.py"}}, true},
		{Spec{Launcher: Torchrun, Argv: []string{"/v/bin/python3.11", "/d/driver.py", "x"}}, true},
		{Spec{Launcher: Torchrun, UseTorchrun: true, Argv: []string{"/v/bin/python", "/d/driver.py"}}, false},
		{Spec{Launcher: MPIRun, Argv: []string{"/v/bin/python", "/d/driver.py"}}, false},
		{Spec{Launcher: Srun, Argv: []string{"/v/bin/python", "/d/driver.py"}}, false},
		{Spec{Launcher: Local, Argv: []string{"/v/bin/python", "-c", "x.py"}}, false},
		{Spec{Launcher: Local, Argv: []string{"/build/prog", "/d/driver.py"}}, false},
		{Spec{Launcher: Local, Argv: []string{"/v/bin/python", "/d/driver.py"}, NoWarm: true}, false},
	} {
		if got := warmEligible(&tc.s); got != tc.want {
			t.Errorf("%+v: eligible %v, want %v", tc.s, got, tc.want)
		}
	}
	e := newEnviron([]string{"PATH=/bin", "MGPU_CASES=a=1", "MGPU_RECORDS=unix:/x", "PYTHONPATH=/a",
		"RANK=3", "MASTER_PORT=1", "OMP_NUM_THREADS=4", "NCCL_NVLS_ENABLE=0"})
	got := zygoteEnv(e)
	want := []string{"NCCL_NVLS_ENABLE=0", "OMP_NUM_THREADS=4", "PATH=/bin"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("zygoteEnv = %v, want %v", got, want)
	}
}

// A side process (a verifier) forked for a launch comes from the zygote its ranks come from:
// the launch after it finds that zygote, not a new one. It leads its own process group, gets
// its own environment (PYTHONPATH and all) plus what the ranks' zygote was started with, and
// its exit status comes back.
func TestForkSideSharesTheRanksZygote(t *testing.T) {
	t.Parallel()
	py := testPython(t)
	pool := testPool(t)
	drv := pyDriver(t, describe+"import sys\nsys.exit(3)\n")
	lib := t.TempDir()
	s := Spec{Launcher: Local, Ranks: 2, Argv: []string{py, drv}, Dir: t.TempDir(), RunDir: t.TempDir(),
		Env: []string{"MGPU_RECORDS=x", "SPEC_VAR=1"}, Timeout: 60 * time.Second}
	ctx := WithWarm(context.Background(), pool)

	out, err := os.Create(filepath.Join(t.TempDir(), "side.log"))
	if err != nil {
		t.Fatal(err)
	}
	env := SideEnv([]string{"MGPU_ROLE=verifier", "PYTHONPATH=" + lib}, 0, 2)
	pid, exit, ok := ForkSide(ctx, &s, s.Argv, env, s.Dir, out)
	out.Close()
	if !ok {
		t.Fatalf("ForkSide did not fork (pool: %+v)", pool.Stats())
	}
	zpid := pool.Stats().PID
	select {
	case code := <-exit:
		if code != 3 {
			t.Errorf("exit %d, want 3", code)
		}
	case <-time.After(30 * time.Second):
		syscall.Kill(-pid, syscall.SIGKILL)
		t.Fatal("the side process did not end")
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	d := describeOf(t, string(b))
	if d.PID != pid || !d.PGID {
		t.Errorf("pid %d (ForkSide said %d), leads its group: %v", d.PID, pid, d.PGID)
	}
	if d.Env["MGPU_ROLE"] != "verifier" || d.Env["SPEC_VAR"] != "1" || d.Env["MGPU_RANK"] != "0" {
		t.Errorf("side environment lost its own variables: %v", d.Env)
	}
	// The ranks' zygote was started with one OpenMP thread per rank (2 ranks) and unbuffered
	// output: torch was imported so, and the side process says so too.
	if d.Env["OMP_NUM_THREADS"] != "1" || d.Env["PYTHONUNBUFFERED"] != "1" {
		t.Errorf("side process lacks the zygote's settings: OMP_NUM_THREADS=%q PYTHONUNBUFFERED=%q",
			d.Env["OMP_NUM_THREADS"], d.Env["PYTHONUNBUFFERED"])
	}
	if !slices.Contains(d.Path, lib) {
		t.Errorf("PYTHONPATH %s not on sys.path %v", lib, d.Path)
	}

	res := warmLaunch(t, pool, s)
	if res.Warm != 2 {
		t.Fatalf("ranks after the side process: %d warm of 2", res.Warm)
	}
	if got := pool.Stats().PID; got != zpid {
		t.Errorf("the ranks came from zygote %d, the side process from %d: one should serve both", got, zpid)
	}

	// Without a pool, or for a program the ranks are not, ForkSide declines.
	if _, _, ok := ForkSide(context.Background(), &s, s.Argv, env, s.Dir, os.Stderr); ok {
		t.Error("ForkSide forked without a pool")
	}
	if _, _, ok := ForkSide(ctx, &s, []string{"/bin/true", drv}, env, s.Dir, os.Stderr); ok {
		t.Error("ForkSide forked another interpreter than the ranks'")
	}
}
