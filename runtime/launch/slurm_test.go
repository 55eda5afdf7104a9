package launch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExpandHostlist(t *testing.T) {
	for in, want := range map[string][]string{
		"vm":                    {"vm"},
		"a,b":                   {"a", "b"},
		"gpu[01-03,07]":         {"gpu01", "gpu02", "gpu03", "gpu07"},
		"n[8-10]":               {"n8", "n9", "n10"},
		"r[1-2]n[1-2],login":    {"r1n1", "r1n2", "r2n1", "r2n2", "login"},
		"gpu-a[1-2]-ib,gpu-b03": {"gpu-a1-ib", "gpu-a2-ib", "gpu-b03"},
		"":                      nil,
	} {
		got, err := ExpandHostlist(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"n[1-", "n[3-1]", "n[a-b]"} {
		if _, err := ExpandHostlist(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestSlurmFromEnv(t *testing.T) {
	if j := SlurmFromEnv([]string{"PATH=/bin", "SLURM_CONF=/etc/slurm.conf"}); j != nil {
		t.Errorf("outside a job: %+v", j)
	}
	// A step on the second node of a two-node job with GPUs.
	j := SlurmFromEnv([]string{
		"SLURM_JOB_ID=812", "SLURM_STEP_ID=0", "SLURMD_NODENAME=gpu02", "SLURM_JOB_NODELIST=gpu[01-02]",
		"SLURM_JOB_PARTITION=h200", "SLURM_JOB_CPUS_PER_NODE=16(x2)", "SLURM_GPUS_ON_NODE=4",
	})
	want := &SlurmJob{JobID: "812", StepID: "0", Node: "gpu02", NodeList: "gpu[01-02]",
		Nodes: []string{"gpu01", "gpu02"}, Partition: "h200", CPUs: 16, GPUs: 4}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("step:\n got %+v\nwant %+v", j, want)
	}
	// An salloc shell: no node name, no step, CPUs per node in the compressed form, GPUs as
	// a list of indexes.
	j = SlurmFromEnv([]string{"SLURM_JOB_ID=9", "SLURM_NODELIST=vm,vm2", "SLURM_JOB_CPUS_PER_NODE=2,4",
		"SLURM_JOB_GPUS=0,1"})
	if j.Node != "" || j.StepID != "" || j.CPUs != 2 || j.GPUs != 2 || !reflect.DeepEqual(j.Nodes, []string{"vm", "vm2"}) {
		t.Errorf("salloc shell: %+v", j)
	}
	// CPUs of the node this step runs on, from the compressed form.
	j = SlurmFromEnv([]string{"SLURM_JOB_ID=9", "SLURMD_NODENAME=c3", "SLURM_JOB_NODELIST=c[1-4]", "SLURM_JOB_CPUS_PER_NODE=8(x2),4(x2)"})
	if j.CPUs != 4 || j.GPUs != 0 {
		t.Errorf("compressed cpus: %+v", j)
	}
}

func TestHereNode(t *testing.T) {
	step := &SlurmJob{JobID: "1", Node: "gpu02", Nodes: []string{"gpu01", "gpu02"}}
	if n, err := step.HereNode("whatever"); err != nil || n != "gpu02" {
		t.Errorf("in a step: %q %v", n, err)
	}
	shell := &SlurmJob{JobID: "1", NodeList: "gpu[01-02]", Nodes: []string{"gpu01", "gpu02"}}
	if n, err := shell.HereNode("gpu01.cluster.example"); err != nil || n != "gpu01" {
		t.Errorf("salloc shell on a node: %q %v", n, err)
	}
	_, err := shell.HereNode("login1")
	if err == nil {
		t.Fatal("login node accepted")
	}
	for _, want := range []string{"job 1", "gpu[01-02]", "login1", "MGPU_LEARN_SLURM=off", "--slurm", "srun --jobid=1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q lacks %q", err, want)
		}
	}
}

func TestSlurmLauncherDecision(t *testing.T) {
	step := []string{"SLURM_JOB_ID=5", "SLURM_STEP_ID=0", "SLURMD_NODENAME=vm", "SLURM_JOB_NODELIST=vm"}
	login := []string{"SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=gpu[1-2]"}
	off := append([]string{"MGPU_LEARN_SLURM=off"}, step...)
	for _, c := range []struct {
		name     string
		launcher string
		ranks    int
		torchrun bool
		env      []string
		want     string
	}{
		{"no job", Local, 4, false, nil, Local},
		{"local in a step", Local, 4, false, step, Srun},
		{"default launcher", "", 2, false, step, Srun},
		{"python direct", Torchrun, 2, false, step, Srun},
		{"torchrun program", Torchrun, 2, true, step, Torchrun},
		{"mpirun", MPIRun, 2, false, step, MPIRun},
		{"one rank stays here", Local, 1, false, step, Local},
		{"single stays here", Single, 4, false, step, Single},
		{"opt-out", Local, 4, false, off, Local},
		{"off the job's nodes: srun refuses", Local, 1, false, login, Srun},
		{"single off the nodes too", Single, 1, false, login, Srun},
	} {
		got := slurmLauncher(Spec{Launcher: c.launcher, Ranks: c.ranks, UseTorchrun: c.torchrun}, c.env, "vm")
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestSrunArgv(t *testing.T) {
	s := &Spec{Ranks: 4, Argv: []string{"/venv/bin/python3", "driver.py"}, Dir: "/runs/run-1", Srun: "/usr/bin/srun"}
	argv, err := srunPlan(s, &SlurmJob{JobID: "7", CPUs: 16, GPUs: 4}, "gpu01")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(argv, " ")
	for _, want := range []string{"/usr/bin/srun ", "--ntasks=4", "--nodes=1", "--nodelist=gpu01", "--overlap",
		"--kill-on-bad-exit=1", "--label", "--export=ALL", "--cpu-bind=none", "--chdir=/runs/run-1",
		"--cpus-per-task=4", "--gpu-bind=none", "/bin/sh -c "} {
		if !strings.Contains(got, want) {
			t.Errorf("argv %q lacks %q", got, want)
		}
	}
	for _, bad := range []string{"--unbuffered", "--gpus-per-task", "--overcommit"} {
		if strings.Contains(got, bad) {
			t.Errorf("argv %q has %q", got, bad)
		}
	}
	if !strings.HasSuffix(got, " /venv/bin/python3 driver.py") {
		t.Errorf("program not last: %q", got)
	}
	// CPU-only, more ranks than CPUs, keep going: no GPU flags, overcommit, no kill on a bad exit.
	s.KeepGoing = true
	argv, _ = srunPlan(s, &SlurmJob{JobID: "7", CPUs: 2}, "vm")
	got = strings.Join(argv, " ")
	for _, want := range []string{"--cpus-per-task=1", "--overcommit", "--kill-on-bad-exit=0"} {
		if !strings.Contains(got, want) {
			t.Errorf("argv %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "--gpu") || strings.Contains(got, "--gres") {
		t.Errorf("CPU-only step asks for GPUs: %q", got)
	}
}

// The rank script, run by a real shell with what slurmstepd sets: the protocol's rank
// variables, arguments passed through untouched, and the task's process is the program.
func TestRankScript(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", rankScript(3), "/bin/sh", "-c",
		`echo "$MGPU_RANK $MGPU_WORLD_SIZE $MGPU_LOCAL_RANK $MGPU_LOCAL_WORLD_SIZE $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $ROLE_RANK|$1|$2|$$"`,
		"x", "a b", "$HOME;")
	cmd.Env = []string{"SLURM_PROCID=2", "SLURM_LOCALID=2", "PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "|")
	if len(f) != 4 || f[0] != "2 3 2 3 2 3 2 3 0 2" || f[1] != "a b" || f[2] != "$HOME;" {
		t.Fatalf("got %q", out)
	}
	if f[3] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("the program runs as pid %s, not as the task's process %d (no exec)", f[3], cmd.Process.Pid)
	}
	cmd = exec.Command("/bin/sh", "-c", rankScript(2), "/bin/true")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "not started by srun") {
		t.Errorf("without SLURM_PROCID: %v %q", err, out)
	}
}

func TestSrunTagAndFailures(t *testing.T) {
	for _, c := range []struct {
		in   string
		rank int
		rest string
		ok   bool
	}{
		{"0: hello", 0, "hello", true},
		{" 3: padded", 3, "padded", true},
		{"1: 0: nested", 1, "0: nested", true},
		{"0: slurmstepd-vm: error: *** STEP 4.0 ON vm CANCELLED AT 2026-11-24T18:17:35 ***", 0, "", false},
		{"srun: error: vm: task 1: Exited with exit code 3", 0, "", false},
		{"no label", 0, "", false},
	} {
		r, rest, ok := srunTag([]byte(c.in))
		if ok != c.ok || ok && (r != c.rank || string(rest) != c.rest) {
			t.Errorf("%q: got %d %q %v", c.in, r, rest, ok)
		}
	}
	// What srun 22.05 printed on the loopback cluster when task 1 failed and the step was ended.
	p := &srunFailures{}
	for _, l := range []string{
		"srun: error: vm: task 1: Exited with exit code 3",
		"srun: launch/slurm: _step_signal: Terminating StepId=4.0",
		"srun: error: vm: task 0: Terminated",
		"srun: Force Terminated StepId=4.0",
	} {
		p.line(l)
	}
	if e, ok := p.first(); !ok || e.rank != 1 || e.code != 3 || e.signal != 0 {
		t.Errorf("exit: %+v %v", e, ok)
	}
	if e, ok := p.of(0); !ok || e.signal != syscall.SIGTERM {
		t.Errorf("rank 0: %+v %v", e, ok)
	}
	p = &srunFailures{}
	p.line("srun: error: vm: tasks 0,2: Killed")
	p.line("srun: error: vm: task 1: Segmentation fault (core dumped)")
	if e, _ := p.first(); e.rank != 1 || e.signal != syscall.SIGSEGV {
		t.Errorf("a crash reported after the kills must be the first failure: %+v", e)
	}
	if e, ok := p.of(2); !ok || e.signal != syscall.SIGKILL {
		t.Errorf("rank 2 of a task list: %+v %v", e, ok)
	}
	p = &srunFailures{}
	p.line("srun: error: vm: tasks 0-1: Killed")
	if e, ok := p.first(); !ok || e.rank != 0 || e.signal != syscall.SIGKILL {
		t.Errorf("only kills: %+v %v", e, ok)
	}
	p = &srunFailures{}
	p.line("0: srun: error: vm: task 0: Exited with exit code 9") // a rank's own line
	if _, ok := p.first(); ok {
		t.Error("a labelled line was read as srun's")
	}
}

// fakeSrun points the Srun launcher at testdata/fake-srun.sh inside a pretend allocation.
func fakeSrun(t *testing.T, s *Spec) {
	t.Helper()
	path, err := filepath.Abs("testdata/fake-srun.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"setsid", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	host, _ := os.Hostname()
	t.Setenv("SLURM_JOB_ID", "4242")
	t.Setenv("SLURM_STEP_ID", "0")
	t.Setenv("SLURMD_NODENAME", host)
	t.Setenv("SLURM_JOB_NODELIST", host)
	t.Setenv("SLURM_CPUS_ON_NODE", "2")
	t.Setenv("SLURM_GPUS_PER_TASK", "1") // from an enclosing step: must not reach srun
	s.Launcher, s.Srun = Srun, path
}

func TestFakeSrunRanksAndEnvironment(t *testing.T) {
	prog := rankProg(t)
	s := spec(t, Srun, 3, append([]string{prog, "*=env"}, append(envNames, "SLURM_GPUS_PER_TASK")...)...)
	fakeSrun(t, &s)
	argvFile := filepath.Join(t.TempDir(), "argv")
	t.Setenv("FAKE_SRUN_ARGV", argvFile)
	s.Env = []string{"NCCL_NVLS_ENABLE=1", "MGPU_TEST_FOO=bar=baz"}
	res := launch(t, context.Background(), s)
	if res.FirstFailed != -1 || res.Launcher == nil || res.Launcher.State != StateDone {
		t.Fatalf("FirstFailed=%d launcher %+v", res.FirstFailed, res.Launcher)
	}
	port := ""
	for r, rr := range res.Ranks {
		env := envOf(rr.Tail)
		if rr.State != StateDone {
			t.Errorf("rank %d: %s", r, rr.State)
		}
		want := map[string]string{
			"MGPU_RANK": strconv.Itoa(r), "MGPU_WORLD_SIZE": "3", "MGPU_LOCAL_RANK": strconv.Itoa(r),
			"RANK": strconv.Itoa(r), "WORLD_SIZE": "3", "LOCAL_RANK": strconv.Itoa(r), "LOCAL_WORLD_SIZE": "3",
			"MASTER_ADDR": "127.0.0.1", "MGPU_RUN_DIR": s.RunDir, "MGPU_RDZV_DIR": filepath.Join(s.RunDir, "rdzv"),
			"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
			"MGPU_TEST_FOO": "bar=baz", "SLURM_GPUS_PER_TASK": "<unset>",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, env[k], v)
			}
		}
		if port != "" && env["MASTER_PORT"] != port || env["MASTER_PORT"] == "" {
			t.Errorf("rank %d: MASTER_PORT %q (rank 0: %q)", r, env["MASTER_PORT"], port)
		}
		port = env["MASTER_PORT"]
	}
	b, err := os.ReadFile(argvFile)
	if err != nil {
		t.Fatal(err)
	}
	if argv := string(b); !strings.Contains(argv, "--ntasks=3") || !strings.Contains(argv, "--overcommit") {
		t.Errorf("srun argv:\n%s", argv)
	}
	assertClean(t, res, prog+"\x00*=env")
}

func TestFakeSrunFailureNamesTheRank(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Srun, 3, prog, "2=exit:3,*=ok", tok)
	fakeSrun(t, &s)
	res := launch(t, context.Background(), s)
	if res.FirstFailed != 2 {
		t.Fatalf("FirstFailed = %d; launcher tail %q", res.FirstFailed, res.Launcher.Tail)
	}
	if rr := res.Ranks[2]; rr.State != StateFailed || rr.ExitCode != 3 {
		t.Errorf("rank 2: %s exit %d", rr.State, rr.ExitCode)
	}
	if !strings.Contains(res.Ranks[2].Tail, "rank 2 exits 3") {
		t.Errorf("rank 2's tail: %q", res.Ranks[2].Tail)
	}
	assertClean(t, res, tok)
}

// The tasks are not the supervisor's descendants and this srun forwards nothing: a hung job
// is still gone after the timeout, found through the tag in the tasks' environment.
func TestFakeSrunHangLeavesNothing(t *testing.T) {
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Srun, 2, prog, "0=ignoreterm,*=hangfork", tok)
	fakeSrun(t, &s)
	s.Timeout = 1500 * time.Millisecond
	s.Grace = 400 * time.Millisecond
	res := launch(t, context.Background(), s)
	if !res.TimedOut {
		t.Fatal("not timed out")
	}
	var kids []int
	for r, rr := range res.Ranks {
		if rr.PID == 0 {
			t.Errorf("rank %d: process not found", r)
		}
		if rr.State != StateHung {
			t.Errorf("rank %d: %s, want hung", r, rr.State)
		}
		if m := childRe.FindStringSubmatch(rr.Tail); m != nil {
			pid, _ := strconv.Atoi(m[1])
			kids = append(kids, pid)
		}
	}
	if len(kids) != 1 {
		t.Errorf("rank 1's child not reported: %q", res.Ranks[1].Tail)
	}
	assertClean(t, res, tok, kids...)
}

func TestSrunRefusals(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SLURM_JOB_ID", "")
	s := Spec{Launcher: Srun, Ranks: 2, Argv: []string{"true"}, RunDir: dir}
	if _, err := New().Launch(context.Background(), s); err == nil || !strings.Contains(err.Error(), "SLURM_JOB_ID") {
		t.Errorf("outside a job: %v", err)
	}
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("SLURMD_NODENAME", "")
	t.Setenv("SLURM_JOB_NODELIST", "elsewhere[1-2]")
	_, err := New().Launch(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "not one of them") {
		t.Errorf("off the job's nodes: %v", err)
	}
}
