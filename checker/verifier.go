package checker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// The verifier (docs/protocol.md §4, "The verifier"). For an exercise with `verifier: true`
// every rank has a verifier process of its own: the driver built with -DMGPU_VERIFIER and the
// harness, without the learner's code. The checker starts it beside the ranks; it connects to
// the records channel as "verify <rank>", receives the run's seed (which the rank never gets),
// reads what the rank hands over, makes the expected values itself and records the cases. The
// rank's process therefore holds no expected value and no verdict to forge.

// verifierGrace is how long verifiers may run on after the ranks ended: they only finish the
// comparisons of outputs already handed over.
const verifierGrace = 60 * time.Second

// verifiers are the verifier processes of one run.
type verifiers struct {
	pids  []int // each leads its own process group
	logs  []string
	waits []<-chan int // its exit status once it ended (-1: killed or lost)
	// Warm counts the verifiers forked from the warm pool (Python, docs/runtime.md).
	Warm int
	// Exit is each verifier's exit status (-1: killed or not started) once wait returned.
	Exit []int
}

// startVerifiers starts one verifier per rank, each in its own process group, and names them
// to the records server. A Python verifier is forked from the zygote the ranks of spec come
// from when the check has a warm pool (launch.ForkSide), else started cold like a C one.
func (k *check) startVerifiers(ctx context.Context, prog *program, spec *launch.Spec, nranks int, dir string, srv *recordServer) (*verifiers, error) {
	v := &verifiers{Exit: make([]int, nranks)}
	for r := 0; r < nranks; r++ {
		extra := append(slices.Clone(spec.Env),
			"MGPU_ROLE=verifier",
			"MGPU_RUN_DIR="+dir,
			// Its CPU threads wait asleep, not spinning, between steps: a spinning pool beside
			// the rank's slowed a verifier on a 2-core machine several times over.
			"OMP_WAIT_POLICY=PASSIVE",
		)
		if k.e.Kind != "python" {
			// A C or CUDA verifier never needs a GPU; a driver that reaches for one there
			// fails clearly. A Python verifier compares on its rank's GPU, and the rank waits
			// for it to catch up before it times anything (docs/protocol.md §4).
			extra = append(extra, "CUDA_VISIBLE_DEVICES=")
		}
		env := launch.SideEnv(append(extra, prog.verifierEnv...), r, nranks)
		logPath := filepath.Join(dir, fmt.Sprintf("verifier-%d.log", r))
		lf, err := os.Create(logPath)
		if err != nil {
			v.kill()
			return nil, err
		}
		if k.e.Kind == "python" {
			if pid, exit, ok := launch.ForkSide(ctx, spec, prog.verifier, env, dir, lf); ok {
				lf.Close() // the verifier has its own copy
				srv.allowVerifier(r, pid)
				v.pids, v.logs, v.waits = append(v.pids, pid), append(v.logs, logPath), append(v.waits, exit)
				v.Warm++
				continue
			}
		}
		cmd := exec.Command(prog.verifier[0], prog.verifier[1:]...)
		cmd.Dir = dir
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			lf.Close()
			v.kill()
			return nil, fmt.Errorf("cannot start rank %d's verifier: %w", r, err)
		}
		srv.allowVerifier(r, cmd.Process.Pid)
		ch := make(chan int, 1)
		go func() { err := cmd.Wait(); lf.Close(); ch <- exitStatus(err) }()
		v.pids, v.logs, v.waits = append(v.pids, cmd.Process.Pid), append(v.logs, logPath), append(v.waits, ch)
	}
	return v, nil
}

// wait gives the verifiers up to grace to end, then kills what is left (their whole groups).
func (v *verifiers) wait(grace time.Duration) {
	deadline := time.After(grace)
	for i, ch := range v.waits {
		select {
		case v.Exit[i] = <-ch:
			continue
		case <-deadline:
		}
		for j := i; j < len(v.waits); j++ {
			syscall.Kill(-v.pids[j], syscall.SIGKILL)
			<-v.waits[j]
			v.Exit[j] = -1
		}
		return
	}
}

// kill ends every started verifier at once (a run that could not start).
func (v *verifiers) kill() {
	for i, pid := range v.pids {
		syscall.Kill(-pid, syscall.SIGKILL)
		<-v.waits[i]
	}
}

func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// tail is the end of rank r's verifier output, for reports.
func (v *verifiers) tail(r int) string {
	if v == nil || r >= len(v.logs) {
		return ""
	}
	b, err := os.ReadFile(v.logs[r])
	if err != nil {
		return ""
	}
	return lastLines(string(b), 20)
}

// verifierRecords reads what each rank's verifier sent (kept as verifier-<r>.jsonl) and notes,
// as forgery, a split rank that recorded cases itself.
func (k *check) verifierRecords(rr *runResult, nranks int) {
	for r := 0; r < nranks; r++ {
		if r < len(rr.records) && len(rr.records[r].Cases) > 0 {
			rr.forgery = append(rr.forgery, fmt.Sprintf("rank %d recorded case %q itself: in this exercise only its verifier, a separate process, records cases", r, rr.records[r].Cases[0].Case))
		}
		p := filepath.Join(rr.dir, fmt.Sprintf("verifier-%d.jsonl", r))
		ch := rr.vchans[r]
		if ch == nil {
			rr.vrecords = append(rr.vrecords, &rankRecords{Rank: r, Path: p, Missing: true})
			continue
		}
		if ch.Forged != "" {
			rr.forgery = append(rr.forgery, fmt.Sprintf("rank %d's verifier: %s", r, ch.Forged))
		}
		os.WriteFile(p, ch.Records(), 0o644)
		recs, err := parseRecords(bytes.NewReader(ch.Records()), p, r)
		if recs == nil {
			recs = &rankRecords{Rank: r, Path: p}
		}
		if err != nil {
			recs.Errors = append(recs.Errors, record{T: "error", Where: "harness", Call: "records", Msg: err.Error()})
		}
		if recs.SummaryProblem != "" {
			rr.forgery = append(rr.forgery, fmt.Sprintf("rank %d's verifier: %s", r, recs.SummaryProblem))
		}
		rr.vrecords = append(rr.vrecords, recs)
	}
}

// checkVerifiers runs once every rank finished well: each verifier must have finished too.
// Then its cases become the rank's. A verifier that found the rank's outputs out of the
// driver's order blames the program; any other verifier failure is the course's.
func (k *check) checkVerifiers(rr *runResult) bool {
	for r, vrec := range rr.vrecords {
		exit := -1
		if r < len(rr.verifiers.Exit) {
			exit = rr.verifiers.Exit[r]
		}
		tail := rr.verifiers.tail(r)
		if tail != "" {
			tail = "Its output ended with:\n" + indent(tail)
		}
		if len(vrec.Errors) > 0 {
			er := vrec.Errors[0]
			if er.Where == "verifier" {
				k.fail(StageRun, FaultYou, fmt.Sprintf("rank %d's outputs did not reach its verifier as the driver handed them over: %s", r, er.Msg),
					fmt.Sprintf("In this exercise a separate process, rank %d's verifier, checks what the rank's driver hands over; it found:\n  %s\nYour code must not write to the program's connections or file descriptors: the driver hands your outputs over.", r, er.Msg))
				return false
			}
			k.fail(StageRun, FaultRunner, fmt.Sprintf("rank %d's verifier failed: %s: %s", r, er.Call, er.Msg),
				fmt.Sprintf("Rank %d's verifier (the course's driver, without your code) stopped: %s failed at %s: %s\n%s", r, er.Call, where(er.File, er.Line), er.Msg, tail))
			return false
		}
		if vrec.Missing || !vrec.Done {
			k.fail(StageRun, FaultRunner, fmt.Sprintf("rank %d's verifier did not finish (exit status %d)", r, exit),
				fmt.Sprintf("Rank %d's verifier (the course's driver, without your code) ended without its done record (exit status %d; -1: killed after %s).\n%s", r, exit, verifierGrace, tail))
			return false
		}
		if got, sent := vrec.Handed, rr.records[r].Handed; got != sent {
			k.fail(StageRun, FaultYou, fmt.Sprintf("rank %d handed %d outputs to its verifier, which took %d", r, sent, got),
				fmt.Sprintf("Rank %d's driver handed %d outputs over, and its verifier read %d in the driver's order: something else wrote to the outputs connection. Your code must not write to the program's connections or file descriptors.", r, sent, got))
			return false
		}
		rr.records[r].Cases = vrec.Cases
	}
	return true
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}
