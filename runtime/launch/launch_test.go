package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	progOnce sync.Once
	progPath string
	progErr  error
	progDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if progDir != "" {
		os.RemoveAll(progDir)
	}
	os.Exit(code)
}

// rankProg compiles testdata/rankprog.c once with cc; tests skip without a C compiler.
func rankProg(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc on PATH")
	}
	progOnce.Do(func() {
		progDir, progErr = os.MkdirTemp("", "launch-test-")
		if progErr != nil {
			return
		}
		progPath = filepath.Join(progDir, "rankprog")
		out, err := exec.Command(cc, "-O0", "-o", progPath, "testdata/rankprog.c").CombinedOutput()
		if err != nil {
			progErr = fmt.Errorf("cc: %v\n%s", err, out)
		}
	})
	if progErr != nil {
		t.Fatal(progErr)
	}
	return progPath
}

// token makes each launch's command line unique so the test can look for its processes.
func token(t *testing.T) string {
	return fmt.Sprintf("tok-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
}

// processesWith lists live (non-zombie) processes whose command line contains s, found
// independently of the supervisor's own bookkeeping.
func processesWith(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(cmd) == 0 {
			continue
		}
		if bytes.Contains(cmd, []byte(s)) {
			out = append(out, pid)
		}
	}
	return out
}

func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	// A zombie waiting for init to reap it is gone for our purposes.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// assertClean checks that nothing of the job survived, by the Result, by kill(pid, 0) on
// every pid the test knows, and by a scan of the process table for the job's token.
func assertClean(t *testing.T, res *Result, tok string, pids ...int) {
	t.Helper()
	if len(res.Leftover) > 0 {
		t.Errorf("Leftover = %v", res.Leftover)
	}
	for _, r := range res.Ranks {
		if r.PID > 0 {
			pids = append(pids, r.PID)
		}
	}
	if res.Launcher != nil {
		pids = append(pids, res.Launcher.PID)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("process %d still alive", pid)
		}
	}
	if left := processesWith(tok); len(left) > 0 {
		t.Errorf("processes with %s still alive: %v", tok, left)
	}
}

func spec(t *testing.T, launcher string, ranks int, argv ...string) Spec {
	return Spec{
		Launcher: launcher,
		Ranks:    ranks,
		Argv:     argv,
		RunDir:   t.TempDir(),
		Timeout:  20 * time.Second,
	}
}

func launch(t *testing.T, ctx context.Context, s Spec) *Result {
	t.Helper()
	res, err := New().Launch(ctx, s)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if len(res.Ranks) != s.Ranks && s.Launcher != Single {
		t.Fatalf("got %d rank results, want %d", len(res.Ranks), s.Ranks)
	}
	return res
}

func envOf(tail string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(tail, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

func states(res *Result) []string {
	var s []string
	for _, r := range res.Ranks {
		s = append(s, r.State)
	}
	return s
}

var envNames = []string{
	"MGPU_RANK", "MGPU_WORLD_SIZE", "MGPU_LOCAL_RANK", "MGPU_LOCAL_WORLD_SIZE",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
	"MGPU_RUN_DIR", "MGPU_RDZV_DIR", "NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS",
	"TORCH_SYMM_MEM_DISABLE_MULTICAST", "MGPU_TEST_FOO", "OMPI_COMM_WORLD_RANK", "OMP_NUM_THREADS",
}

func TestEnvironment(t *testing.T) {
	prog := rankProg(t)
	t.Setenv("NCCL_NVLS_ENABLE", "1") // inherited value must lose too
	t.Setenv("MGPU_RANK", "7")
	for _, launcher := range []string{Local, Torchrun} {
		t.Run(launcher, func(t *testing.T) {
			s := spec(t, launcher, 3, append([]string{prog, "*=env"}, envNames...)...)
			s.Env = []string{"NCCL_NVLS_ENABLE=1", "NVSHMEM_DISABLE_NVLS=0",
				"TORCH_SYMM_MEM_DISABLE_MULTICAST=0", "MGPU_TEST_FOO=bar=baz", "MGPU_RANK=99"}
			res := launch(t, context.Background(), s)
			if res.FirstFailed != -1 || res.TimedOut || res.Canceled {
				t.Fatalf("FirstFailed=%d TimedOut=%v Canceled=%v", res.FirstFailed, res.TimedOut, res.Canceled)
			}
			port := ""
			for r, rr := range res.Ranks {
				if rr.State != StateDone || rr.ExitCode != 0 {
					t.Errorf("rank %d: state %s exit %d", r, rr.State, rr.ExitCode)
				}
				env := envOf(rr.Tail)
				want := map[string]string{
					"MGPU_RANK": strconv.Itoa(r), "MGPU_WORLD_SIZE": "3",
					"MGPU_LOCAL_RANK": strconv.Itoa(r), "MGPU_LOCAL_WORLD_SIZE": "3",
					"RANK": strconv.Itoa(r), "WORLD_SIZE": "3", "LOCAL_RANK": strconv.Itoa(r),
					"LOCAL_WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1",
					"MGPU_RUN_DIR": s.RunDir, "MGPU_RDZV_DIR": filepath.Join(s.RunDir, "rdzv"),
					"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
					"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "MGPU_TEST_FOO": "bar=baz",
					"OMP_NUM_THREADS": "1", // like torchrun: one OpenMP thread per rank
				}
				for k, v := range want {
					if env[k] != v {
						t.Errorf("rank %d: %s=%q, want %q", r, k, env[k], v)
					}
				}
				if p, err := strconv.Atoi(env["MASTER_PORT"]); err != nil || p <= 0 {
					t.Errorf("rank %d: MASTER_PORT=%q", r, env["MASTER_PORT"])
				}
				if port != "" && env["MASTER_PORT"] != port {
					t.Errorf("rank %d: MASTER_PORT %s differs from rank 0's %s", r, env["MASTER_PORT"], port)
				}
				port = env["MASTER_PORT"]
			}
			if _, err := os.Stat(filepath.Join(s.RunDir, "rdzv")); !os.IsNotExist(err) {
				t.Errorf("rendezvous dir not removed: %v", err)
			}
			assertClean(t, res, prog+"\x00*=env")
		})
	}
}

// OMP_NUM_THREADS=1 is a default for several ranks, never an override; one rank keeps the
// machine's.
func TestOMPThreadsDefault(t *testing.T) {
	prog := rankProg(t)
	for _, tc := range []struct {
		ranks       int
		outer, spec string
		want        string
	}{
		{2, "", "", "1"},
		{2, "4", "", "4"},
		{2, "", "OMP_NUM_THREADS=3", "3"},
		{1, "", "", "<unset>"},
	} {
		t.Setenv("OMP_NUM_THREADS", tc.outer)
		if tc.outer == "" {
			os.Unsetenv("OMP_NUM_THREADS")
		}
		s := spec(t, Local, tc.ranks, prog, "*=env", "OMP_NUM_THREADS")
		if tc.spec != "" {
			s.Env = []string{tc.spec}
		}
		res := launch(t, context.Background(), s)
		for r, rr := range res.Ranks {
			if got := envOf(rr.Tail)["OMP_NUM_THREADS"]; got != tc.want {
				t.Errorf("%d ranks, outer %q, spec %q: rank %d has OMP_NUM_THREADS=%q, want %q",
					tc.ranks, tc.outer, tc.spec, r, got, tc.want)
			}
		}
	}
}

func TestSingle(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, Single, 4, prog, "*=env", "MGPU_RANK", "MGPU_WORLD_SIZE")
	res := launch(t, context.Background(), s)
	if len(res.Ranks) != 1 {
		t.Fatalf("single launched %d ranks", len(res.Ranks))
	}
	env := envOf(res.Ranks[0].Tail)
	if env["MGPU_RANK"] != "0" || env["MGPU_WORLD_SIZE"] != "1" || res.Ranks[0].State != StateDone {
		t.Errorf("single: %v state %s", env, res.Ranks[0].State)
	}
}

func TestRendezvousDirFreshAndRemoved(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, Local, 2, prog, "*=rdzv")
	stale := filepath.Join(s.RunDir, "rdzv", "stale-id")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	s.Output = func(rank int, line string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, line)
		// While the ranks run the directory exists and holds no stale file.
		if strings.HasPrefix(line, "rdzv ok") {
			if _, err := os.Stat(stale); !os.IsNotExist(err) {
				seen = append(seen, "STALE FILE PRESENT")
			}
		}
	}
	res := launch(t, context.Background(), s)
	for r, rr := range res.Ranks {
		if rr.State != StateDone {
			t.Errorf("rank %d: %s (exit %d) %s", r, rr.State, rr.ExitCode, rr.Tail)
		}
	}
	if strings.Contains(strings.Join(seen, "\n"), "STALE") {
		t.Error("stale rendezvous file survived into the run")
	}
	if _, err := os.Stat(filepath.Join(s.RunDir, "rdzv")); !os.IsNotExist(err) {
		t.Errorf("rendezvous dir not removed after the run: %v", err)
	}
}

var childRe = regexp.MustCompile(`child (\d+)`)

func TestTimeoutMarksHungAndLeavesNothing(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Local, 2, prog, "*=hangfork", tok)
	s.Timeout = 700 * time.Millisecond
	s.Grace = 300 * time.Millisecond
	res := launch(t, context.Background(), s)
	if !res.TimedOut || res.FirstFailed != -1 {
		t.Fatalf("TimedOut=%v FirstFailed=%d", res.TimedOut, res.FirstFailed)
	}
	var kids []int
	for r, rr := range res.Ranks {
		if rr.State != StateHung {
			t.Errorf("rank %d: state %s, want hung", r, rr.State)
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

func TestCrashTearsDownOthers(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	// Rank 2 ignores SIGTERM, so the teardown has to escalate to SIGKILL.
	s := spec(t, Local, 3, prog, "1=crash,2=ignoreterm,*=hang", tok)
	res := launch(t, context.Background(), s)
	if res.FirstFailed != 1 {
		t.Fatalf("FirstFailed = %d, want 1; states %v", res.FirstFailed, states(res))
	}
	c := res.Ranks[1]
	if c.State != StateSignaled || c.Signal != "SIGSEGV" || c.ExitCode != -1 {
		t.Errorf("crashed rank: state %s signal %q exit %d", c.State, c.Signal, c.ExitCode)
	}
	if !strings.Contains(c.Tail, "about to crash") {
		t.Errorf("crashed rank's tail lacks its stderr: %q", c.Tail)
	}
	for _, r := range []int{0, 2} {
		rr := res.Ranks[r]
		if rr.State != StateKilled {
			t.Errorf("rank %d: state %s, want killed", r, rr.State)
		}
		if d := rr.Ended.Sub(c.Ended); d > 2*time.Second {
			t.Errorf("rank %d outlived the crash by %v", r, d)
		}
	}
	if res.Ranks[2].Signal != "SIGKILL" {
		t.Errorf("rank 2 ignoring SIGTERM ended by %q, want SIGKILL", res.Ranks[2].Signal)
	}
	if res.Ranks[0].Signal != "SIGTERM" {
		t.Errorf("rank 0 ended by %q, want SIGTERM", res.Ranks[0].Signal)
	}
	if res.TimedOut || res.Canceled {
		t.Error("crash reported as timeout or cancel")
	}
	assertClean(t, res, tok)
}

func TestExitCodeFailure(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Local, 3, prog, "2=exit:3,*=hang", tok)
	res := launch(t, context.Background(), s)
	if res.FirstFailed != 2 {
		t.Fatalf("FirstFailed = %d, want 2", res.FirstFailed)
	}
	if rr := res.Ranks[2]; rr.State != StateFailed || rr.ExitCode != 3 || rr.Signal != "" {
		t.Errorf("rank 2: state %s exit %d signal %q", rr.State, rr.ExitCode, rr.Signal)
	}
	if got := states(res); got[0] != StateKilled || got[1] != StateKilled {
		t.Errorf("states %v", got)
	}
	assertClean(t, res, tok)
}

func TestOneRankDoneOthersGoOn(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, Local, 2, prog, "0=ok,1=sleep:300")
	res := launch(t, context.Background(), s)
	if got := states(res); got[0] != StateDone || got[1] != StateDone || res.FirstFailed != -1 {
		t.Errorf("states %v FirstFailed %d", got, res.FirstFailed)
	}
}

func TestIgnoredSIGTERMGetsSIGKILLAfterGrace(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Local, 1, prog, "*=ignoreterm", tok)
	s.Timeout = 300 * time.Millisecond
	s.Grace = 400 * time.Millisecond
	res := launch(t, context.Background(), s)
	rr := res.Ranks[0]
	if !res.TimedOut || rr.State != StateHung || rr.Signal != "SIGKILL" {
		t.Errorf("TimedOut=%v state %s signal %q", res.TimedOut, rr.State, rr.Signal)
	}
	if d := rr.Ended.Sub(rr.Started); d < s.Timeout+s.Grace {
		t.Errorf("killed after %v, before timeout+grace", d)
	}
	assertClean(t, res, tok)
}

func TestCancel(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Local, 2, prog, "*=hangfork", tok)
	s.Grace = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	ready := 0
	s.Output = func(rank int, line string) {
		if strings.Contains(line, "child") {
			mu.Lock()
			ready++
			if ready == 2 {
				cancel()
			}
			mu.Unlock()
		}
	}
	res := launch(t, ctx, s)
	if !res.Canceled || res.TimedOut || res.FirstFailed != -1 {
		t.Fatalf("Canceled=%v TimedOut=%v FirstFailed=%d", res.Canceled, res.TimedOut, res.FirstFailed)
	}
	for r, rr := range res.Ranks {
		if rr.State != StateKilled {
			t.Errorf("rank %d: %s", r, rr.State)
		}
	}
	assertClean(t, res, tok)
}

func TestFloodKeepsTheEndWithBoundedMemory(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, Local, 2, prog, "0=flood:200,1=longline")
	s.TailBytes = 32 << 10
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := launch(t, context.Background(), s)
	runtime.ReadMemStats(&after)
	f := res.Ranks[0]
	if f.State != StateDone {
		t.Fatalf("flood rank: %s", f.State)
	}
	if !strings.HasSuffix(f.Tail, "FLOOD-END rank 0\n") {
		t.Errorf("tail does not end with the last line: ...%q", f.Tail[max(0, len(f.Tail)-80):])
	}
	if len(f.Tail) > s.TailBytes {
		t.Errorf("tail is %d bytes, limit %d", len(f.Tail), s.TailBytes)
	}
	if !strings.HasPrefix(f.Tail, "line ") {
		t.Errorf("tail does not start at a line: %q", f.Tail[:40])
	}
	const written = 200 << 20
	if kept := int64(len(f.Tail)); f.Dropped+kept < written || f.Dropped > written+1000 {
		t.Errorf("Dropped = %d with %d kept; the rank wrote about %d", f.Dropped, kept, written)
	}
	// Without an Output callback nothing is allocated per line: what the launch allocates
	// must not grow with the 200 MiB the rank wrote.
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("launch allocated %d MiB for a 200 MiB flood", alloc>>20)
	}
	l := res.Ranks[1]
	if !strings.Contains(l.Tail, "after-long") || !strings.Contains(l.Tail, "line cut: ") {
		t.Errorf("long line not cut: %q", l.Tail[max(0, len(l.Tail)-200):])
	}
	if want := int64(1<<20 - maxLine); l.Dropped != want {
		t.Errorf("long line: Dropped = %d, want %d", l.Dropped, want)
	}
	if len(l.Tail) > maxLine+200 {
		t.Errorf("long line kept %d bytes", len(l.Tail))
	}
}

func TestOutputCallbackSeesEveryLineInOrder(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, Local, 2, prog, "*=flood:1")
	var mu sync.Mutex
	last := map[int]int{0: -1, 1: -1}
	bad := 0
	ends := 0
	s.Output = func(rank int, line string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(line, "FLOOD-END") {
			ends++
			return
		}
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "line" {
			return
		}
		n, _ := strconv.Atoi(f[1])
		if n != last[rank]+1 {
			bad++
		}
		last[rank] = n
	}
	launch(t, context.Background(), s)
	if bad > 0 || ends != 2 || last[0] < 1000 || last[1] < 1000 {
		t.Errorf("out of order %d, ends %d, last %v", bad, ends, last)
	}
}

func TestRunnerErrors(t *testing.T) {
	dir := t.TempDir()
	for name, s := range map[string]Spec{
		"no binary":    {Launcher: Local, Ranks: 2, Argv: []string{filepath.Join(dir, "missing")}, RunDir: dir},
		"bad launcher": {Launcher: "qsub", Ranks: 2, Argv: []string{"true"}, RunDir: dir},
		"no argv":      {Launcher: Local, Ranks: 2, RunDir: dir},
		"no run dir":   {Launcher: Local, Ranks: 2, Argv: []string{"true"}, RunDir: filepath.Join(dir, "nope")},
		"zero ranks":   {Launcher: Local, Ranks: 0, Argv: []string{"true"}, RunDir: dir},
		"bad dialect":  {Launcher: MPIRun, Ranks: 2, Argv: []string{"true"}, RunDir: dir, MPI: &MPI{Mpirun: "/bin/true", Dialect: "lam"}},
		"no torchrun":  {Launcher: Torchrun, Ranks: 2, Argv: []string{"true"}, RunDir: dir, UseTorchrun: true, Torchrun: filepath.Join(dir, "torchrun")},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New().Launch(context.Background(), s); err == nil {
				t.Error("no error")
			}
		})
	}
}

func TestKeepGoingLetsSurvivorsFinish(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, Local, 3, prog, "1=crash,*=sleep:1500")
	s.KeepGoing = true
	res := launch(t, context.Background(), s)
	if res.FirstFailed != 1 {
		t.Fatalf("FirstFailed = %d, want 1; states %v", res.FirstFailed, states(res))
	}
	if got := states(res); got[0] != StateDone || got[1] != StateSignaled || got[2] != StateDone {
		t.Errorf("states %v: with KeepGoing the other ranks must run to their end", got)
	}
}

func TestOnRankExitReportsEachRankAsItEnds(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Local, 3, prog, "0=ok,1=exit:3,*=hang", tok)
	type seen struct {
		rank  int
		state string
		at    time.Time
	}
	var mu sync.Mutex
	var got []seen
	s.OnRankExit = func(rr RankResult) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, seen{rr.Rank, rr.State, time.Now()})
	}
	res := launch(t, context.Background(), s)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("OnRankExit calls %+v, want one per rank", got)
	}
	want := map[int]string{0: StateDone, 1: StateFailed, 2: StateKilled}
	for _, g := range got {
		if want[g.rank] != g.state {
			t.Errorf("rank %d reported %s, want %s", g.rank, g.state, want[g.rank])
		}
		if g.state != res.Ranks[g.rank].State {
			t.Errorf("rank %d: live %s, result %s", g.rank, g.state, res.Ranks[g.rank].State)
		}
	}
	// The hung rank is torn down only after rank 1 failed, so it is reported last.
	if got[2].rank != 2 {
		t.Errorf("order %+v: the torn-down rank must come last", got)
	}
	assertClean(t, res, tok)
}

// A process beside a rank (its verifier) gets the same protections as the rank: no launcher's
// rank variables from the parent, the protocol's own for its rank, and the multicast switches
// off whatever anyone asked.
func TestSideEnv(t *testing.T) {
	t.Setenv("RANK", "7")
	t.Setenv("OMPI_COMM_WORLD_RANK", "7")
	t.Setenv("NCCL_NVLS_ENABLE", "1")
	env := map[string]string{}
	for _, kv := range SideEnv([]string{"TORCH_SYMM_MEM_DISABLE_MULTICAST=0", "MGPU_ROLE=verifier"}, 2, 4) {
		k, v, _ := cutEnv(kv)
		env[k] = v
	}
	for k, want := range map[string]string{
		"MGPU_RANK": "2", "MGPU_WORLD_SIZE": "4", "MGPU_LOCAL_RANK": "2", "MGPU_LOCAL_WORLD_SIZE": "4",
		"MGPU_ROLE": "verifier", "NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1",
		"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
	} {
		if env[k] != want {
			t.Errorf("%s=%q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"RANK", "OMPI_COMM_WORLD_RANK"} {
		if v, ok := env[k]; ok {
			t.Errorf("inherited %s=%q kept", k, v)
		}
	}
}
