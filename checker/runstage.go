package checker

import (
	"github.com/mgpu-learn/mgpu-learn/runtime/confine"

	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// Defaults for the timing environment when the manifest leaves them out.
const (
	defaultMinReps  = 10
	defaultMaxReps  = 50
	defaultBudgetMS = 3000
	tailLines       = 15
)

// runResult is one run of the program: what the launcher said and what the ranks wrote.
type runResult struct {
	n       int
	dir     string
	seed    uint64
	res     *launch.Result
	records []*rankRecords
	// chans is what each rank's harness sent over the records channel; forgery lists every
	// sign that something other than the harness reported (docs/protocol.md §4).
	chans   map[int]*rankChannel
	forgery []string
	// The verifiers (exercises with `verifier: true`): their processes, what each sent over the
	// records channel, and those records parsed, by rank.
	verifiers *verifiers
	vchans    map[int]*rankChannel
	vrecords  []*rankRecords
}

// ranks is how many ranks to start.
func (k *check) ranks() (int, error) {
	e := k.e
	if e.Launch.Launcher == launch.Single {
		return 1, nil
	}
	if k.c.Ranks > 0 {
		return k.c.Ranks, nil
	}
	r := strings.TrimSpace(e.Launch.Ranks)
	if r == "" || r == "all" {
		return max(k.c.Env.GPUCount(), 0), nil
	}
	n, err := strconv.Atoi(r)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: launch.ranks %q is neither a positive number nor \"all\"", path.Join(e.Dir, "exercise.yaml"), r)
	}
	return n, nil
}

// cases are the correctness cases this machine runs: on a machine without GPUs, only those
// marked cpu: true when the manifest marks any.
func (k *check) cases() []course.Case {
	all := k.e.Cases
	if k.c.Env.GPUCount() > 0 && !k.c.CPUOnly {
		return all
	}
	marked := false
	for _, c := range all {
		if c.CPU != nil {
			marked = true
		}
	}
	if !marked {
		return all
	}
	var out []course.Case
	for _, c := range all {
		if c.CPU != nil && *c.CPU {
			out = append(out, c)
		}
	}
	return out
}

func casesValue(cs []course.Case) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Name + "=" + strconv.FormatInt(c.N, 10)
	}
	return strings.Join(parts, ";")
}

func (k *check) perfJudged() bool { return k.c.Perf && !k.c.CPUOnly && k.e.Perf != nil }

// runAll runs the program, checks the run and correctness, and judges the timings, re-running
// (bounded) while they are undecided.
func (k *check) runAll(ctx context.Context, prog *program) {
	nranks, err := k.ranks()
	if err != nil {
		k.start(StageRun)
		k.fail(StageRun, FaultRunner, "bad rank count", err.Error())
		return
	}
	if nranks == 0 {
		// "all" on a machine without GPUs: CPU exercises still need ranks.
		nranks = 2
	}
	maxRuns := k.c.MaxPerfRuns
	if maxRuns <= 0 {
		maxRuns = 3
	}
	var pool perfPool
	for n := 1; ; n++ {
		rr := k.runOnce(ctx, prog, nranks, n)
		if rr == nil || !k.checkRun(rr) || !k.correctness(rr) {
			return
		}
		if n == 1 {
			k.collectOutputs(rr)
		}
		if !k.perfJudged() {
			k.start(StagePerformance)
			why, note := "this exercise has no performance target", ""
			switch {
			case k.e.Perf == nil:
			case k.c.Env.GPUCount() == 0 || k.c.CPUOnly:
				why = "not judged: timings are judged only on a machine with GPUs"
				note = "Correct, but the speed was not judged: timings are judged only on a machine with GPUs."
			default:
				why = "not judged: performance was turned off (--no-perf)"
				note = "Correct, but the speed was not judged (--no-perf)."
			}
			k.done(StagePerformance, StatusSkipped, why)
			if note != "" {
				k.rep.Notes = append(k.rep.Notes, note)
			}
			k.rep.Stage = StageCorrectness
			k.rep.Headline = passedHeadline(k.rep.Cases, len(rr.records), k.e.Perf != nil)
			return
		}
		k.start(StagePerformance)
		if err := pool.add(rr.records); err != nil {
			k.fail(StagePerformance, FaultRunner, "the timing records are inconsistent", err.Error())
			return
		}
		d := judgePerf(k.e.Perf, &pool, n, maxRuns)
		k.rep.Perf = d.result
		switch d.action {
		case actionRerun:
			k.done(StagePerformance, StatusOK, fmt.Sprintf("run %d undecided: %s; running again", n, d.why))
			continue
		case actionPass:
			k.rep.Headline = d.headline
			k.done(StagePerformance, StatusOK, d.headline)
			if d.message != "" {
				k.rep.Message = d.message
			}
		case actionFail:
			k.fail(StagePerformance, FaultYou, d.headline, d.message)
		case actionError:
			k.fail(StagePerformance, FaultRunner, d.headline, d.message)
		case actionInconclusive:
			k.inconclusive(StagePerformance, d.headline, d.message)
		}
		return
	}
}

// runOnce launches the program; nil when the launch itself failed (reported).
func (k *check) runOnce(ctx context.Context, prog *program, nranks, n int) *runResult {
	k.start(StageRun)
	e := k.e
	base, err := k.checkDir()
	if err != nil {
		k.fail(StageRun, FaultRunner, "cannot create the run directory", err.Error())
		return nil
	}
	dir := filepath.Join(base, fmt.Sprintf("run-%d", n))
	if err := os.MkdirAll(filepath.Join(dir, "rdzv"), 0o755); err != nil {
		k.fail(StageRun, FaultRunner, "cannot create the run directory", err.Error())
		return nil
	}
	seed := freshSeed()
	split := e.Verifier && prog.verifier != nil
	srv, err := newRecordServer(nranks, seed, split)
	if err != nil {
		k.fail(StageRun, FaultRunner, "cannot open the records channel", err.Error())
		return nil
	}
	timeout := e.Timeout.Duration
	if timeout <= 0 {
		timeout = course.DefaultTimeout
	}
	spec := launch.Spec{
		Launcher:  e.Launch.Launcher,
		Ranks:     nranks,
		Argv:      prog.argv,
		Dir:       dir,
		Env:       append(k.runEnv(prog), srv.Env()),
		RunDir:    dir,
		Timeout:   timeout,
		KeepGoing: e.Launch.KeepGoing,
	}
	if spec.Launcher == "" {
		spec.Launcher = launch.Local
	}
	if spec.Launcher == launch.Torchrun && k.c.Torchrun != "" {
		spec.UseTorchrun, spec.Torchrun = true, k.c.Torchrun
	}
	// Native programs may not write the build cache or the course's sources (runtime/confine).
	if (e.Kind == "c" || e.Kind == "cuda") && len(k.c.Protect) > 0 {
		spec.Confine = &confine.Rules{Protect: k.c.Protect, Writable: []string{dir}}
	}
	// Inside a Slurm allocation the ranks start as a job step (docs/slurm.md).
	spec.Launcher = launch.SlurmLauncher(spec)
	if spec.Launcher == launch.MPIRun {
		spec.MPI = k.c.Env.MPI(e.Launch.CudaAwareMPI)
	}
	if k.c.Events != nil {
		spec.Output = func(rank int, line string) { k.emit(RankLine{Rank: rank, Line: line}) }
		spec.OnRankExit = func(rr launch.RankResult) {
			k.emit(RankState{Rank: rr.Rank, State: rr.State, Exit: rr.ExitCode, Signal: rr.Signal})
		}
	}
	// launchAll starts the verifiers (if any), then the ranks, and collects both channels;
	// false when the verifiers could not start (reported).
	var (
		vs            *verifiers
		res           *launch.Result
		lerr          error
		chans, vchans map[int]*rankChannel
		intrusions    []string
	)
	launchAll := func() bool {
		vs = nil
		if split {
			var err error
			if vs, err = k.startVerifiers(ctx, prog, &spec, nranks, dir, srv); err != nil {
				srv.finish(0)
				k.fail(StageRun, FaultRunner, "cannot start the verifiers", err.Error())
				return false
			}
		}
		res, lerr = k.c.Launcher.Launch(ctx, spec)
		if vs != nil {
			srv.ranksEnded()
			vs.wait(verifierGrace)
		}
		chans, vchans, intrusions = srv.finish(2 * time.Second)
		return true
	}
	k.emit(RunStarted{Ranks: nranks, Run: n, Dir: dir})
	if !launchAll() {
		return nil
	}
	if errors.Is(lerr, launch.ErrWarmLost) && ctx.Err() == nil {
		// The warm interpreter that forked the ranks died under them: how they ended is
		// unknown, so this run proves nothing. Run it again with fresh interpreters, a fresh
		// channel and fresh keys (docs/runtime.md).
		if srv, err = newRecordServer(nranks, seed, split); err != nil {
			k.fail(StageRun, FaultRunner, "cannot open the records channel", err.Error())
			return nil
		}
		spec.Env = append(slices.Clone(spec.Env[:len(spec.Env)-1]), srv.Env())
		spec.NoWarm = true
		if !launchAll() {
			return nil
		}
	}
	rr := &runResult{n: n, dir: dir, seed: seed, res: res, chans: chans, forgery: intrusions, verifiers: vs, vchans: vchans}
	k.summarizeRun(rr, spec, nranks)
	if lerr != nil || res == nil {
		if ctx.Err() != nil {
			k.fail(StageRun, FaultRunner, "canceled", "The run was canceled.")
			return nil
		}
		msg := "the launcher returned no result"
		if lerr != nil {
			msg = lerr.Error()
		}
		k.fail(StageRun, FaultRunner, "the program could not be started", "The launcher failed: "+msg)
		return nil
	}
	if res.Canceled {
		k.fail(StageRun, FaultRunner, "canceled", "The run was canceled before it finished.")
		return nil
	}
	return rr
}

func freshSeed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(time.Now().UnixNano())
	}
	return binary.LittleEndian.Uint64(b[:])
}

// runEnv is every rank's environment (docs/protocol.md §1) beyond what the launcher sets.
// The seed is not among them: it travels on the records channel only.
func (k *check) runEnv(prog *program) []string {
	e := k.e
	var env []string
	keys := make([]string, 0, len(e.Launch.Env))
	for key := range e.Launch.Env {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		env = append(env, key+"="+e.Launch.Env[key])
	}
	env = append(env, prog.env...)
	var names []string
	for _, lf := range prog.learner {
		names = append(names, path.Base(filepath.ToSlash(lf.Path)))
	}
	perf := "0"
	if k.perfJudged() {
		perf = "1"
	}
	if k.c.CPUOnly && k.c.Env.GPUCount() > 0 {
		env = append(env, "CUDA_VISIBLE_DEVICES=")
	}
	env = append(env,
		"MGPU_EXERCISE="+e.ID,
		"MGPU_CASES="+casesValue(k.cases()),
		"MGPU_PERF="+perf,
		"MGPU_LEARNER_FILES="+strings.Join(names, ","),
	)
	if e.Perf != nil {
		minReps, maxReps, budget := e.Perf.MinReps, e.Perf.MaxReps, e.Perf.BudgetMS
		if minReps <= 0 {
			minReps = defaultMinReps
		}
		if maxReps <= 0 {
			maxReps = max(defaultMaxReps, minReps)
		}
		if budget <= 0 {
			budget = defaultBudgetMS
		}
		env = append(env,
			"MGPU_PERF_CASES="+casesValue(e.Perf.Cases),
			"MGPU_PERF_MIN_REPS="+strconv.Itoa(minReps),
			"MGPU_PERF_MAX_REPS="+strconv.Itoa(maxReps),
			"MGPU_PERF_BUDGET_MS="+strconv.Itoa(budget),
		)
	}
	if prog.ncclWatch != "" {
		// NCCL's watch (ncclwatch.go): the harness opens it and NCCL loads the same file.
		env = append(env, "MGPU_NCCL_WATCH="+prog.ncclWatch, "NCCL_PROFILER_PLUGIN="+prog.ncclWatch)
	}
	if len(e.Forbid) > 0 && e.Kind == "python" {
		syms := make([]string, len(e.Forbid))
		for i, f := range e.Forbid {
			syms[i] = f.Symbol
		}
		env = append(env, "MGPU_FORBID="+strings.Join(syms, ","))
	}
	return env
}

// summarizeRun reads the records and fills the report's run summary.
func (k *check) summarizeRun(rr *runResult, spec launch.Spec, nranks int) {
	sum := &RunSummary{
		Launcher:    spec.Launcher,
		Runs:        rr.n,
		Timeout:     Seconds(spec.Timeout),
		FirstFailed: -1,
		Seed:        strconv.FormatUint(rr.seed, 10),
		Dir:         rr.dir,
	}
	k.rep.Run = sum
	res := rr.res
	if res != nil {
		sum.TimedOut = res.TimedOut
		sum.FirstFailed = res.FirstFailed
		sum.Elapsed = Seconds(res.Elapsed)
		sum.Leftover = res.Leftover
		if spec.Confine != nil {
			sum.Confined = res.Confined
			if !res.Confined && res.ConfineWhy != "" {
				k.rep.Notes = append(k.rep.Notes, "the program ran unconfined, able to write the build cache: "+res.ConfineWhy)
			}
		}
	}
	for r := 0; r < nranks; r++ {
		p := filepath.Join(rr.dir, fmt.Sprintf("rank-%d.jsonl", r))
		recs, err := k.channelRecords(rr, spec, r, p)
		rr.records = append(rr.records, recs)
		run := RankRun{Rank: r, State: launch.StateUnknown, Records: p, Device: -1, Done: recs.Done}
		if err != nil {
			run.Problems = append(run.Problems, err.Error())
		}
		if recs.Truncated {
			run.Problems = append(run.Problems, "its last record was cut off (the rank died while writing it)")
		}
		if recs.Start != nil {
			run.Device, run.GPU, run.PID, run.Harness = recs.Start.Device, recs.Start.GPU, recs.Start.PID, recs.Start.Harness
		}
		if res != nil {
			for _, rk := range res.Ranks {
				if rk.Rank == r {
					run.State, run.Exit, run.Signal = rk.State, rk.ExitCode, rk.Signal
					run.Tail, run.Dropped = lastLines(cleanOutput(rk.Tail), 50), rk.Dropped
					if !rk.Ended.IsZero() && !rk.Started.IsZero() {
						run.Elapsed = Seconds(rk.Ended.Sub(rk.Started))
					}
				}
			}
		}
		sum.Ranks = append(sum.Ranks, run)
		k.emit(RankState{Rank: r, State: run.State, Exit: run.Exit, Signal: run.Signal})
	}
	if rr.verifiers != nil {
		k.verifierRecords(rr, nranks)
	}
}

// checkRun decides the run stage: every rank exited 0 after its done record.
func (k *check) checkRun(rr *runResult) bool {
	sum := k.rep.Run
	res := rr.res
	if k.forgeryFailure(rr) {
		return false
	}
	// The result files themselves.
	for _, rank := range sum.Ranks {
		for _, p := range rank.Problems {
			if strings.Contains(p, "cut off") {
				continue
			}
			k.fail(StageRun, FaultRunner, "unreadable result file: "+p,
				"Rank "+strconv.Itoa(rank.Rank)+"'s result file breaks the record protocol (docs/protocol.md):\n  "+p)
			return false
		}
	}
	// A forbidden call caught by the Python harness.
	for _, recs := range rr.records {
		for _, er := range recs.Errors {
			if er.Where == "policy" {
				k.policyFromRecord(recs.Rank, er)
				return false
			}
		}
	}
	// The first error record, by the time its rank ended.
	order := k.failureOrder(rr)
	if sum.TimedOut || anyState(sum, launch.StateHung) {
		var hung []int
		for _, r := range sum.Ranks {
			if r.State == launch.StateHung || (r.State == launch.StateUnknown && !r.Done) {
				hung = append(hung, r.Rank)
			}
		}
		if len(hung) == 0 {
			for _, r := range sum.Ranks {
				if !r.Done {
					hung = append(hung, r.Rank)
				}
			}
		}
		if len(hung) == 0 {
			k.fail(StageRun, FaultRunner, "the run timed out after every rank finished",
				"Every rank wrote its done record but the job did not end before the timeout; the launcher could not tear it down in time.")
			return false
		}
		var b strings.Builder
		fmt.Fprintf(&b, "The run did not finish within %s: %s never finished.\n", fmtDuration(time.Duration(sum.Timeout)), rankList(hung))
		b.WriteString("A rank that never finishes is usually waiting for something that never comes: a collective that not every rank called (or called in a different order), a receive without its matching send, a barrier one rank skipped, or a missing ncclGroupStart/ncclGroupEnd around calls that must be issued together. An endless loop does the same.\n")
		for _, r := range hung {
			b.WriteString(tailFor(sum.Ranks[r]))
		}
		k.fail(StageRun, FaultYou, fmt.Sprintf("hung: %s never finished (timed out after %s)", rankList(hung), fmtDuration(time.Duration(sum.Timeout))), b.String())
		return false
	}
	for _, r := range order {
		recs := rr.records[r]
		if len(recs.Errors) == 0 {
			continue
		}
		er := recs.Errors[0]
		sum.Failure = &RankError{Rank: r, Where: er.Where, Call: er.Call, File: er.File, Line: er.Line, Code: er.Code, Msg: er.Msg}
		fault, whose := errorFault(er)
		loc := where(er.File, er.Line)
		call := er.Call
		if call == "" {
			call = "a checked call"
		}
		at := ""
		if loc != "" {
			at = " at " + loc
		}
		failed := call + " failed"
		if strings.HasPrefix(er.Msg, er.Call+":") {
			failed = "uncaught exception" // Python: the message starts with the exception's name
		}
		headline := fmt.Sprintf("rank %d: %s%s: %s", r, failed, at, er.Msg)
		var b strings.Builder
		fmt.Fprintf(&b, "Rank %d stopped: %s%s", r, failed, at)
		if er.Code != 0 {
			fmt.Fprintf(&b, " (code %d)", er.Code)
		}
		fmt.Fprintf(&b, ":\n  %s\n%s\n", er.Msg, whose)
		b.WriteString(tailFor(sum.Ranks[r]))
		k.fail(StageRun, fault, headline, b.String())
		return false
	}
	planned := k.plannedFault(rr)
	for _, r := range order {
		rank := sum.Ranks[r]
		recs := rr.records[r]
		if r == planned {
			continue
		}
		var headline, what string
		switch {
		case rank.State == launch.StateSignaled || (rank.Signal != "" && rank.State != launch.StateKilled):
			headline = fmt.Sprintf("crash: rank %d died of %s", r, rank.Signal)
			what = fmt.Sprintf("Rank %d was killed by %s%s.", r, rank.Signal, signalHint(rank.Signal))
		case rank.State == launch.StateFailed || (rank.State != launch.StateKilled && rank.Exit != 0):
			headline = fmt.Sprintf("rank %d exited with status %d", r, rank.Exit)
			what = fmt.Sprintf("Rank %d exited with status %d without reporting an error: something called exit() with a failure status, or the process aborted.", r, rank.Exit)
		case rank.State == launch.StateKilled:
			continue
		case recs.Missing:
			headline = fmt.Sprintf("crash: no done record: rank %d never started the harness", r)
			what = fmt.Sprintf("Rank %d exited without writing any record: it ended before the driver's mgpu_init, or could not start.", r)
		case !recs.Done:
			headline = fmt.Sprintf("crash: no done record from rank %d", r)
			what = fmt.Sprintf("Rank %d ended (status %d) without its done record: the program stopped before the driver finished. Something in the code called exit() or _exit(), or returned from a place it should not have.", r, rank.Exit)
		default:
			continue
		}
		var b strings.Builder
		b.WriteString(what + "\n")
		b.WriteString(tailFor(rank))
		k.fail(StageRun, FaultYou, headline, b.String())
		return false
	}
	// A rank torn down by the launcher with no other failure to explain it.
	for _, rank := range sum.Ranks {
		if !rank.Done && rank.Rank != planned {
			k.fail(StageRun, FaultRunner, fmt.Sprintf("rank %d was stopped by the launcher", rank.Rank),
				fmt.Sprintf("Rank %d was stopped (%s) although no rank failed.\n%s", rank.Rank, rank.State, tailFor(rank)))
			return false
		}
	}
	if rr.verifiers != nil && !k.checkVerifiers(rr) {
		return false
	}
	if !k.checkWatch(rr, k.watch) {
		return false
	}
	if len(res.Leftover) > 0 {
		k.rep.Notes = append(k.rep.Notes, fmt.Sprintf("processes left running after the job: %v", res.Leftover))
	}
	detail := fmt.Sprintf("%d rank(s), %s", len(sum.Ranks), fmtDuration(time.Duration(sum.Elapsed)))
	if res.Warm > 0 {
		detail = fmt.Sprintf("%d rank(s) from a warm interpreter, %s", len(sum.Ranks), fmtDuration(time.Duration(sum.Elapsed)))
		if res.Warm < len(sum.Ranks) {
			detail = fmt.Sprintf("%d rank(s), %d from a warm interpreter, %s", len(sum.Ranks), res.Warm, fmtDuration(time.Duration(sum.Elapsed)))
		}
	}
	if rr.n > 1 {
		detail = fmt.Sprintf("%d runs of %d rank(s)", rr.n, len(sum.Ranks))
	}
	if rr.verifiers != nil && rr.verifiers.Warm > 0 {
		detail += fmt.Sprintf("; %d verifier(s) from a warm interpreter", rr.verifiers.Warm)
	}
	k.done(StageRun, StatusOK, detail)
	return true
}

// failureOrder lists ranks by when they failed: the launcher's first failure first, then by
// end time.
func (k *check) failureOrder(rr *runResult) []int {
	n := len(rr.records)
	order := make([]int, n)
	ends := make([]time.Time, n)
	for i := range order {
		order[i] = i
	}
	if rr.res != nil {
		for _, rk := range rr.res.Ranks {
			if rk.Rank >= 0 && rk.Rank < n {
				ends[rk.Rank] = rk.Ended
			}
		}
	}
	first := -1
	if rr.res != nil {
		first = rr.res.FirstFailed
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if (a == first) != (b == first) {
			return a == first
		}
		ea, eb := ends[a], ends[b]
		if ea.IsZero() != eb.IsZero() {
			return !ea.IsZero()
		}
		return ea.Before(eb)
	})
	return order
}

func anyState(sum *RunSummary, state string) bool {
	for _, r := range sum.Ranks {
		if r.State == state {
			return true
		}
	}
	return false
}

// errorFault says whose fault an error record is, with a sentence for the learner.
func errorFault(er record) (string, string) {
	switch er.Where {
	case "learner":
		return FaultYou, "The failing call is in your code."
	case "driver":
		if learnerCausedError(er) {
			return FaultYou, "The error surfaced in the driver's call, but errors of this kind are left behind by an earlier kernel: most likely yours read or wrote out of bounds."
		}
		if why := gpuUnavailable(er); why != "" {
			return FaultMachine, why
		}
		return FaultRunner, ""
	default:
		if why := gpuUnavailable(er); why != "" {
			return FaultMachine, why
		}
		if strings.Contains(er.Msg, "did not arrive") {
			// A rendezvous timed out waiting for another rank: that rank crashed, hung, or took
			// another path through the code.
			return FaultYou, "Another rank never came to this rendezvous: it crashed, hung, or went down another path (a barrier or collective that not every rank reached)."
		}
		return FaultRunner, ""
	}
}

// gpuUnavailable explains a CUDA error of the harness or the driver that says the GPU could not
// be had at all: the machine's state, not the course and (where the learner's code made no call)
// not the learner. Seen on the course's machines: a GPU in exclusive-process mode held by
// another process, and an MPS server that had not yet let go of a killed client (run7 of
// docs/validation/nvidia-1gpu-2hosts). "" when the error is not one of these.
func gpuUnavailable(er record) string {
	m := strings.ToLower(er.Msg)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(m, w) {
				return true
			}
		}
		return false
	}
	switch {
	case er.Code == 46 || has("cudaerrordevicesunavailable", "busy or unavailable"):
		return "The GPU was busy or unavailable when this rank started: another process holds it in exclusive-process mode, or an MPS server is not taking new clients. `nvidia-smi` shows the GPU's compute mode and its processes; check again when they are gone. (If your code used a GPU other than its own rank's, that is the cause.)"
	case er.Code >= 805 && er.Code <= 810 || has("cudaerrormps", "mps client", "mps server"):
		return "CUDA's Multi-Process Service (MPS) refused this rank: its server is not ready, full, or still tearing down a client that was killed. Check again in a moment, or restart MPS (`echo quit | nvidia-cuda-mps-control`, then start it again)."
	case er.Code == 100 || er.Code == 35 || er.Code == 802 || er.Code == 803 ||
		has("cudaerrornodevice", "no cuda-capable device", "cudaerrorinsufficientdriver", "driver version is insufficient", "cudaerrorsystemnotready", "cudaerrorsystemdrivermismatch"):
		return "CUDA could not use a GPU on this machine at all (no device visible, or a driver that does not match): `mgpu-learn doctor --refresh` shows what this machine has."
	}
	return ""
}

// learnerCausedError: sticky CUDA errors a driver call reports after the learner's kernel ran.
func learnerCausedError(er record) bool {
	switch er.Code {
	case 700, 715, 716, 719: // illegal address, illegal instruction, misaligned address, launch failure
		return true
	}
	m := strings.ToLower(er.Msg)
	for _, s := range []string{"illegal memory access", "misaligned address", "unspecified launch failure", "illegal instruction"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func signalHint(sig string) string {
	switch sig {
	case "SIGSEGV":
		return " (a segmentation fault: a read or write through a bad pointer, often an index out of bounds or a device pointer used on the host)"
	case "SIGBUS":
		return " (a bus error: a misaligned or unmapped access)"
	case "SIGABRT":
		return " (an abort: an assertion failed, or the C library found corrupted memory)"
	case "SIGFPE":
		return " (an arithmetic error such as an integer division by zero)"
	case "SIGKILL":
		return " (killed from outside: perhaps out of memory)"
	}
	return ""
}

// tailFor is a rank's last output lines, indented, or "".
func tailFor(r RankRun) string {
	tail := strings.TrimRight(r.Tail, "\n")
	if tail == "" {
		return fmt.Sprintf("Rank %d printed nothing.\n", r.Rank)
	}
	lines := strings.Split(tail, "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Rank %d's last output:\n", r.Rank)
	for _, l := range lines {
		if len(l) > 300 {
			l = l[:297] + "..."
		}
		b.WriteString("  | " + l + "\n")
	}
	return b.String()
}

func rankList(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return "ranks " + strings.Join(s, ", ")
}

// policyFromRecord reports a forbidden call the Python harness caught.
func (k *check) policyFromRecord(rank int, er record) {
	why := ""
	sym := er.Call
	for _, f := range k.e.Forbid {
		if f.Symbol == er.Call || strings.HasSuffix(er.Call, "."+f.Symbol) || strings.HasSuffix(f.Symbol, "."+er.Call) {
			why, sym = f.Why, f.Symbol
		}
	}
	shown := er.File
	for _, p := range k.t.Files {
		if er.File != "" && (er.File == p || filepath.Base(er.File) == filepath.Base(p)) {
			shown = k.showPath(p)
		}
	}
	file := where(shown, er.Line)
	// The policy stage passed provisionally before the run; it is the failing stage now.
	k.done(StageRun, StatusOK, "stopped by the policy check")
	switch er.Call {
	case "harness recording", "harness integrity", "code integrity", "late call", "tensor attribute":
		// The harness's own run-time integrity checks (docs/protocol.md §4).
		k.rep.Policy = append(k.rep.Policy, Violation{Rule: ruleHarness, Symbol: er.Call, Found: er.Call, File: file, Why: er.Msg})
		at := ""
		if er.File != "" {
			at = " at " + file
		}
		k.fail(StagePolicy, FaultYou, fmt.Sprintf("%s: rank %d%s", er.Call, rank, at),
			fmt.Sprintf("The harness stopped rank %d%s: %s.\nThe check trusts only what the course's driver computes and records; write the functions the task asks for and nothing that reaches past them.", rank, at, er.Msg))
		return
	}
	k.rep.Policy = append(k.rep.Policy, Violation{Symbol: sym, Found: er.Call, File: file, Why: why})
	var b strings.Builder
	fmt.Fprintf(&b, "Your code calls %s (at %s, rank %d), which this exercise forbids", sym, file, rank)
	if why != "" {
		b.WriteString(": " + why)
	}
	b.WriteString(sentenceEnd(why) + "\n")
	if er.Msg != "" {
		b.WriteString(er.Msg + "\n")
	}
	k.fail(StagePolicy, FaultYou, fmt.Sprintf("forbidden call %s in %s", sym, file), b.String())
}

// correctness checks every case record and that every expected case was recorded.
func (k *check) correctness(rr *runResult) bool {
	k.start(StageCorrectness)
	var rows []CaseResult
	seen := map[string]map[int]bool{}
	var vacuous []string
	for _, recs := range rr.records {
		for _, c := range recs.Cases {
			// A record that says ok while counting wrong elements is not believed.
			ok := *c.OK && c.Bad == 0 && c.Unwritten == 0 && c.GuardHits == 0
			if ok && c.Checked <= 0 {
				vacuous = append(vacuous, fmt.Sprintf("%s on rank %d", c.Case, recs.Rank))
			}
			rows = append(rows, CaseResult{
				Case: c.Case, Rank: recs.Rank, OK: ok, N: c.N, Checked: c.Checked, Bad: c.Bad,
				Unwritten: c.Unwritten, GuardHits: c.GuardHits, MaxAbsErr: c.MaxAbsErr, MaxRelErr: c.MaxRelErr,
				First: c.First, Msg: c.Msg,
			})
			if seen[c.Case] == nil {
				seen[c.Case] = map[int]bool{}
			}
			seen[c.Case][recs.Rank] = true
		}
	}
	if k.e.Ordering == "system" && k.e.Kind == "python" {
		// Triton compiles during the run: its PTX is read now (ordering.go).
		if err := tritonOrdering(rr.dir, rows); err != nil {
			k.fail(StageCorrectness, FaultRunner, "the PTX Triton compiled could not be read", err.Error())
			return false
		}
	}
	var missing []string
	for _, c := range k.cases() {
		ranks := []int{0}
		if c.On == "" || c.On == "all" {
			ranks = ranks[:0]
			for r := range rr.records {
				ranks = append(ranks, r)
			}
		}
		for _, r := range ranks {
			if !seen[c.Name][r] {
				rows = append(rows, CaseResult{Case: c.Name, Rank: r, N: c.N, Missing: true, MaxAbsErr: 0, MaxRelErr: 0})
				missing = append(missing, fmt.Sprintf("%s on rank %d", c.Name, r))
			}
		}
	}
	order := map[string]int{}
	for i, c := range k.e.Cases {
		order[c.Name] = i
	}
	sort.SliceStable(rows, func(i, j int) bool {
		oi, iok := order[rows[i].Case]
		oj, jok := order[rows[j].Case]
		if iok != jok {
			return iok
		}
		if oi != oj {
			return oi < oj
		}
		if rows[i].Case != rows[j].Case {
			return rows[i].Case < rows[j].Case
		}
		return rows[i].Rank < rows[j].Rank
	})
	k.rep.Cases = rows
	var bad []CaseResult
	for _, r := range rows {
		if !r.OK && !r.Missing {
			bad = append(bad, r)
		}
	}
	if len(bad) > 0 {
		k.fail(StageCorrectness, FaultYou, correctnessHeadline(bad), correctnessMessage(bad, rows))
		return false
	}
	if len(vacuous) > 0 {
		k.fail(StageCorrectness, FaultRunner, "the driver checked nothing for "+strings.Join(vacuous, ", "),
			"The driver reported "+strings.Join(vacuous, ", ")+" as correct without checking a single element; a check that looks at nothing proves nothing. This is a bug in the course.")
		return false
	}
	if len(missing) > 0 {
		k.fail(StageCorrectness, FaultRunner, "the driver did not check "+strings.Join(missing, ", "),
			"Every rank finished, but the driver recorded no result for "+strings.Join(missing, ", ")+
				". The driver decides which cases it checks from MGPU_CASES; a case it skips is a bug in the course.")
		return false
	}
	if len(rows) == 0 {
		k.done(StageCorrectness, StatusOK, "no correctness cases")
		return true
	}
	k.done(StageCorrectness, StatusOK, fmt.Sprintf("%d case record(s) ok", len(rows)))
	return true
}

func correctnessHeadline(bad []CaseResult) string {
	b := bad[0]
	var what string
	switch wrong := b.Bad + b.Unwritten; {
	case wrong > 0 && b.Unwritten > 0:
		what = fmt.Sprintf("%d of %d checked elements wrong (%d unwritten)", wrong, b.Checked, b.Unwritten)
	case wrong > 0:
		what = fmt.Sprintf("%d of %d checked elements wrong", wrong, b.Checked)
	case b.GuardHits > 0:
		what = fmt.Sprintf("%d byte(s) written outside the output", b.GuardHits)
	case b.Checked > 0:
		what = fmt.Sprintf("failed a check of the driver (the %d checked elements were right)", b.Checked)
	default:
		what = "failed a check of the driver"
	}
	if wrong := b.Bad + b.Unwritten; wrong > 0 && b.GuardHits > 0 {
		what += fmt.Sprintf(", and %d byte(s) written outside the output", b.GuardHits)
	}
	more := ""
	if len(bad) > 1 {
		more = fmt.Sprintf(" (%d failing case records in all)", len(bad))
	}
	return fmt.Sprintf("wrong result: case %s (n=%d) on rank %d: %s%s", b.Case, b.N, b.Rank, what, more)
}

// Bounds on what the message repeats from the case records (the report has them all).
const (
	maxCasesShown      = 3
	maxMismatchesShown = 5
)

func correctnessMessage(bad, all []CaseResult) string {
	var b strings.Builder
	values := false // some record has wrong elements or guard hits, not only the driver's findings
	for _, r := range bad {
		values = values || r.Bad+r.Unwritten > 0 || r.GuardHits > 0
	}
	if values {
		b.WriteString("Your code computed a wrong result.\n")
	} else {
		b.WriteString("Your code's outputs were right where compared, but it failed the exercise's other checks.\n")
	}
	for i, r := range bad {
		if i == maxCasesShown {
			fmt.Fprintf(&b, "\n... and %d more failing case record(s): the table above lists them.\n", len(bad)-i)
			break
		}
		wrong := r.Bad + r.Unwritten
		if wrong == 0 && r.GuardHits == 0 {
			fmt.Fprintf(&b, "\nCase %s (n=%d), rank %d: failed a check of the driver", r.Case, r.N, r.Rank)
			if r.Checked > 0 {
				fmt.Fprintf(&b, " (the %d checked elements were right)", r.Checked)
			}
		} else {
			fmt.Fprintf(&b, "\nCase %s (n=%d), rank %d: %d of %d checked elements wrong", r.Case, r.N, r.Rank, wrong, r.Checked)
		}
		switch {
		case r.Unwritten > 0 && r.Unwritten == wrong:
			b.WriteString(", all of them never written (still poisoned)")
		case r.Unwritten > 0:
			fmt.Fprintf(&b, ", %d of them never written (still poisoned)", r.Unwritten)
		}
		if r.GuardHits > 0 {
			fmt.Fprintf(&b, "; %d byte(s) written outside the output buffer (guard band hits)", r.GuardHits)
		}
		b.WriteString(".\n")
		if r.Msg != "" {
			fmt.Fprintf(&b, "  %s\n", r.Msg)
		}
		if len(r.First) > 0 {
			b.WriteString("  first mismatches:\n")
			for j, m := range r.First {
				if j == maxMismatchesShown {
					break
				}
				fmt.Fprintf(&b, "    [%d] got %s, want %s\n", m.I, m.Got, m.Want)
			}
		}
	}
	// General hints, from the records the driver did not explain itself.
	var hints []string
	anyUnwritten, mostlyUnwritten, anyGuard, onlyOdd := false, false, false, true
	for _, r := range bad {
		// Odd sizes matter where elements are wrong; a failed check of the driver's own (no
		// element wrong, a message instead) says nothing about the size.
		onlyOdd = onlyOdd && r.N%2 == 1 && r.Bad+r.Unwritten > 0
		if r.Msg != "" {
			continue
		}
		if r.Unwritten > 0 && r.Unwritten*10 >= r.Checked*9 {
			mostlyUnwritten = true
		} else if r.Unwritten > 0 {
			anyUnwritten = true
		}
		anyGuard = anyGuard || r.GuardHits > 0
	}
	evenPassed := false
	for _, r := range all {
		evenPassed = evenPassed || (r.OK && r.N%2 == 0)
	}
	if onlyOdd && evenPassed {
		hints = append(hints, "Only odd sizes fail: look at what happens to the last element when n does not divide evenly.")
	}
	if mostlyUnwritten {
		hints = append(hints, "Almost nothing of the output was written: did your code do the work for this call at all (an early return, a skipped repeat call, work left on another stream)?")
	}
	if anyUnwritten {
		hints = append(hints, "Unwritten elements mean part of the output was never stored: look at loop bounds, the last partial chunk, and sizes that do not divide evenly.")
	}
	if anyGuard {
		hints = append(hints, "Guard-band hits mean your code wrote past the end (or before the start) of its output.")
	}
	if len(hints) > 0 {
		b.WriteString("\n" + strings.Join(hints, "\n") + "\n")
	}
	return b.String()
}

// collectOutputs keeps the values and notes the ranks wrote.
func (k *check) collectOutputs(rr *runResult) {
	k.rep.Values = nil
	notes := map[string][]int{}
	var order []string
	for _, recs := range rr.records {
		for _, v := range recs.Values {
			k.rep.Values = append(k.rep.Values, Value{Rank: recs.Rank, Name: v.Name, Value: *v.Value, Unit: v.Unit})
		}
		for _, n := range recs.Notes {
			if _, ok := notes[n]; !ok {
				order = append(order, n)
			}
			notes[n] = append(notes[n], recs.Rank)
		}
		for _, u := range recs.Unknown {
			k.rep.Notes = append(k.rep.Notes, fmt.Sprintf("rank %d wrote a record of unknown type %q (ignored)", recs.Rank, u))
		}
	}
	for _, n := range order {
		if len(notes[n]) == len(rr.records) {
			k.rep.Notes = append(k.rep.Notes, n)
		} else {
			k.rep.Notes = append(k.rep.Notes, fmt.Sprintf("%s: %s", rankList(notes[n]), n))
		}
	}
}

// lastLines keeps the last n lines of s.
func lastLines(s string, n int) string {
	t := strings.TrimRight(s, "\n")
	idx := len(t)
	for i := 0; i < n; i++ {
		j := strings.LastIndexByte(t[:idx], '\n')
		if j < 0 {
			return t
		}
		idx = j
	}
	return t[idx+1:]
}

func passedHeadline(rows []CaseResult, ranks int, perfSkipped bool) string {
	names := map[string]bool{}
	for _, r := range rows {
		names[r.Case] = true
	}
	h := fmt.Sprintf("passed: %d case(s) correct on %d rank(s)", len(names), ranks)
	if perfSkipped {
		h += "; performance not judged"
	}
	return h
}

// plannedFault is the rank that the exercise's fault plan kills on purpose (launch.keep_going
// with MGPU_FAULT=kill:rank=R:...), or -1. The rank counts as killed by the plan only when it
// died after writing the harness's "fault plan" note, so a real crash before that is still
// reported as one.
func (k *check) plannedFault(rr *runResult) int {
	e := k.t.Exercise
	if !e.Launch.KeepGoing {
		return -1
	}
	r := faultRank(e.Launch.Env["MGPU_FAULT"])
	if r < 0 || r >= len(rr.records) {
		return -1
	}
	for _, note := range rr.records[r].Notes {
		if strings.Contains(note, "fault plan") {
			k.rep.Notes = append(k.rep.Notes, fmt.Sprintf("rank %d was killed on purpose by the exercise's fault plan", r))
			return r
		}
	}
	return -1
}

// faultRank reads R from "kill:rank=R:after_ms=T".
func faultRank(plan string) int {
	for _, part := range strings.Split(plan, ":") {
		if v, ok := strings.CutPrefix(part, "rank="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}
