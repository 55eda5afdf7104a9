package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/confine"
)

const (
	defaultGrace    = 2 * time.Second
	defaultTeardown = 2 * time.Second
	defaultScan     = 200 * time.Millisecond
	// abandonAfter bounds the wait for processes that survive SIGKILL (uninterruptible sleep
	// in a driver); they are reported in Leftover.
	abandonAfter = 5 * time.Second
	// verifyFor bounds the wait for killed processes to vanish from the process table.
	verifyFor = 2 * time.Second
)

// Supervisor launches jobs. The zero value is ready to use; one Supervisor may run several
// jobs at once.
type Supervisor struct {
	// ScanInterval is how often the process table is read to find the processes a job's
	// processes start (default 200ms).
	ScanInterval time.Duration
}

// New returns a Supervisor with default settings.
func New() *Supervisor { return &Supervisor{} }

// proc is one process the supervisor started: a rank, or the launcher program.
type proc struct {
	rank    int // -1: the launcher program
	pid     int
	cmd     *exec.Cmd // nil for a rank forked from a warm interpreter
	sink    *sink
	out     *os.File // read end of its output pipe
	read    chan struct{}
	started time.Time
	ended   time.Time
	state   *os.ProcessState
	ws      syscall.WaitStatus // a forked rank's end, as its zygote reported it
	warm    bool               // forked from a warm interpreter (warm.go)
	lost    bool               // its zygote died before reporting its end
	exited  bool
	sent    bool // we have signalled it
	hung    bool // it was running when the job timed out
	killed  bool // it was running when the job was canceled or torn down
}

type exitEvent struct {
	p     *proc
	at    time.Time
	state *os.ProcessState
	ws    syscall.WaitStatus // forked ranks
	lost  bool
}

// job is one Launch in progress.
type job struct {
	spec     Spec
	procs    []*proc
	sinks    []*sink // per rank
	launcher *sink   // nil when the ranks are started directly
	wrapped  bool
	tag      func([]byte) (int, []byte, bool)
	fp       failureParser
	tr       *tracker
	exits    chan exitEvent
	rdzv     string
	begin    time.Time

	step                 *srunStep // the Slurm step of an Srun job
	timedOut, canceled   bool
	firstFailed          int
	running              map[int]bool // launcher jobs: ranks alive at a timeout or cancel
	warm                 int          // ranks forked from a warm interpreter
	confined, unconfined int          // processes started with and without Spec.Confine applied
	confineWhy           string
}

// Launch runs the job described by s and returns how every rank ended. The error is only for
// failures of the launcher itself (a program that cannot be started, a bad Spec); ranks that
// fail are reported in the Result.
func (sv *Supervisor) Launch(ctx context.Context, s Spec) (*Result, error) {
	if err := normalize(&s); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	j := &job{spec: s, firstFailed: -1, begin: time.Now()}
	j.rdzv = filepath.Join(s.RunDir, "rdzv")
	// A rendezvous directory left by an earlier run would hand out stale ids.
	if err := os.RemoveAll(j.rdzv); err != nil {
		return nil, fmt.Errorf("launch: clearing %s: %w", j.rdzv, err)
	}
	if err := os.MkdirAll(j.rdzv, 0o755); err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	defer os.RemoveAll(j.rdzv)

	if err := j.start(ctx); err != nil {
		j.abort()
		return nil, err
	}
	interval := sv.ScanInterval
	if interval <= 0 {
		interval = defaultScan
	}
	j.supervise(ctx, interval)
	res := j.result()
	for _, p := range j.procs {
		if p.lost {
			return res, ErrWarmLost
		}
	}
	return res, nil
}

func normalize(s *Spec) error {
	if len(s.Argv) == 0 {
		return errors.New("launch: empty Argv")
	}
	if s.RunDir == "" {
		return errors.New("launch: RunDir is required")
	}
	if st, err := os.Stat(s.RunDir); err != nil || !st.IsDir() {
		return fmt.Errorf("launch: run directory %s does not exist", s.RunDir)
	}
	switch s.Launcher {
	case Single:
		s.Ranks = 1
	case Local, Torchrun, MPIRun, Srun:
		if s.Ranks < 1 {
			return fmt.Errorf("launch: %s launcher needs Ranks >= 1, got %d", s.Launcher, s.Ranks)
		}
	default:
		return fmt.Errorf("launch: unknown launcher %q (want local, single, mpirun, torchrun or srun)", s.Launcher)
	}
	if s.Grace <= 0 {
		s.Grace = defaultGrace
	}
	if s.TeardownAfter <= 0 {
		s.TeardownAfter = defaultTeardown
	}
	if s.TailBytes <= 0 {
		s.TailBytes = defaultTailBytes
	}
	return nil
}

// rankBase is the environment every rank of s starts from, before the run's directories and
// its own rank variables, and the names of the spec's variables (jobVars).
func rankBase(s *Spec, wrapped bool) (*environ, []string) {
	base := newEnviron(os.Environ())
	jobVars := []string{"MGPU_RUN_DIR", "MGPU_RDZV_DIR"}
	if wrapped {
		for _, k := range rankVars {
			base.unset(k)
		}
	}
	// Python buffers a pipe's output in blocks: a rank killed mid-run would take its last
	// lines with it, and live output would come in bursts.
	if base.get("PYTHONUNBUFFERED") == "" {
		base.set("PYTHONUNBUFFERED", "1")
	}
	for _, kv := range newEnviron(s.Env).list() {
		k, v, _ := cutEnv(kv)
		base.set(k, v)
		jobVars = append(jobVars, k)
	}
	// Several ranks on one host each starting an OpenMP pool the size of the machine spin for
	// cores the other ranks hold (measured: docs/validation/cpu-warm-ranks.md). torchrun sets one
	// thread per rank unless told otherwise; ranks the supervisor starts itself get the same.
	if !wrapped && s.Ranks > 1 && base.get("OMP_NUM_THREADS") == "" {
		base.set("OMP_NUM_THREADS", "1")
	}
	return base, jobVars
}

// start builds the environments and starts the processes.
func (j *job) start(ctx context.Context) error {
	s := &j.spec
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("launch: finding a free port: %w", err)
	}
	j.sinks = make([]*sink, s.Ranks)
	for r := range j.sinks {
		j.sinks[r] = newSink(r, s.TailBytes, s.Output)
	}
	j.exits = make(chan exitEvent, s.Ranks+1)

	wrapped := s.Launcher == MPIRun || s.Launcher == Torchrun && s.UseTorchrun || s.Launcher == Srun
	base, jobVars := rankBase(s, wrapped)
	base.set("MGPU_RUN_DIR", s.RunDir)
	base.set("MGPU_RDZV_DIR", j.rdzv)
	base.force()
	for _, kv := range forcedEnv {
		jobVars = append(jobVars, kv[0])
	}

	if !wrapped {
		j.tr = newTracker("")
		envs := make([][]string, s.Ranks)
		for r := range envs {
			env := base.clone()
			env.setRank(r, s.Ranks, port)
			env.force()
			envs[r] = env.list()
		}
		warm := make([]bool, s.Ranks)
		if pool := warmFrom(ctx); pool != nil && warmEligible(s) {
			warm = j.startWarm(ctx, pool, base, envs)
		}
		for r, env := range envs {
			if warm[r] {
				continue
			}
			if err := j.spawn(r, s.Argv, env, j.sinks[r]); err != nil {
				return fmt.Errorf("launch: starting rank %d (%s): %w", r, s.Argv[0], err)
			}
		}
		return nil
	}

	j.wrapped = true
	j.launcher = newSink(-1, s.TailBytes, s.Output)
	var argv []string
	var rankVar string
	switch s.Launcher {
	case MPIRun:
		base.set("MASTER_ADDR", "127.0.0.1")
		base.set("MASTER_PORT", port)
		jobVars = append(jobVars, "MASTER_ADDR", "MASTER_PORT")
		argv, j.tag, rankVar, j.fp, err = mpiPlan(s, base, jobVars)
	case Srun:
		argv, err = j.srunStart(base, port)
		rankVar = "MGPU_RANK"
	default:
		argv, err = torchrunPlan(s, port, filepath.Join(j.rdzv, "torchrun-logs"))
		j.tag, rankVar, j.fp = torchrunTag, "RANK", &torchrunFailures{}
	}
	if err != nil {
		return err
	}
	base.force()
	j.tr = newTracker(rankVar)
	if j.step != nil {
		// The tasks are slurmstepd's children, not ours: they are found by the run's
		// rendezvous directory in their environment, which no other job shares.
		j.tr.adoptTagged("MGPU_RDZV_DIR", j.rdzv, j.step.learn)
	}
	if err := j.spawn(-1, argv, base.list(), j.launcher); err != nil {
		return fmt.Errorf("launch: starting %s: %w", argv[0], err)
	}
	return nil
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// spawn starts one process in a process group of its own with stdout and stderr on one pipe.
func (j *job) spawn(rank int, argv, env []string, sk *sink) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = j.spec.Dir
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second
	st, err := confine.Start(cmd, j.spec.Confine) // nil rules: a plain Start
	if err != nil {
		r.Close()
		w.Close()
		return err
	}
	if j.spec.Confine != nil {
		if st.Applied {
			j.confined++
		} else {
			j.unconfined++
			j.confineWhy = st.Why
		}
	}
	w.Close()
	p := &proc{rank: rank, pid: cmd.Process.Pid, cmd: cmd, sink: sk, out: r, read: make(chan struct{}), started: time.Now()}
	j.procs = append(j.procs, p)
	j.tr.add(p.pid)
	go func() {
		defer close(p.read)
		if j.wrapped {
			splitLines(r, j.demux)
		} else {
			splitLines(r, sk.line)
		}
	}()
	go func() {
		_ = cmd.Wait()
		j.exits <- exitEvent{p: p, at: time.Now(), state: cmd.ProcessState}
	}()
	return nil
}

// demux sends a launcher's line to the rank it is tagged with, or to the launcher's own sink.
func (j *job) demux(line []byte, cut int64) {
	if r, rest, ok := j.tag(line); ok && r >= 0 && r < len(j.sinks) {
		j.sinks[r].line(rest, cut)
		return
	}
	j.fp.line(string(line))
	j.launcher.line(line, cut)
}

// abort kills what start managed to start before it failed.
func (j *job) abort() {
	if j.tr == nil {
		return
	}
	j.tr.signal(syscall.SIGKILL)
	for range j.procs {
		ev := <-j.exits
		j.tr.reaped(ev.p.pid)
		ev.p.out.Close()
	}
	j.tr.signal(syscall.SIGKILL)
}

// supervise waits for the processes, tearing the job down on failure, timeout or cancel.
func (j *job) supervise(ctx context.Context, interval time.Duration) {
	s := &j.spec
	running := len(j.procs)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var timeout <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var killAt, abandonAt <-chan time.Time
	tearing := false
	done := ctx.Done()

	teardown := func(grace time.Duration, mark func(p *proc)) {
		tearing = true
		done, timeout = nil, nil
		for _, p := range j.procs {
			if !p.exited {
				mark(p)
				p.sent = true
			}
		}
		j.tr.signal(syscall.SIGTERM)
		killAt = time.After(grace)
	}

	for running > 0 {
		select {
		case ev := <-j.exits:
			running--
			p := ev.p
			p.exited, p.ended, p.state, p.ws, p.lost = true, ev.at, ev.state, ev.ws, ev.lost
			j.tr.reaped(p.pid)
			if !j.wrapped && s.OnRankExit != nil {
				s.OnRankExit(procResult(p))
			}
			if !j.wrapped && !tearing && failed(p) {
				if j.firstFailed < 0 {
					j.firstFailed = p.rank
				}
				if !s.KeepGoing {
					teardown(min(s.Grace, s.TeardownAfter/2), func(p *proc) { p.killed = true })
				}
			}
		case <-done:
			j.canceled = true
			j.markRunning()
			teardown(s.Grace, func(p *proc) { p.killed = true })
		case <-timeout:
			j.timedOut = true
			j.markRunning()
			teardown(s.Grace, func(p *proc) { p.hung = true })
		case <-killAt:
			killAt = nil
			j.tr.signal(syscall.SIGKILL)
			if j.step != nil {
				j.step.cancel()
			}
			abandonAt = time.After(abandonAfter)
		case <-abandonAt:
			running = 0 // processes that survive SIGKILL are reported as Leftover
		case <-tick.C:
			j.tr.scan()
		}
	}

	// Whatever the ranks left behind (children in their groups, daemons of the launcher)
	// goes too: the job is over.
	if left := j.tr.leftover(); len(left) > 0 {
		j.tr.signal(syscall.SIGKILL)
		if j.step != nil {
			j.step.cancel()
		}
	}
	j.drainOutput()
}

// markRunning records, for launcher jobs, which ranks were still running at a timeout or
// cancel.
func (j *job) markRunning() {
	if !j.wrapped {
		return
	}
	j.tr.scan()
	j.running = map[int]bool{}
	for r, k := range j.tr.ranks {
		if j.tr.alive(k) {
			j.running[r] = true
		}
	}
}

// failed reports whether a rank's end is a failure of its own (not one we caused).
func failed(p *proc) bool {
	if p.sent {
		return false
	}
	if p.lost {
		return true // its end is unknown: the job cannot be trusted to go on
	}
	ws, ok := p.waitStatus()
	if !ok {
		return !p.state.Success()
	}
	return ws.Signaled() || ws.Exited() && ws.ExitStatus() != 0
}

// waitStatus is how the process ended, from its wait (started here) or its zygote's report.
func (p *proc) waitStatus() (syscall.WaitStatus, bool) {
	if p.state == nil {
		return p.ws, true
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	return ws, ok
}

// drainOutput waits for the output readers; a pipe held open by a process that escaped is
// closed after a second so the readers end.
func (j *job) drainOutput() {
	deadline := time.After(time.Second)
	for _, p := range j.procs {
		select {
		case <-p.read:
		case <-deadline:
			deadline = nil
			for _, q := range j.procs {
				q.out.Close()
			}
			<-p.read
		}
	}
	for _, p := range j.procs {
		p.out.Close()
	}
}

// leftovers waits (briefly) until the job's groups are empty, then lists what remains.
func (j *job) leftovers() []int {
	stop := time.Now().Add(verifyFor)
	for {
		if j.tr.groupsGone() {
			if left := j.tr.leftover(); len(left) == 0 {
				return nil
			}
		}
		left := j.tr.leftover()
		if len(left) == 0 || time.Now().After(stop) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (j *job) result() *Result {
	res := &Result{
		TimedOut:    j.timedOut,
		Canceled:    j.canceled,
		FirstFailed: j.firstFailed,
		Ranks:       make([]RankResult, j.spec.Ranks),
	}
	if j.wrapped {
		lp := j.procs[0]
		lr := procResult(lp)
		res.Launcher = &lr
		if j.spec.Launcher == Srun {
			j.srunRanks(res, lp)
		} else {
			j.wrappedRanks(res, lp)
		}
	} else {
		for _, p := range j.procs {
			res.Ranks[p.rank] = procResult(p)
		}
	}
	res.Leftover = j.leftovers()
	res.Elapsed = time.Since(j.begin)
	res.Warm = j.warm
	res.Confined = j.spec.Confine != nil && j.confined > 0 && j.unconfined == 0
	res.ConfineWhy = j.confineWhy
	return res
}

// procResult describes how a process the supervisor started ended.
func procResult(p *proc) RankResult {
	rr := RankResult{Rank: p.rank, PID: p.pid, Started: p.started, Ended: p.ended, ExitCode: -1, Warm: p.warm}
	rr.Tail, rr.Dropped = p.sink.result()
	if p.lost {
		rr.State = StateUnknown // its zygote died before reporting how it ended
		return rr
	}
	if !p.exited {
		// It survived SIGKILL; it is in Leftover.
		rr.State = StateUnknown
		if p.hung {
			rr.State = StateHung
		} else if p.killed {
			rr.State = StateKilled
		}
		return rr
	}
	ws, _ := p.waitStatus()
	if ws.Signaled() {
		rr.Signal = signalName(ws.Signal())
	} else {
		rr.ExitCode = ws.ExitStatus()
	}
	switch {
	case p.hung:
		rr.State = StateHung
	case p.killed && !(ws.Exited() && ws.ExitStatus() == 0):
		rr.State = StateKilled
	case ws.Signaled():
		rr.State = StateSignaled
	case ws.ExitStatus() == 0:
		rr.State = StateDone
	default:
		rr.State = StateFailed
	}
	return rr
}

// wrappedRanks fills in the ranks of an mpirun or torchrun job from what can be told: the
// launcher's exit status, its report of the first failure, and the rank processes found in
// the process table.
func (j *job) wrappedRanks(res *Result, lp *proc) {
	ok := lp.exited && lp.state.Success() && !j.timedOut && !j.canceled
	fail, haveFail := j.fp.first()
	for r := range res.Ranks {
		rr := RankResult{Rank: r, State: StateUnknown, ExitCode: -1, Started: lp.started, Ended: lp.ended}
		rr.Tail, rr.Dropped = j.sinks[r].result()
		if k, found := j.tr.rankProcess(r); found {
			rr.PID = k.pid
		}
		switch {
		case ok:
			rr.State, rr.ExitCode = StateDone, 0
		case haveFail && fail.rank == r:
			if fail.signal != 0 {
				rr.State, rr.Signal = StateSignaled, signalName(fail.signal)
			} else {
				rr.State, rr.ExitCode = StateFailed, fail.code
			}
		case j.timedOut && j.running[r]:
			rr.State = StateHung
		case j.canceled && j.running[r]:
			rr.State = StateKilled
		}
		res.Ranks[r] = rr
	}
	if haveFail && fail.rank < len(res.Ranks) {
		res.FirstFailed = fail.rank
	}
}
