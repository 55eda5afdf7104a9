package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SlurmJob is the Slurm job this process runs in, as its environment describes it.
type SlurmJob struct {
	JobID  string `json:"job_id"`            // SLURM_JOB_ID
	StepID string `json:"step_id,omitempty"` // SLURM_STEP_ID: set inside a job step
	// Node is the Slurm node this process runs on (SLURMD_NODENAME, set in steps and batch
	// scripts); "" in an salloc shell, which runs where salloc was typed.
	Node      string   `json:"node,omitempty"`
	NodeList  string   `json:"nodelist,omitempty"` // SLURM_JOB_NODELIST as given
	Nodes     []string `json:"nodes,omitempty"`    // NodeList expanded ("n[1-2]" -> n1, n2)
	Partition string   `json:"partition,omitempty"`
	// CPUs and GPUs are what the job holds on this node (0 when unknown or none).
	CPUs int `json:"cpus"`
	GPUs int `json:"gpus"`
}

// SlurmFromEnv reads the Slurm job out of an environment (KEY=VALUE); nil when SLURM_JOB_ID is
// not set.
func SlurmFromEnv(env []string) *SlurmJob {
	e := newEnviron(env)
	id := e.get("SLURM_JOB_ID")
	if id == "" {
		id = e.get("SLURM_JOBID")
	}
	if id == "" {
		return nil
	}
	j := &SlurmJob{
		JobID:     id,
		StepID:    e.get("SLURM_STEP_ID"),
		Node:      e.get("SLURMD_NODENAME"),
		NodeList:  e.get("SLURM_JOB_NODELIST"),
		Partition: e.get("SLURM_JOB_PARTITION"),
	}
	if j.StepID == "" {
		j.StepID = e.get("SLURM_STEPID")
	}
	if j.NodeList == "" {
		j.NodeList = e.get("SLURM_NODELIST")
	}
	j.Nodes, _ = ExpandHostlist(j.NodeList)
	if n, err := strconv.Atoi(e.get("SLURM_CPUS_ON_NODE")); err == nil {
		j.CPUs = n
	} else {
		j.CPUs = cpusOnNode(e.get("SLURM_JOB_CPUS_PER_NODE"), j.nodeIndex(j.Node))
	}
	if n, err := strconv.Atoi(e.get("SLURM_GPUS_ON_NODE")); err == nil {
		j.GPUs = n
	} else {
		for _, k := range []string{"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"} {
			if v := strings.TrimSpace(e.get(k)); v != "" {
				j.GPUs = len(strings.Split(v, ","))
				break
			}
		}
	}
	return j
}

// nodeIndex is the position of node in the job's node list (0 when node is "" or unknown: an
// salloc shell on the first node).
func (j *SlurmJob) nodeIndex(node string) int {
	for i, n := range j.Nodes {
		if n == node {
			return i
		}
	}
	return 0
}

// cpusOnNode reads node i's count out of SLURM_JOB_CPUS_PER_NODE ("4", "2(x3),1"); 0 when
// it cannot.
func cpusOnNode(v string, i int) int {
	if v == "" {
		return 0
	}
	for _, part := range strings.Split(v, ",") {
		count, reps := part, 1
		if a, b, ok := strings.Cut(part, "(x"); ok {
			count = a
			r, err := strconv.Atoi(strings.TrimSuffix(b, ")"))
			if err != nil {
				return 0
			}
			reps = r
		}
		n, err := strconv.Atoi(count)
		if err != nil {
			return 0
		}
		if i < reps {
			return n
		}
		i -= reps
	}
	return 0
}

// ExpandHostlist expands a Slurm host list: "vm", "a,b", "gpu[01-03,07]", "r[1-2]n[1-2]".
func ExpandHostlist(list string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(list); i++ {
		if i < len(list) {
			switch list[i] {
			case '[':
				depth++
				continue
			case ']':
				depth--
				continue
			case ',':
				if depth > 0 {
					continue
				}
			default:
				continue
			}
		}
		if part := strings.TrimSpace(list[start:i]); part != "" {
			hosts, err := expandHost(part)
			if err != nil {
				return out, err
			}
			out = append(out, hosts...)
		}
		start = i + 1
	}
	if depth != 0 {
		return out, fmt.Errorf("host list %q: unbalanced brackets", list)
	}
	return out, nil
}

// expandHost expands the first bracket of one host expression and recurses on the rest.
func expandHost(h string) ([]string, error) {
	open := strings.IndexByte(h, '[')
	if open < 0 {
		return []string{h}, nil
	}
	closing := strings.IndexByte(h[open:], ']')
	if closing < 0 {
		return nil, fmt.Errorf("host list %q: unbalanced brackets", h)
	}
	closing += open
	prefix, ranges, rest := h[:open], h[open+1:closing], h[closing+1:]
	tails, err := expandHost(rest)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a || b-a > 100000 {
			return nil, fmt.Errorf("host list %q: bad range %q", h, r)
		}
		for n := a; n <= b; n++ {
			num := strconv.Itoa(n)
			if len(num) < len(lo) { // zero padding: gpu[01-10]
				num = strings.Repeat("0", len(lo)-len(num)) + num
			}
			for _, t := range tails {
				out = append(out, prefix+num+t)
			}
		}
	}
	return out, nil
}

// HereNode is the job's node that this process runs on: SLURMD_NODENAME inside a step or batch
// script, else the node named like this host (an salloc shell on an allocated node). The error
// says what to do when this host is none of the job's nodes.
func (j *SlurmJob) HereNode(host string) (string, error) {
	if j.Node != "" {
		return j.Node, nil
	}
	short, _, _ := strings.Cut(host, ".")
	for _, n := range j.Nodes {
		if n == host || n == short {
			return n, nil
		}
	}
	return "", fmt.Errorf("this shell belongs to Slurm job %s (nodes %s) but runs on %s, which is not one of them; "+
		"the ranks must run on the host where mgpu-learn runs (its records channel is a local socket). "+
		"Run mgpu-learn on the allocated node (srun --jobid=%s --overlap --pty mgpu-learn ..., or from the batch script), "+
		"use 'mgpu-learn check --slurm' from outside an allocation, or set MGPU_LEARN_SLURM=off to run the ranks here without Slurm",
		j.JobID, orDash(j.NodeList), orDash(host), j.JobID)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// SlurmDisabled reports whether MGPU_LEARN_SLURM turns the Slurm launcher off ("off", "0",
// "no", "false").
func SlurmDisabled(env []string) bool {
	switch strings.ToLower(strings.TrimSpace(newEnviron(env).get("MGPU_LEARN_SLURM"))) {
	case "off", "0", "no", "false":
		return true
	}
	return false
}

// SlurmLauncher is the launcher to use for s in this process's environment: Srun inside a
// Slurm allocation for the launches whose ranks the supervisor would start itself (local,
// single, torchrun spawned directly) when there is more than one rank, or when this host is
// not a node of the job (the srun launcher then refuses with the reason); s.Launcher
// otherwise, and always with MGPU_LEARN_SLURM=off.
func SlurmLauncher(s Spec) string {
	host, _ := os.Hostname()
	return slurmLauncher(s, os.Environ(), host)
}

func slurmLauncher(s Spec, env []string, host string) string {
	launcher := s.Launcher
	if launcher == "" {
		launcher = Local
	}
	direct := launcher == Local || launcher == Single || launcher == Torchrun && !s.UseTorchrun
	if !direct || SlurmDisabled(env) {
		return launcher
	}
	j := SlurmFromEnv(env)
	if j == nil {
		return launcher
	}
	if _, err := j.HereNode(host); err != nil {
		return Srun
	}
	if launcher == Single || s.Ranks <= 1 {
		return launcher // one process: it runs here, inside this step
	}
	return Srun
}

// srunShapeVars are srun's input variables that an enclosing srun, sbatch or salloc leaves in
// the environment and that would change the shape of the step: they are dropped from srun's
// environment (and so from the ranks'), and the flags say what the step is.
var srunShapeVars = []string{
	"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NNODES", "SLURM_NTASKS_PER_NODE", "SLURM_NTASKS_PER_CORE",
	"SLURM_NTASKS_PER_SOCKET", "SLURM_NTASKS_PER_GPU", "SLURM_CPUS_PER_TASK", "SRUN_CPUS_PER_TASK",
	"SLURM_CPUS_PER_GPU", "SLURM_CPU_BIND", "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_LIST",
	"SLURM_CPU_BIND_VERBOSE", "SLURM_DISTRIBUTION", "SLURM_DIST_PLANESIZE", "SLURM_GPUS",
	"SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_SOCKET", "SLURM_GPUS_PER_TASK", "SLURM_GPU_BIND",
	"SLURM_GRES", "SLURM_STEP_GRES", "SLURM_TRES_PER_TASK", "SLURM_MEM_PER_CPU", "SLURM_MEM_PER_GPU",
	"SLURM_MEM_PER_NODE", "SLURM_MEM_BIND", "SLURM_MEM_BIND_TYPE", "SLURM_MEM_BIND_LIST",
	"SLURM_MEM_BIND_VERBOSE", "SLURM_MEM_BIND_PREFER", "SLURM_HINT", "SLURM_THREADS_PER_CORE",
	"SLURM_OVERCOMMIT", "SLURM_OVERLAP", "SLURM_EXCLUSIVE", "SLURM_EXACT", "SLURM_SPREAD_JOB",
	"SLURM_EXPORT_ENV", "SRUN_EXPORT_ENV", "SLURM_LABELIO", "SLURM_UNBUFFEREDIO",
	"SLURM_KILL_BAD_EXIT", "SLURM_NO_KILL", "SLURM_WAIT", "SLURM_OPEN_MODE", "SLURM_STDINMODE",
	"SLURM_STDOUTMODE", "SLURM_STDERRMODE", "SLURM_REMOTE_CWD", "SLURM_WORKING_DIR",
	"SLURM_TIMELIMIT", "SLURM_IMMEDIATE", "SLURM_DISABLE_STATUS", "SLURM_TEST_EXEC",
}

// srunStepName names the job steps this launcher creates (squeue -s shows it).
const srunStepName = "mgpu-learn"

// rankScript runs as each task: it sets the protocol's rank variables from Slurm's (srun
// cannot set a variable per task) and becomes the program ($0 and its arguments), so the
// task's process is the rank's own.
func rankScript(world int) string {
	w := strconv.Itoa(world)
	return `: "${SLURM_PROCID:?not started by srun}"; ` +
		`export MGPU_RANK="$SLURM_PROCID" MGPU_WORLD_SIZE=` + w +
		` MGPU_LOCAL_RANK="$SLURM_LOCALID" MGPU_LOCAL_WORLD_SIZE=` + w +
		` RANK="$SLURM_PROCID" WORLD_SIZE=` + w + ` LOCAL_RANK="$SLURM_LOCALID" LOCAL_WORLD_SIZE=` + w +
		` GROUP_RANK=0 ROLE_RANK="$SLURM_PROCID"; exec "$0" "$@"`
}

// srunPlan builds the srun command line for s: one step of s.Ranks tasks on this node (node),
// sharing the job's resources with the step mgpu-learn may itself run in (--overlap).
//
//   - No per-task GPU binding: every rank sees every GPU of the step, as with the local
//     launcher, and picks local_rank % count; GPUs bound one per task could not reach each
//     other's memory (peer access, CUDA IPC, NCCL's P2P transport). The step gets the job's
//     GPUs on the node (srun's default); --gpu-bind=none keeps a site's default binding off.
//   - CPUs: the job's CPUs on the node shared out, --overcommit when there are more ranks than
//     CPUs, no CPU binding (like mpirun --bind-to none).
//   - Output is line-buffered by srun (no --unbuffered: it would cut a line written in two
//     pieces into two labelled lines) and labelled "N: " (--label).
func srunPlan(s *Spec, job *SlurmJob, node string) ([]string, error) {
	bin := s.Srun
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("srun"); err != nil {
			return nil, fmt.Errorf("launch: inside Slurm job %s but srun is not on PATH: %w", job.JobID, err)
		}
	}
	n := s.Ranks
	kill := "1"
	if s.KeepGoing {
		kill = "0"
	}
	argv := []string{bin,
		"--ntasks=" + strconv.Itoa(n),
		"--ntasks-per-node=" + strconv.Itoa(n),
		"--nodes=1",
		"--nodelist=" + node,
		"--overlap",
		"--kill-on-bad-exit=" + kill,
		"--label",
		"--export=ALL",
		"--cpu-bind=none",
		"--job-name=" + srunStepName,
	}
	if s.Dir != "" {
		argv = append(argv, "--chdir="+s.Dir)
	}
	if job.CPUs >= n {
		argv = append(argv, "--cpus-per-task="+strconv.Itoa(job.CPUs/n))
	} else {
		argv = append(argv, "--cpus-per-task=1", "--overcommit")
	}
	if job.GPUs > 0 {
		argv = append(argv, "--gpu-bind=none")
	}
	argv = append(argv, "/bin/sh", "-c", rankScript(n))
	return append(argv, s.Argv...), nil
}

// srunStart prepares an Srun job: srun's environment (base) and command line.
func (j *job) srunStart(base *environ, port string) ([]string, error) {
	s := &j.spec
	sj := SlurmFromEnv(base.list())
	if sj == nil {
		return nil, errNotInSlurm
	}
	host, _ := os.Hostname()
	node, err := sj.HereNode(host)
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	base.set("MASTER_ADDR", "127.0.0.1")
	base.set("MASTER_PORT", port)
	for _, k := range srunShapeVars {
		base.unset(k)
	}
	argv, err := srunPlan(s, sj, node)
	if err != nil {
		return nil, err
	}
	j.tag, j.fp = srunTag, &srunFailures{}
	j.step = &srunStep{}
	return argv, nil
}

// srunLabel is srun --label's prefix: the task number, padded to the width of the largest.
var srunLabel = regexp.MustCompile(`^ *(\d+): `)

// srunStepd is a message of slurmstepd that srun labels with a task ("*** STEP 12.0 ON vm
// CANCELLED ... ***"); it is the launcher's, not the rank's.
var srunStepd = regexp.MustCompile(`^slurmstepd(-\S+)?: `)

func srunTag(line []byte) (int, []byte, bool) {
	m := srunLabel.FindSubmatchIndex(line)
	if m == nil {
		return 0, nil, false
	}
	r, err := strconv.Atoi(string(line[m[2]:m[3]]))
	if err != nil {
		return 0, nil, false
	}
	rest := line[m[1]:]
	if srunStepd.Match(rest) {
		return 0, nil, false
	}
	return r, rest, true
}

// srun's report of tasks that ended badly (it says nothing of tasks that exit 0):
//
//	srun: error: vm: task 1: Exited with exit code 3
//	srun: error: vm: tasks 0-1: Killed
//	srun: error: vm: task 0: Segmentation fault (core dumped)
var srunTaskEnd = regexp.MustCompile(`^srun: error: \S+: tasks? ([0-9,\-]+): (.+)$`)

var srunExit = regexp.MustCompile(`^Exited with exit code (\d+)`)

// strsignal's words, as srun prints them.
var srunSignals = map[string]syscall.Signal{
	"Hangup": syscall.SIGHUP, "Interrupt": syscall.SIGINT, "Quit": syscall.SIGQUIT,
	"Illegal instruction": syscall.SIGILL, "Trace/breakpoint trap": syscall.SIGTRAP,
	"Aborted": syscall.SIGABRT, "Bus error": syscall.SIGBUS, "Floating point exception": syscall.SIGFPE,
	"Killed": syscall.SIGKILL, "User defined signal 1": syscall.SIGUSR1,
	"Segmentation fault": syscall.SIGSEGV, "User defined signal 2": syscall.SIGUSR2,
	"Broken pipe": syscall.SIGPIPE, "Alarm clock": syscall.SIGALRM, "Terminated": syscall.SIGTERM,
	"CPU time limit exceeded": syscall.SIGXCPU, "File size limit exceeded": syscall.SIGXFSZ,
	"Bad system call": syscall.SIGSYS, "Out Of Memory": syscall.SIGKILL,
}

// srunFailures collects srun's reports of task ends, in order.
type srunFailures struct {
	mu   sync.Mutex
	ends []rankEnd
}

func (p *srunFailures) line(s string) {
	m := srunTaskEnd.FindStringSubmatch(s)
	if m == nil {
		return
	}
	end := rankEnd{code: -1}
	what := strings.TrimSuffix(m[2], " (core dumped)")
	if e := srunExit.FindStringSubmatch(what); e != nil {
		end.code, _ = strconv.Atoi(e[1])
	} else if sig, ok := srunSignals[what]; ok {
		end.signal = sig
	} else {
		return
	}
	ranks, err := taskRanks(m[1])
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range ranks {
		e := end
		e.rank = r
		p.ends = append(p.ends, e)
	}
}

// first is the first task that failed of its own accord: one that exited non-zero or died of a
// signal other than those srun uses to end the others (SIGTERM, SIGKILL); failing that, the
// first reported end.
func (p *srunFailures) first() (rankEnd, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.ends {
		if e.signal == 0 || e.signal != syscall.SIGTERM && e.signal != syscall.SIGKILL {
			return e, true
		}
	}
	if len(p.ends) > 0 {
		return p.ends[0], true
	}
	return rankEnd{}, false
}

// of is what srun said about rank r's end.
func (p *srunFailures) of(r int) (rankEnd, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.ends {
		if e.rank == r {
			return e, true
		}
	}
	return rankEnd{}, false
}

// taskRanks reads srun's task list: "1", "0-3", "0,2-3".
func taskRanks(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a || b-a > 1<<16 {
			return nil, fmt.Errorf("bad task list %q", s)
		}
		for r := a; r <= b; r++ {
			out = append(out, r)
		}
	}
	return out, nil
}

// srunRanks fills in the ranks of an srun job: all done when srun exits 0; otherwise from
// srun's reports of task ends (the first task that failed of its own accord is FirstFailed;
// tasks it then ended are killed) and, at a timeout or cancel, from the rank processes found
// alive. A task srun says nothing about exited 0 or was never reached: unknown.
func (j *job) srunRanks(res *Result, lp *proc) {
	ok := lp.exited && lp.state.Success() && !j.timedOut && !j.canceled
	fp := j.fp.(*srunFailures)
	first, haveFirst := fp.first()
	if j.timedOut || j.canceled {
		// Ends srun reports after our signals are ours; a crash before them still counts.
		haveFirst = haveFirst && first.signal != syscall.SIGTERM && first.signal != syscall.SIGKILL
	}
	for r := range res.Ranks {
		rr := RankResult{Rank: r, State: StateUnknown, ExitCode: -1, Started: lp.started, Ended: lp.ended}
		rr.Tail, rr.Dropped = j.sinks[r].result()
		if k, found := j.tr.rankProcess(r); found {
			rr.PID = k.pid
		}
		end, said := fp.of(r)
		if said {
			if end.signal != 0 {
				rr.Signal = signalName(end.signal)
			} else {
				rr.ExitCode = end.code
			}
		}
		switch {
		case ok:
			rr.State, rr.ExitCode, rr.Signal = StateDone, 0, ""
		case haveFirst && first.rank == r:
			rr.State, rr.ExitCode, rr.Signal = StateFailed, first.code, ""
			if first.signal != 0 {
				rr.State, rr.ExitCode, rr.Signal = StateSignaled, -1, signalName(first.signal)
			}
		case j.timedOut && (j.running[r] || said):
			rr.State = StateHung
		case j.canceled && (j.running[r] || said):
			rr.State = StateKilled
		case said && (end.signal == syscall.SIGTERM || end.signal == syscall.SIGKILL):
			rr.State = StateKilled
		case said && end.signal != 0:
			rr.State = StateSignaled
		case said && end.code != 0:
			rr.State = StateFailed
		}
		res.Ranks[r] = rr
	}
	if haveFirst && first.rank < len(res.Ranks) {
		res.FirstFailed = first.rank
	}
}

// srunStep is the step an srun launch created, learned from its rank processes' environment
// (SLURM_JOB_ID, SLURM_STEP_ID), for scancel.
type srunStep struct {
	mu           sync.Mutex
	job, step    string
	scancel      string
	cancelIssued bool
}

// cancel asks Slurm to send SIGKILL to every task of the step, in the background (bounded).
// It is the second line behind our own signals: it reaches tasks the process table did not
// show us, and srun forwards nothing once it is killed.
func (st *srunStep) cancel() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cancelIssued || st.job == "" || st.step == "" {
		return
	}
	st.cancelIssued = true
	bin := st.scancel
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("scancel"); err != nil {
			return
		}
	}
	id := st.job + "." + st.step
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = exec.CommandContext(ctx, bin, "--signal=KILL", id).Run()
	}()
}

// learn records the step of a rank process from its environment.
func (st *srunStep) learn(env []byte) {
	job, ok1 := envValue(env, "SLURM_JOB_ID")
	step, ok2 := envValue(env, "SLURM_STEP_ID")
	if !ok1 || !ok2 {
		return
	}
	st.mu.Lock()
	if st.job == "" {
		st.job, st.step = job, step
	}
	st.mu.Unlock()
}

// errNotInSlurm is the srun launcher's refusal outside an allocation.
var errNotInSlurm = errors.New("launch: the srun launcher needs a Slurm allocation (SLURM_JOB_ID is not set)")
