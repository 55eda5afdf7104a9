// Package checker turns a learner's code into a verdict: it builds the program, checks the
// learner's objects for forbidden calls, runs the ranks, reads the records the harness wrote
// and judges correctness and performance. docs/checker.md explains the stages to learners and
// course authors; docs/protocol.md is the contract with the harness.
package checker

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/build"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// Builder compiles a program (runtime/build provides one).
type Builder interface {
	Build(ctx context.Context, r build.Request) (*build.Result, error)
}

// Launcher runs the ranks of a program (runtime/launch provides one).
type Launcher interface {
	Launch(ctx context.Context, s launch.Spec) (*launch.Result, error)
}

// Environment is what the checker needs to know about this machine.
type Environment interface {
	// Unmet lists the requirements this machine does not meet, in words; empty means ok.
	Unmet(req course.Requirements, l course.Launch) []string
	Toolchain(cudaAwareMPI bool) *build.Toolchain
	GPUCount() int
	// Python is the interpreter for python exercises ("" = none).
	Python() string
	MPI(cudaAware bool) *launch.MPI
}

// Checker checks exercises. The zero values of the optional fields are sensible.
type Checker struct {
	Course *course.Course
	// Harness holds the csrc files: mgpu.h, mgpu_core.c, mgpu_cuda.cu, ...,
	// python/mgpu_harness.py.
	Harness  fs.FS
	Builder  Builder
	Launcher Launcher
	Env      Environment
	// WorkDir is scratch space: materialized sources (WorkDir/src) and the directories of the
	// last checks (WorkDir/runs; the last KeepRuns are kept).
	WorkDir string
	// Perf: judge performance. False skips the stage and the report says so (CPU machines, CI).
	Perf bool
	// Rebuild ignores build cache hits.
	Rebuild bool
	// MaxPerfRuns bounds the program runs a check may make to settle its timings (default 3).
	MaxPerfRuns int
	// Ranks overrides the manifest's rank count (0: the manifest's).
	Ranks int
	// CrossCheck: a python exercise that needs no GPU, checked with fewer than CrossRanks
	// ranks, is run again on the CPU with CrossRanks ranks when it got past correctness
	// (crosscheck.go). Not for variants.
	CrossCheck bool
	// CPUOnly runs the ranks as on a machine without GPUs, whatever this one has: the GPUs
	// hidden from them (CUDA_VISIBLE_DEVICES empty), only the cases marked cpu, performance
	// not judged. For exercises that need no GPU (gloo): `check`'s second run at another rank
	// count (internal/cli, "cross-check").
	CPUOnly bool
	// Torchrun, when set, is the torchrun program that starts the ranks of torchrun-launched
	// exercises; empty spawns them directly with the same environment (faster, docs/runtime.md).
	Torchrun string
	// KeepRuns is how many check directories WorkDir/runs keeps (default 20).
	KeepRuns int
	// Protect lists directories the programs of C and CUDA checks may not write beneath, but
	// for their own run directory: the build cache and WorkDir, whose programs and sources
	// later checks trust (runtime/confine, docs/protocol.md §4). Empty: no confinement.
	Protect []string
	// Events receives progress; may be nil. Calls for one check never overlap.
	Events func(Event)
}

// Target is what to check: the learner's files of an exercise, or the course's own.
type Target struct {
	Exercise *course.Exercise
	// Files maps each learner file name of the manifest to its path on disk.
	Files map[string]string
	// Label is "yours", "solution" or "variant:<name>".
	Label string
	// Root is the directory learner paths are shown relative to (the workspace); empty: the
	// current directory.
	Root string
}

func (k *check) emit(ev Event) {
	if k.c.Events == nil {
		return
	}
	k.evMu.Lock()
	defer k.evMu.Unlock()
	k.c.Events(ev)
}

// check is one check in progress.
type check struct {
	c     *Checker
	t     Target
	e     *course.Exercise
	rep   *Report
	dir   string // this check's directory under WorkDir/runs
	began map[string]time.Time
	evMu  sync.Mutex
	// watch is NCCL's watch for this check's run ("" when off; ncclwatch.go).
	watch string
}

func (c *Checker) newCheck(t Target, stages []string) *check {
	rep := &Report{
		Target:  t.Label,
		Started: time.Now(),
		Verdict: Passed,
	}
	if rep.Target == "" {
		rep.Target = "yours"
	}
	if e := t.Exercise; e != nil {
		rep.Exercise = e.ID
		rep.Title = e.Title
		if e.Module != nil {
			rep.Module = e.Module.ID
		}
	}
	for _, s := range stages {
		rep.Stages = append(rep.Stages, StageResult{Name: s, Status: StatusSkipped})
	}
	return &check{c: c, t: t, e: t.Exercise, rep: rep, began: map[string]time.Time{}}
}

func (k *check) stage(name string) *StageResult {
	for i := range k.rep.Stages {
		if k.rep.Stages[i].Name == name {
			return &k.rep.Stages[i]
		}
	}
	k.rep.Stages = append(k.rep.Stages, StageResult{Name: name, Status: StatusSkipped})
	return &k.rep.Stages[len(k.rep.Stages)-1]
}

func (k *check) start(name string) {
	k.began[name] = time.Now()
	k.emit(StageStarted{Exercise: k.rep.Exercise, Target: k.rep.Target, Stage: name})
}

// done ends a stage; durations add up over repeated runs.
func (k *check) done(name, status, detail string) {
	s := k.stage(name)
	var d time.Duration
	if t, ok := k.began[name]; ok {
		d = time.Since(t)
		delete(k.began, name)
	}
	s.Duration += Seconds(d)
	s.Status = status
	if detail != "" {
		s.Detail = detail
	}
	if status == StatusOK || k.rep.Verdict == Passed {
		k.rep.Stage = name
	}
	k.emit(StageDone{Exercise: k.rep.Exercise, Target: k.rep.Target, Stage: name, Status: status, Duration: d, Detail: s.Detail})
}

// fail ends the stage as failed and sets the verdict from whose fault it is.
func (k *check) fail(stage, fault, headline, message string) {
	status := StatusFailed
	switch fault {
	case FaultYou:
		k.rep.Verdict = Failed
	case FaultMachine:
		k.rep.Verdict = Refused
	default:
		k.rep.Verdict = Errored
		status = StatusError
	}
	k.rep.Fault = fault
	k.rep.Headline = headline
	k.rep.Message = strings.TrimRight(message, "\n")
	k.done(stage, status, headline)
	k.rep.Stage = stage
}

// inconclusive ends the stage without a verdict either way.
func (k *check) inconclusive(stage, headline, message string) {
	k.rep.Verdict = Inconclusive
	k.rep.Fault = ""
	k.rep.Headline = headline
	k.rep.Message = strings.TrimRight(message, "\n")
	k.done(stage, StatusInconclusive, headline)
	k.rep.Stage = stage
}

func (k *check) finish() *Report {
	k.rep.Duration = Seconds(time.Since(k.rep.Started))
	if k.rep.Verdict == Passed && k.rep.Headline == "" {
		k.rep.Headline = "passed"
	}
	return k.rep
}

// Check runs every stage on the target and returns the report; it never returns nil.
func (c *Checker) Check(ctx context.Context, t Target) *Report {
	return c.crossCheck(ctx, t, c.check(ctx, t))
}

func (c *Checker) check(ctx context.Context, t Target) *Report {
	k := c.newCheck(t, Stages)
	defer k.finish()
	if !k.validate() {
		return k.rep
	}
	if !k.environment(false) {
		return k.rep
	}
	prog := k.build(ctx)
	if prog == nil {
		return k.rep
	}
	if !k.policy(ctx, prog) {
		return k.rep
	}
	k.runAll(ctx, prog)
	return k.rep
}

// Build runs the environment (compiler only), build and policy stages.
func (c *Checker) Build(ctx context.Context, t Target) *Report {
	k := c.newCheck(t, []string{StageEnvironment, StageBuild, StagePolicy})
	defer k.finish()
	if !k.validate() {
		return k.rep
	}
	if !k.environment(true) {
		return k.rep
	}
	prog := k.build(ctx)
	if prog == nil {
		return k.rep
	}
	if k.policy(ctx, prog) {
		k.rep.Headline = "built"
	}
	return k.rep
}

// validate catches a checker or target that cannot work at all (the caller's bug).
func (k *check) validate() bool {
	var missing []string
	if k.e == nil {
		missing = append(missing, "the exercise")
	}
	if k.c.Env == nil {
		missing = append(missing, "the environment")
	}
	if k.c.WorkDir == "" {
		missing = append(missing, "a work directory")
	}
	if k.e != nil && k.e.Kind != "python" && k.c.Builder == nil {
		missing = append(missing, "a builder")
	}
	if k.c.Launcher == nil {
		missing = append(missing, "a launcher")
	}
	if k.c.Harness == nil {
		missing = append(missing, "the harness files")
	}
	if len(missing) == 0 && k.e != nil {
		for _, name := range k.e.Files {
			if k.t.Files[name] == "" {
				missing = append(missing, fmt.Sprintf("the path of learner file %s", name))
			}
		}
	}
	if len(missing) > 0 {
		k.start(StageEnvironment)
		k.fail(StageEnvironment, FaultRunner, "the checker was started without "+strings.Join(missing, ", "),
			"The checker was set up incompletely: "+strings.Join(missing, ", ")+" missing.")
		return false
	}
	return true
}

// environment refuses the check when this machine lacks what the exercise needs.
func (k *check) environment(buildOnly bool) bool {
	k.start(StageEnvironment)
	e := k.e
	var unmet []string
	if buildOnly {
		unmet = k.c.Env.Unmet(buildRequirements(e), course.Launch{})
	} else {
		// What running needs, plus what building needs: a cuda exercise without nvcc is
		// refused here, with the reason, rather than failing at the build stage.
		req := e.Requires
		req.Libs = dedupe(append(append([]string(nil), req.Libs...), buildRequirements(e).Libs...))
		unmet = k.c.Env.Unmet(req, e.Launch)
	}
	if e.Kind == "python" && k.c.Env.Python() == "" {
		unmet = append(unmet, "a Python interpreter")
	}
	// The launch needs the MPI itself, whatever the requirements say: a cuda_aware_mpi exercise
	// passes device pointers to MPI, and an MPI without CUDA support crashes on them, so
	// never fall back to the plain one. (The environment's reasons usually say so already.)
	if !buildOnly && e.Launch.Launcher == launch.MPIRun && k.c.Env.MPI(e.Launch.CudaAwareMPI) == nil && !mentionsMPI(unmet) {
		if e.Launch.CudaAwareMPI {
			unmet = append(unmet, "a CUDA-aware MPI to launch with mpirun, one whose MPIX_Query_cuda_support() returns 1 (Open MPI: `ompi_info --parsable --all` shows mpi_built_with_cuda_support:value:true); none was found, and the program passes device pointers to MPI, which crash an MPI without CUDA support"+
				" — set MGPU_CUDA_MPI_HOME or MPI_HOME to a CUDA-aware MPI's prefix, or put one first on PATH")
		} else {
			unmet = append(unmet, "an MPI installation with mpirun — install Open MPI (Debian/Ubuntu: apt install openmpi-bin libopenmpi-dev), or load your cluster's MPI module")
		}
	}
	unmet = dedupe(unmet)
	if len(unmet) > 0 {
		var b strings.Builder
		b.WriteString("This machine cannot run this exercise:\n")
		for _, u := range unmet {
			fmt.Fprintf(&b, "  - %s\n", u)
		}
		b.WriteString("Nothing was built or run. `mgpu-learn doctor` shows what this machine has.")
		short := make([]string, len(unmet))
		for i, u := range unmet {
			// The environment may add a fix after a dash; the headline keeps what is missing.
			short[i] = u
			for _, sep := range []string{" \u2014 ", " -- "} {
				if j := strings.Index(u, sep); j > 0 {
					short[i] = u[:j]
				}
			}
		}
		k.fail(StageEnvironment, FaultMachine, "cannot run here: "+strings.Join(short, "; "), b.String())
		return false
	}
	detail := ""
	if !buildOnly {
		detail = fmt.Sprintf("%d GPU(s)", k.c.Env.GPUCount())
	}
	k.done(StageEnvironment, StatusOK, detail)
	return true
}

// mentionsMPI reports whether a list of unmet requirements already names MPI.
func mentionsMPI(unmet []string) bool {
	for _, u := range unmet {
		if strings.Contains(u, "MPI") {
			return true
		}
	}
	return false
}

// buildRequirements are the requirements of compiling only: the compiler and the libraries
// whose headers the build needs.
func buildRequirements(e *course.Exercise) course.Requirements {
	var libs []string
	switch e.Kind {
	case "cuda":
		libs = append(libs, "nvcc")
	case "c":
		libs = append(libs, "cc")
	}
	for _, l := range e.Requires.Libs {
		switch l {
		case "nccl", "mpi", "nvshmem":
			libs = append(libs, l)
		}
	}
	return course.Requirements{Libs: dedupe(libs)}
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if x != "" && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
