package launch

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests below run against a real Slurm: inside an allocation (salloc, or a step), with
// MGPU_LEARN_SLURM_TEST=1. scripts/slurm-loopback.sh run-check starts a single-node cluster on
// the loopback and runs them there.
func liveSlurm(t *testing.T) *Spec {
	t.Helper()
	if os.Getenv("MGPU_LEARN_SLURM_TEST") != "1" {
		t.Skip("set MGPU_LEARN_SLURM_TEST=1 inside a Slurm allocation (scripts/slurm-loopback.sh run-check)")
	}
	if SlurmFromEnv(os.Environ()) == nil {
		t.Fatal("MGPU_LEARN_SLURM_TEST=1 but SLURM_JOB_ID is not set: run the tests inside an allocation")
	}
	s := Spec{Launcher: Srun}
	return &s
}

// noStepLeft checks with squeue that no step of this launcher is still known to Slurm.
func noStepLeft(t *testing.T) {
	t.Helper()
	squeue, err := exec.LookPath("squeue")
	if err != nil {
		return
	}
	var out []byte
	for i := 0; i < 20; i++ {
		out, _ = exec.Command(squeue, "--steps", "--noheader", "--format=%i %j", "--jobs="+os.Getenv("SLURM_JOB_ID")).Output()
		if !strings.Contains(string(out), " "+srunStepName) {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Errorf("steps still running after the launch:\n%s", out)
}

func TestSlurmLiveRanks(t *testing.T) {
	liveSlurm(t)
	prog := rankProg(t)
	s := spec(t, Srun, 3, append([]string{prog, "*=env"}, append(envNames, "SLURM_STEP_ID", "SLURM_PROCID")...)...)
	s.Env = []string{"MGPU_TEST_FOO=bar=baz"}
	var lines []string
	s.Output = func(rank int, line string) {
		if rank >= 0 {
			lines = append(lines, strconv.Itoa(rank)+"|"+line)
		}
	}
	res := launch(t, context.Background(), s)
	if res.FirstFailed != -1 || res.Launcher.State != StateDone {
		t.Fatalf("FirstFailed=%d srun %s: %s", res.FirstFailed, res.Launcher.State, res.Launcher.Tail)
	}
	step := ""
	for r, rr := range res.Ranks {
		env := envOf(rr.Tail)
		if rr.State != StateDone {
			t.Errorf("rank %d: %s", r, rr.State)
		}
		for k, v := range map[string]string{
			"MGPU_RANK": strconv.Itoa(r), "MGPU_WORLD_SIZE": "3", "RANK": strconv.Itoa(r), "SLURM_PROCID": strconv.Itoa(r),
			"LOCAL_RANK": strconv.Itoa(r), "WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "NCCL_NVLS_ENABLE": "0",
			"NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "MGPU_TEST_FOO": "bar=baz",
			"MGPU_RUN_DIR": s.RunDir,
		} {
			if env[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, env[k], v)
			}
		}
		if env["SLURM_STEP_ID"] == "" || step != "" && env["SLURM_STEP_ID"] != step {
			t.Errorf("rank %d: step %q (rank 0: %q)", r, env["SLURM_STEP_ID"], step)
		}
		step = env["SLURM_STEP_ID"]
		// The process that printed "pid N" is the one the supervisor names as the rank.
		if f := strings.Fields(rr.Tail); len(f) > 3 && f[2] == "pid" && rr.PID != 0 && f[3] != strconv.Itoa(rr.PID) {
			t.Errorf("rank %d: PID %d, but the rank is process %s", r, rr.PID, f[3])
		}
	}
	if len(lines) < 3*len(envNames) {
		t.Errorf("Output saw %d rank lines", len(lines))
	}
	assertClean(t, res, prog+"\x00*=env")
	noStepLeft(t)
}

func TestSlurmLiveFailureNamesTheRank(t *testing.T) {
	liveSlurm(t)
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Srun, 3, prog, "1=crash,*=hang", tok)
	s.Timeout = 30 * time.Second
	res := launch(t, context.Background(), s)
	if res.TimedOut {
		t.Fatal("srun did not end the step after a rank crashed")
	}
	if res.FirstFailed != 1 || res.Ranks[1].State != StateSignaled || res.Ranks[1].Signal != "SIGSEGV" {
		t.Fatalf("FirstFailed=%d rank 1 %s %q; srun said %q", res.FirstFailed, res.Ranks[1].State, res.Ranks[1].Signal, res.Launcher.Tail)
	}
	for _, r := range []int{0, 2} {
		if st := res.Ranks[r].State; st != StateKilled {
			t.Errorf("rank %d: %s, want killed", r, st)
		}
	}
	if !strings.Contains(res.Ranks[1].Tail, "about to crash") {
		t.Errorf("rank 1's tail: %q", res.Ranks[1].Tail)
	}
	assertClean(t, res, tok)
	noStepLeft(t)

	s = spec(t, Srun, 2, prog, "0=exit:3,*=ok", tok)
	res = launch(t, context.Background(), s)
	if res.FirstFailed != 0 || res.Ranks[0].State != StateFailed || res.Ranks[0].ExitCode != 3 {
		t.Errorf("exit 3: FirstFailed=%d rank 0 %s %d; srun said %q", res.FirstFailed, res.Ranks[0].State, res.Ranks[0].ExitCode, res.Launcher.Tail)
	}
	assertClean(t, res, tok)
}

// A hung rank (one ignoring SIGTERM, one with a child) is gone after the timeout: nothing of
// the job in the process table, no step left in Slurm.
func TestSlurmLiveHangLeavesNothing(t *testing.T) {
	liveSlurm(t)
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Srun, 2, prog, "0=ignoreterm,*=hangfork", tok)
	s.Timeout = 2 * time.Second
	s.Grace = 500 * time.Millisecond
	res := launch(t, context.Background(), s)
	if !res.TimedOut {
		t.Fatal("not timed out")
	}
	var kids []int
	for r, rr := range res.Ranks {
		if rr.State != StateHung {
			t.Errorf("rank %d: %s, want hung", r, rr.State)
		}
		if rr.PID == 0 {
			t.Errorf("rank %d: process not found", r)
		}
		if m := childRe.FindStringSubmatch(rr.Tail); m != nil {
			pid, _ := strconv.Atoi(m[1])
			kids = append(kids, pid)
		}
	}
	if len(kids) != 1 {
		t.Errorf("rank 1 did not report its child: %q", res.Ranks[1].Tail)
	}
	if d := res.Elapsed; d > s.Timeout+10*time.Second {
		t.Errorf("the teardown took %v", d-s.Timeout)
	}
	assertClean(t, res, tok, kids...)
	noStepLeft(t)
}

func TestSlurmLiveCancel(t *testing.T) {
	liveSlurm(t)
	prog := rankProg(t)
	tok := token(t)
	s := spec(t, Srun, 2, prog, "*=hang", tok)
	s.Grace = 500 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := 0
	s.Output = func(rank int, line string) {
		if strings.Contains(line, "mode hang") {
			started++
			if started == 2 {
				cancel()
			}
		}
	}
	res := launch(t, ctx, s)
	if !res.Canceled {
		t.Fatal("not canceled")
	}
	for r, rr := range res.Ranks {
		if rr.State != StateKilled {
			t.Errorf("rank %d: %s, want killed", r, rr.State)
		}
	}
	assertClean(t, res, tok)
	noStepLeft(t)
}
