package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// openMPI returns the MPI to test with, skipping when there is no Open MPI mpirun.
func openMPI(t *testing.T) *MPI {
	t.Helper()
	path, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("no mpirun on PATH")
	}
	if d := mpiDialect(path); d != "openmpi" {
		t.Skipf("mpirun is %s, these tests speak Open MPI", d)
	}
	return &MPI{Mpirun: path, Dialect: "openmpi"}
}

func TestMPIRunRanks(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, MPIRun, 2, prog, "*=env", "OMPI_COMM_WORLD_RANK", "MGPU_RANK", "MGPU_RUN_DIR",
		"MGPU_RDZV_DIR", "NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "MGPU_TEST_FOO")
	s.MPI = openMPI(t)
	s.Env = []string{"MGPU_TEST_FOO=x y", "NCCL_NVLS_ENABLE=1"}
	var lines [2]int
	s.Output = func(rank int, line string) {
		if rank >= 0 {
			lines[rank]++ // one goroutine reads mpirun's output, so no lock is needed
		}
	}
	t.Setenv("MGPU_RANK", "5") // must not leak into mpirun's ranks
	res := launch(t, context.Background(), s)
	if res.Launcher == nil || res.Launcher.State != StateDone {
		t.Fatalf("launcher: %+v", res.Launcher)
	}
	for r, rr := range res.Ranks {
		env := envOf(rr.Tail)
		if rr.State != StateDone {
			t.Errorf("rank %d: state %s", r, rr.State)
		}
		want := map[string]string{
			"OMPI_COMM_WORLD_RANK": strconv.Itoa(r), "MGPU_RANK": "<unset>", "MGPU_RUN_DIR": s.RunDir,
			"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
			"MGPU_TEST_FOO": "x y",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("rank %d: %s=%q, want %q (tail %q)", r, k, env[k], v, rr.Tail)
			}
		}
		if lines[r] < len(want) {
			t.Errorf("rank %d: Output saw %d lines", r, lines[r])
		}
	}
	assertClean(t, res, prog+"\x00*=env")
}

func TestMPIRunHangLeavesNothing(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, MPIRun, 2, prog, "*=hangfork", tok)
	s.MPI = openMPI(t)
	s.Timeout = 1500 * time.Millisecond
	s.Grace = 500 * time.Millisecond
	res := launch(t, context.Background(), s)
	if !res.TimedOut {
		t.Fatal("not timed out")
	}
	var kids []int
	for r, rr := range res.Ranks {
		if rr.PID == 0 {
			t.Errorf("rank %d: process not found under mpirun", r)
		}
		if rr.State != StateHung {
			t.Errorf("rank %d: state %s, want hung", r, rr.State)
		}
		if m := childRe.FindStringSubmatch(rr.Tail); m != nil {
			pid, _ := strconv.Atoi(m[1])
			kids = append(kids, pid)
		} else {
			t.Errorf("rank %d: no child reported in %q", r, rr.Tail)
		}
	}
	assertClean(t, res, tok, kids...)
	for _, daemon := range []string{"orted", "prted"} {
		if left := processesWith(daemon + "\x00"); len(left) > 0 {
			t.Errorf("%s still running: %v", daemon, left)
		}
	}
}

func TestMPIRunCrashNamesTheRank(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, MPIRun, 3, prog, "1=crash,*=hang", tok)
	s.MPI = openMPI(t)
	s.Timeout = 15 * time.Second
	s.Grace = 500 * time.Millisecond
	res := launch(t, context.Background(), s)
	if res.TimedOut {
		t.Fatal("mpirun did not end the job after a rank crashed")
	}
	if res.FirstFailed != 1 {
		t.Fatalf("FirstFailed = %d; launcher tail %q", res.FirstFailed, res.Launcher.Tail)
	}
	if rr := res.Ranks[1]; rr.State != StateSignaled || rr.Signal != "SIGSEGV" {
		t.Errorf("rank 1: %s %q", rr.State, rr.Signal)
	}
	if res.Launcher.State == StateDone {
		t.Error("mpirun reported success")
	}
	assertClean(t, res, tok)
}

func TestMPIArgv(t *testing.T) {
	env := newEnviron([]string{"PATH=/bin", "A=1"})
	s := &Spec{Ranks: 4, Argv: []string{"./prog", "x"}, MPI: &MPI{Mpirun: "/opt/mpi/bin/mpirun", Dialect: "mpich"}}
	argv, _, rankVar, _, err := mpiPlan(s, env, []string{"A", "A"})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	if got != "/opt/mpi/bin/mpirun -np 4 -prepend-rank -genv A 1 ./prog x" || rankVar != "PMI_RANK" {
		t.Errorf("mpich argv %q rankVar %s", got, rankVar)
	}
	s.MPI.Dialect = "openmpi"
	argv, _, _, _, err = mpiPlan(s, env, []string{"A"})
	if err != nil {
		t.Fatal(err)
	}
	got = strings.Join(argv, " ")
	for _, want := range []string{"-np 4", "--oversubscribe", "--tag-output", "-x A", "./prog x"} {
		if !strings.Contains(got, want) {
			t.Errorf("openmpi argv %q lacks %q", got, want)
		}
	}
	if strings.HasSuffix(got, "./prog x") == false {
		t.Errorf("program not last: %q", got)
	}
}

func TestFailureParsers(t *testing.T) {
	cases := []struct {
		name   string
		p      failureParser
		text   string
		rank   int
		code   int
		signal int
	}{
		{"openmpi signal", &openMPIFailures{}, `--------------------------------------------------------------------------
mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 11 (Segmentation fault).
--------------------------------------------------------------------------`, 2, -1, 11},
		{"openmpi exit", &openMPIFailures{}, `mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[48006,1],3]
  Exit code:    7`, 3, 7, 0},
		{"openmpi5 exit", &openMPIFailures{}, `  Process name: [prterun-vm-1234@1,1]
  Exit code:    1`, 1, 1, 0},
		{"openmpi abort", &openMPIFailures{}, `--------------------------------------------------------------------------
MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD
with errorcode 5.

NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.`, 2, 5, 0},
		{"openmpi improper", &openMPIFailures{}, `--------------------------------------------------------------------------
mpirun has exited due to process rank 1 with PID 0 on
node vm exiting improperly. There are three reasons this could occur:`, 1, -1, 0},
		{"mpich signal", &mpichFailures{}, `===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   RANK 1 PID 4242 RUNNING AT vm
=   KILLED BY SIGNAL: 6 (Aborted)
===================================================================================`, 1, -1, 6},
		{"torchrun", &torchrunFailures{}, `Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 11)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2025-01-01_00:00:00
  host      : vm
  rank      : 3 (local_rank: 3)
  exitcode  : -11 (pid: 12345)
  error_file: <N/A>`, 3, -1, 11},
	}
	for _, c := range cases {
		for _, l := range strings.Split(c.text, "\n") {
			c.p.line(l)
		}
		end, ok := c.p.first()
		if !ok || end.rank != c.rank || end.code != c.code || int(end.signal) != c.signal {
			t.Errorf("%s: got %+v ok=%v", c.name, end, ok)
		}
	}
	p := &openMPIFailures{}
	p.line("Exit code: 3") // without a process name it names nobody
	if _, ok := p.first(); ok {
		t.Error("exit code without process name attributed")
	}
}

func TestTags(t *testing.T) {
	for _, c := range []struct {
		tag  func([]byte) (int, []byte, bool)
		in   string
		rank int
		rest string
		ok   bool
	}{
		{openMPITag, "[1,3]<stdout>:hello", 3, "hello", true},
		{openMPITag, "[1,12]<stderr>: oops", 12, "oops", true},
		{openMPITag, "[1,3]hello", 0, "", false},
		{openMPITag, "mpirun noticed", 0, "", false},
		{mpichTag, "[2] text", 2, "text", true},
		{mpichTag, "[x] text", 0, "", false},
		{torchrunTag, "[default1]:loss 3", 1, "loss 3", true},
		{torchrunTag, "[default1] no colon", 0, "", false},
		{torchrunTag, "[W socket.cpp:1] warn", 0, "", false},
	} {
		r, rest, ok := c.tag([]byte(c.in))
		if ok != c.ok || ok && (r != c.rank || string(rest) != c.rest) {
			t.Errorf("%q: got %d %q %v", c.in, r, rest, ok)
		}
	}
}

func TestTorchrunArgv(t *testing.T) {
	s := &Spec{Ranks: 2, Argv: []string{"/venv/bin/python3", "driver.py", "--x"}, Torchrun: "/venv/bin/torchrun"}
	argv, err := torchrunPlan(s, "29400", "/run/rdzv/logs")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	for _, want := range []string{"--nproc-per-node 2", "--rdzv-backend c10d", "--rdzv-endpoint 127.0.0.1:29400",
		"--max-restarts 0", "--tee 3", "--no-python /venv/bin/python3 driver.py --x"} {
		if !strings.Contains(got, want) {
			t.Errorf("torchrun argv %q lacks %q", got, want)
		}
	}
}

// TestTorchrunBinary runs ranks through a real torchrun when one is installed.
func TestTorchrunBinary(t *testing.T) {
	bin, err := exec.LookPath("torchrun")
	if err != nil {
		t.Skip("no torchrun on PATH")
	}
	prog := rankProg(t)
	t.Run("env", func(t *testing.T) {
		s := spec(t, Torchrun, 2, prog, "*=env", "RANK", "WORLD_SIZE", "NCCL_NVLS_ENABLE", "MGPU_RUN_DIR", "MGPU_RANK")
		s.UseTorchrun, s.Torchrun = true, bin
		res := launch(t, context.Background(), s)
		for r, rr := range res.Ranks {
			env := envOf(rr.Tail)
			if rr.State != StateDone || env["RANK"] != strconv.Itoa(r) || env["WORLD_SIZE"] != "2" ||
				env["NCCL_NVLS_ENABLE"] != "0" || env["MGPU_RUN_DIR"] != s.RunDir || env["MGPU_RANK"] != "<unset>" {
				t.Errorf("rank %d: %s %v", r, rr.State, env)
			}
		}
	})
	t.Run("crash", func(t *testing.T) {
		tok := token(t)
		s := spec(t, Torchrun, 3, prog, "1=crash,*=hang", tok)
		s.UseTorchrun, s.Torchrun = true, bin
		s.Timeout = 60 * time.Second
		res := launch(t, context.Background(), s)
		if res.TimedOut || res.FirstFailed != 1 || res.Ranks[1].Signal != "SIGSEGV" {
			t.Errorf("TimedOut=%v FirstFailed=%d rank 1 %+v\nlauncher: %s", res.TimedOut, res.FirstFailed, res.Ranks[1], res.Launcher.Tail)
		}
		assertClean(t, res, tok)
	})
	t.Run("hang", func(t *testing.T) {
		tok := token(t)
		s := spec(t, Torchrun, 2, prog, "*=hangfork", tok)
		s.UseTorchrun, s.Torchrun = true, bin
		s.Timeout, s.Grace = 8*time.Second, time.Second
		res := launch(t, context.Background(), s)
		if !res.TimedOut {
			t.Fatal("not timed out")
		}
		for r, rr := range res.Ranks {
			if rr.State != StateHung || rr.PID == 0 {
				t.Errorf("rank %d: %s pid %d", r, rr.State, rr.PID)
			}
		}
		assertClean(t, res, tok)
	})
}

func TestRing(t *testing.T) {
	r := newRing(10)
	r.write([]byte("ab\n"))
	r.write([]byte("cd\n"))
	if got, lost := r.contents(); got != "ab\ncd\n" || lost != 0 {
		t.Errorf("got %q lost %d", got, lost)
	}
	r.write([]byte("efgh\n")) // 11 bytes written: 'a' evicted, so the partial "b\n" is cut too
	if got, lost := r.contents(); got != "cd\nefgh\n" || lost != 3 {
		t.Errorf("got %q lost %d", got, lost)
	}
	r.write([]byte("0123456789abc\n"))
	// A line longer than the ring keeps its end; with no earlier newline nothing more is cut.
	if got, _ := r.contents(); got != "456789abc\n" {
		t.Errorf("got %q", got)
	}
}

var (
	mpiProgOnce sync.Once
	mpiProgPath string
	mpiProgErr  error
)

// mpiProg compiles testdata/mpiprog.c once with the mpicc beside the test's mpirun; tests skip
// without one.
func mpiProg(t *testing.T, m *MPI) string {
	t.Helper()
	mpicc := filepath.Join(filepath.Dir(m.Mpirun), "mpicc")
	if _, err := os.Stat(mpicc); err != nil {
		t.Skip("no mpicc beside " + m.Mpirun)
	}
	rankProg(t) // makes progDir, removed by TestMain
	mpiProgOnce.Do(func() {
		if progErr != nil {
			mpiProgErr = progErr
			return
		}
		mpiProgPath = filepath.Join(progDir, "mpiprog")
		out, err := exec.Command(mpicc, "-O0", "-o", mpiProgPath, "testdata/mpiprog.c").CombinedOutput()
		if err != nil {
			mpiProgErr = fmt.Errorf("mpicc: %v\n%s", err, out)
		}
	})
	if mpiProgErr != nil {
		t.Fatal(mpiProgErr)
	}
	return mpiProgPath
}

// assertNoDaemons checks that no Open MPI daemon of the test's jobs survived.
func assertNoDaemons(t *testing.T) {
	t.Helper()
	for _, daemon := range []string{"orted\x00", "prted\x00"} {
		if left := processesWith(daemon); len(left) > 0 {
			t.Errorf("%s still running: %v", strings.TrimSuffix(daemon, "\x00"), left)
		}
	}
}

// A real MPI job whose ranks deadlock in MPI_Send (the course's send/send bug) ends at the
// timeout with every rank hung, named with its process, and nothing of it left: not the
// ranks, not mpirun, not a daemon. Three ranks: the odd one out waits in MPI_Barrier.
func TestMPIRealDeadlockLeavesNothing(t *testing.T) {
	m := openMPI(t)
	prog := mpiProg(t, m)
	for _, c := range []struct {
		mode string
		n    int
	}{{"deadlock", 2}, {"deadlock", 3}, {"forkdeadlock", 2}} {
		n := c.n
		t.Run(c.mode+"-"+strconv.Itoa(n), func(t *testing.T) {
			tok := token(t)
			s := spec(t, MPIRun, n, prog, c.mode, tok)
			s.MPI = m
			s.Timeout = 2 * time.Second
			s.Grace = 500 * time.Millisecond
			res := launch(t, context.Background(), s)
			if !res.TimedOut {
				t.Fatalf("not timed out; launcher %+v", res.Launcher)
			}
			var kids []int
			for r, rr := range res.Ranks {
				if rr.State != StateHung || rr.PID == 0 {
					t.Errorf("rank %d: state %s pid %d, want hung with its pid (tail %q)", r, rr.State, rr.PID, rr.Tail)
				}
				if !strings.Contains(rr.Tail, fmt.Sprintf("rank %d of %d", r, n)) {
					t.Errorf("rank %d: output not routed to it: %q", r, rr.Tail)
				}
				if m := childRe.FindStringSubmatch(rr.Tail); m != nil {
					pid, _ := strconv.Atoi(m[1])
					kids = append(kids, pid)
				} else if c.mode == "forkdeadlock" {
					t.Errorf("rank %d: no child reported in %q", r, rr.Tail)
				}
			}
			assertClean(t, res, tok, kids...)
			assertNoDaemons(t)
		})
	}
}

// A rank that ignores SIGTERM while blocked in MPI_Recv is still gone after the grace.
func TestMPIRealStuckRankIgnoresTERM(t *testing.T) {
	m := openMPI(t)
	prog := mpiProg(t, m)
	tok := token(t)
	s := spec(t, MPIRun, 3, prog, "stuck1", tok)
	s.MPI = m
	s.Timeout = 2 * time.Second
	s.Grace = 500 * time.Millisecond
	res := launch(t, context.Background(), s)
	if !res.TimedOut {
		t.Fatal("not timed out")
	}
	if rr := res.Ranks[1]; rr.State != StateHung || !strings.Contains(rr.Tail, "ignores SIGTERM") {
		t.Errorf("rank 1: %s %q", rr.State, rr.Tail)
	}
	assertClean(t, res, tok)
	assertNoDaemons(t)
}

// A rank that leaves without MPI_Finalize makes mpirun end the job at once and name it.
func TestMPIRealExitNamesTheRank(t *testing.T) {
	m := openMPI(t)
	prog := mpiProg(t, m)
	tok := token(t)
	s := spec(t, MPIRun, 3, prog, "exit1", tok)
	s.MPI = m
	s.Timeout = 20 * time.Second
	s.Grace = 500 * time.Millisecond
	res := launch(t, context.Background(), s)
	if res.TimedOut {
		t.Fatal("mpirun did not end the job after a rank exited")
	}
	if res.FirstFailed != 1 || res.Ranks[1].State != StateFailed || res.Ranks[1].ExitCode != 3 {
		t.Errorf("FirstFailed=%d rank 1 %+v; launcher tail %q", res.FirstFailed, res.Ranks[1], res.Launcher.Tail)
	}
	assertClean(t, res, tok)
	assertNoDaemons(t)
}

// MPI_Abort ends the job without a timeout. (Open MPI 4.1 sometimes loses its own
// "MPI_ABORT was invoked" message in a race of its help-message forwarding, so the rank is
// not asserted here; TestFailureParsers reads the message.)
func TestMPIRealAbortEndsTheJob(t *testing.T) {
	m := openMPI(t)
	prog := mpiProg(t, m)
	tok := token(t)
	s := spec(t, MPIRun, 2, prog, "abort1", tok)
	s.MPI = m
	s.Timeout = 20 * time.Second
	s.Grace = 500 * time.Millisecond
	res := launch(t, context.Background(), s)
	if res.TimedOut || res.Launcher.State == StateDone {
		t.Fatalf("TimedOut=%v launcher %s", res.TimedOut, res.Launcher.State)
	}
	if res.FirstFailed != -1 && res.FirstFailed != 1 {
		t.Errorf("FirstFailed = %d", res.FirstFailed)
	}
	assertClean(t, res, tok)
	assertNoDaemons(t)
}

// Each rank of a real MPI job knows its local rank (the harness picks GPU local_rank % count
// from it), and nothing of an MPI job that started the checker leaks into this one.
func TestMPIRealEnvironment(t *testing.T) {
	m := openMPI(t)
	prog := mpiProg(t, m)
	t.Setenv("OMPI_COMM_WORLD_RANK", "7")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", "7")
	t.Setenv("PMIX_RANK", "7")
	t.Setenv("PMI_RANK", "7")
	t.Setenv("OMPI_MCA_ess_base_jobid", "12345")
	t.Setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none") // a user's tuning stays
	vars := []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
		"PMI_RANK", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_btl_vader_single_copy_mechanism",
		"OMPI_ALLOW_RUN_AS_ROOT", "MGPU_RDZV_DIR", "NCCL_NVLS_ENABLE", "MGPU_TEST_FOO"}
	s := spec(t, MPIRun, 3, append([]string{prog, "env"}, vars...)...)
	s.MPI = m
	s.Env = []string{"MGPU_TEST_FOO=a b"}
	res := launch(t, context.Background(), s)
	if res.Launcher.State != StateDone {
		t.Fatalf("launcher %+v", res.Launcher)
	}
	for r, rr := range res.Ranks {
		env := envOf(rr.Tail)
		want := map[string]string{
			"OMPI_COMM_WORLD_RANK": strconv.Itoa(r), "OMPI_COMM_WORLD_LOCAL_RANK": strconv.Itoa(r),
			"OMPI_COMM_WORLD_LOCAL_SIZE": "3", "PMI_RANK": "<unset>", "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
			"MGPU_RDZV_DIR": filepath.Join(s.RunDir, "rdzv"), "NCCL_NVLS_ENABLE": "0", "MGPU_TEST_FOO": "a b",
		}
		if os.Geteuid() == 0 {
			want["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, env[k], v)
			}
		}
		if env["OMPI_MCA_ess_base_jobid"] == "12345" {
			t.Errorf("rank %d inherited the outer job's id", r)
		}
	}
}

// An Open MPI in a prefix of its own gets OPAL_PREFIX (an inherited one loses); the system's
// does not; root runs get the flag and both variables.
func TestMPIPrefixAndRoot(t *testing.T) {
	home := t.TempDir()
	for _, f := range []string{"bin/mpirun", "lib/libopen-pal.so.40"} {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := newEnviron([]string{"PATH=/bin", "OPAL_PREFIX=/elsewhere", "PMIX_NAMESPACE=outer", "LD_LIBRARY_PATH=/x"})
	s := &Spec{Ranks: 2, Argv: []string{"./prog"}, MPI: &MPI{Home: home, Dialect: "openmpi"}}
	argv, _, _, _, err := mpiPlan(s, env, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	if argv[0] != filepath.Join(home, "bin", "mpirun") || !strings.Contains(got, "-x OPAL_PREFIX") || !strings.Contains(got, "-x LD_LIBRARY_PATH") {
		t.Errorf("argv %q", got)
	}
	if env.get("OPAL_PREFIX") != home || env.get("PMIX_NAMESPACE") != "" ||
		env.get("LD_LIBRARY_PATH") != filepath.Join(home, "lib")+":/x" || !strings.HasPrefix(env.get("PATH"), filepath.Join(home, "bin")+":") {
		t.Errorf("env %v", env.list())
	}
	root := os.Geteuid() == 0
	if strings.Contains(got, "--allow-run-as-root") != root || (env.get("OMPI_ALLOW_RUN_AS_ROOT") == "1") != root ||
		(env.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1") != root {
		t.Errorf("root=%v: argv %q, env %v", root, got, env.list())
	}

	env = newEnviron([]string{"PATH=/bin", "OPAL_PREFIX=/mine"})
	s.MPI = &MPI{Mpirun: "/usr/bin/mpirun", Home: "/usr", Dialect: "openmpi"}
	argv, _, _, _, _ = mpiPlan(s, env, nil)
	if strings.Contains(strings.Join(argv, " "), "OPAL_PREFIX") || env.get("OPAL_PREFIX") != "/mine" {
		t.Errorf("system MPI: argv %q OPAL_PREFIX %q", argv, env.get("OPAL_PREFIX"))
	}
}
