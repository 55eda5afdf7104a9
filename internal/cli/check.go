package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
	"github.com/mgpu-learn/mgpu-learn/runtime/build"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// checkOptions are the flags of check and build.
type checkOptions struct {
	JSON     bool
	JUnit    string
	Solution bool
	Variant  string
	Rebuild  bool
	NoPerf   bool
	Ranks    int
	Verbose  bool
	Torchrun bool
	// ShareCode: this check's report to the class carries the learner's files (workshop.go).
	ShareCode bool
}

func newCheckCmd(app *App) *cobra.Command {
	var (
		o  checkOptions
		so slurmOptions
	)
	cmd := &cobra.Command{
		Use:   "check <exercise|module|all>",
		Short: "Build, run and verify exercises: build → policy → run → correctness → performance",
		Long: `check compiles your files with the exercise's driver, runs them on this machine's GPUs,
and checks the results and the timings. It stops at the first stage that fails and says
whose fault it is.

` + exitCodesHelp,
		Example: `  mgpu-learn check module0/peer-copy
  mgpu-learn check module3 --junit results.xml
  mgpu-learn check all --solution --json     # instructors: prove the reference solutions`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("ranks") && o.Ranks < 1 {
				return usageErrorf("--ranks %d: a check runs at least one rank", o.Ranks)
			}
			if handled, err := app.checkViaSlurm(cmd.Context(), cmd, args, so); handled {
				return err
			}
			return app.runChecks(cmd.Context(), args[0], o, false)
		},
	}
	addCheckFlags(cmd, &o, "check")
	addSlurmFlags(cmd, &so)
	cmd.Flags().BoolVar(&o.NoPerf, "no-perf", false, "skip the performance stage")
	cmd.Flags().IntVar(&o.Ranks, "ranks", 0, "run with `N` ranks instead of the exercise's default")
	cmd.Flags().BoolVar(&o.Torchrun, "torchrun", false, "start Python ranks with the torchrun program instead of spawning them directly (slower; see docs/runtime.md)")
	cmd.Flags().BoolVar(&o.ShareCode, "share-code", false, "in a workshop, send your files to the instructor with this check's report")
	return cmd
}

func newBuildCmd(app *App) *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "build <exercise|module|all>",
		Short: "Compile only (works on a machine without GPUs)",
		Example: `  mgpu-learn build module3/ring-allreduce
  mgpu-learn build all --solution`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.runChecks(cmd.Context(), args[0], o, true)
		},
	}
	addCheckFlags(cmd, &o, "build")
	return cmd
}

// addCheckFlags adds the flags check and build share; verb is the command's ("check", "build").
func addCheckFlags(cmd *cobra.Command, o *checkOptions, verb string) {
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the reports as JSON (docs/report-schema.md)")
	cmd.Flags().StringVar(&o.JUnit, "junit", "", "also write a JUnit XML report to `FILE` (for autograders)")
	cmd.Flags().BoolVar(&o.Solution, "solution", false, verb+" the course's reference solution instead of your files")
	cmd.Flags().StringVar(&o.Variant, "variant", "", verb+" the course's variant `NAME` (course authors)")
	cmd.Flags().BoolVar(&o.Rebuild, "rebuild", false, "ignore the build cache")
	cmd.Flags().BoolVarP(&o.Verbose, "verbose", "v", false, "show every stage's detail and the ranks' output")
}

// runChecks resolves the target, checks (or builds) each exercise, records progress and prints
// the reports. It returns an exitError with the combined exit code.
func (a *App) runChecks(ctx context.Context, arg string, o checkOptions, buildOnly bool) error {
	c, err := a.Course()
	if err != nil {
		return err
	}
	exs, err := c.Resolve(arg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if o.Variant != "" && len(exs) != 1 {
		return usageErrorf("--variant needs a single exercise")
	}
	var ws *workspace.Workspace
	if !o.Solution && o.Variant == "" {
		if ws, err = a.Workspace(true); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !buildOnly {
		var closeWarm func()
		ctx, closeWarm = a.withWarmRanks(ctx, len(exs) == 1)
		defer closeWarm()
	}

	ck, err := a.newChecker(ctx, !o.NoPerf && !buildOnly)
	if err != nil {
		return err
	}
	ck.Rebuild = o.Rebuild
	ck.Ranks = o.Ranks
	// A rank count of the learner's choosing is checked as chosen (course verify never
	// cross-checks either: it judges variants as their manifests declare).
	ck.CrossCheck = o.Ranks == 0 && o.Variant == ""
	if !buildOnly {
		for _, e := range exs {
			if err := a.checkRanks(e, o, ws != nil, ck.Env.GPUCount()); err != nil {
				return err
			}
		}
	}
	if o.Torchrun {
		if ck.Torchrun, err = a.torchrun(ctx); err != nil {
			return err
		}
	}
	if !o.JSON && !buildOnly {
		ck.Events = progressPrinter(a, o.Verbose)
	}

	var reports []*checker.Report
	for _, e := range exs {
		t, cleanup, err := a.target(e, ws, o, ck.WorkDir)
		if err != nil {
			return err
		}
		defer cleanup()
		if !o.JSON {
			fmt.Fprintf(a.Err, "%s %s (%s)...\n", map[bool]string{true: "Building", false: "Checking"}[buildOnly], e.ID, t.Label)
		}
		ck.Perf = a.perfFor(ctx, e, !o.NoPerf && !buildOnly)
		var r *checker.Report
		if buildOnly {
			r = ck.Build(ctx, t)
		} else {
			r = ck.Check(ctx, t)
			if ws != nil {
				a.recordAttempt(ws, e, r)
				a.postToClass(ws, e, r, o)
			}
		}
		reports = append(reports, r)
		if !o.JSON {
			if len(exs) > 1 && r.Verdict == checker.Refused && !o.Verbose {
				// A module or the course on a machine that cannot run much of it: one line
				// each ('mgpu-learn doctor' and -v have the details), not a page each.
				line := fmt.Sprintf("%-12s %s: %s", "REFUSED", e.ID, r.Headline)
				if w := 118; len([]rune(line)) > w {
					line = string([]rune(line)[:w-1]) + "…"
				}
				fmt.Fprintln(a.Out, line)
			} else {
				checker.WriteText(a.Out, []*checker.Report{r}, checker.TextOptions{Color: !a.plain(), Verbose: o.Verbose})
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	if o.JSON {
		if err := checker.WriteJSON(a.Out, reports); err != nil {
			return runnerErrorf("writing JSON: %v", err)
		}
	}
	if o.JUnit != "" {
		f, err := os.Create(o.JUnit)
		if err != nil {
			return runnerErrorf("--junit: %v", err)
		}
		werr := checker.WriteJUnit(f, reports)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return runnerErrorf("--junit %s: %v", o.JUnit, werr)
		}
	}
	if len(reports) > 1 && !o.JSON {
		summarize(a, reports)
		for _, r := range reports {
			if r.Verdict == checker.Refused && !o.Verbose {
				fmt.Fprintln(a.Out, "What this machine lacks, exercise by exercise: mgpu-learn doctor (or check -v for each refusal in full).")
				break
			}
		}
	}
	if ctx.Err() != nil {
		fmt.Fprintln(a.Err, "Interrupted: every rank was stopped.")
		return silentExit(ExitRunner)
	}
	return silentExit(checker.ExitCode(reports))
}

// checkRanks refuses a --ranks that would make the check meaningless. Fewer ranks than an
// exercise's minimum (two for every exercise whose ranks talk to each other, more where it
// needs more GPUs) communicate nothing: a one-rank all-reduce is a copy, and an untouched
// starter passes it. A check of the learner's files with too few ranks would be recorded as
// a pass (progress, a workshop's dashboard), so it is refused; the course's solution or a
// variant (course authors proving a driver on one GPU) only get a warning. On a machine
// without GPUs, more than 4 ranks per CPU core (at least 8) starve each other until the
// timeout, and the verdict would blame the learner's code for a hang.
func (a *App) checkRanks(e *course.Exercise, o checkOptions, learners bool, gpus int) error {
	if o.Ranks <= 0 || e.Launch.Launcher == "single" {
		return nil
	}
	if want := max(2, e.Requires.GPUs); o.Ranks < want {
		msg := fmt.Sprintf("%s: --ranks %d is too few: its ranks communicate, and with fewer than %d of them the check proves nothing (its default here is %d ranks)",
			e.ID, o.Ranks, want, ranksFor(e, 0, gpus))
		if learners {
			return usageErrorf("%s", msg)
		}
		fmt.Fprintf(a.Err, "warning: %s\n", msg)
	}
	if limit := max(8, 4*runtime.NumCPU()); gpus == 0 && o.Ranks > limit {
		return usageErrorf("%s: --ranks %d is more than this machine can run side by side (%d CPU cores, no GPU: at most %d ranks); they would starve each other until the timeout",
			e.ID, o.Ranks, runtime.NumCPU(), limit)
	}
	return nil
}

// target says which files a check uses: the learner's (workspace), the solution or a variant.
// The course's files are written into a directory of this invocation only (two checks of
// different variants at once, in two processes, must never read each other's files); cleanup
// removes it.
func (a *App) target(e *course.Exercise, ws *workspace.Workspace, o checkOptions, workDir string) (checker.Target, func(), error) {
	none := func() {}
	if o.Variant != "" || o.Solution {
		if o.Variant != "" && e.Variant(o.Variant) == nil {
			var names []string
			for _, v := range e.Variants {
				names = append(names, v.Name)
			}
			return checker.Target{}, none, usageErrorf("%s has no variant %q (it has: %s)", e.ID, o.Variant, strings.Join(names, ", "))
		}
		label := "solution"
		if o.Variant != "" {
			label = "variant-" + o.Variant
		}
		dir, err := targetDir(workDir, e.ID, label)
		if err != nil {
			return checker.Target{}, none, runnerErrorf("%v", err)
		}
		cleanup := func() { os.RemoveAll(dir) }
		var t checker.Target
		if o.Variant != "" {
			t, err = checker.VariantTarget(e, o.Variant, dir)
		} else {
			t, err = checker.SolutionTarget(e, dir)
		}
		if err != nil {
			cleanup()
			return t, none, runnerErrorf("%v", err)
		}
		return t, cleanup, nil
	}
	files := ws.Files(e)
	for _, p := range files {
		if _, err := os.Stat(p); err != nil {
			return checker.Target{}, none, usageErrorf("%s: your file %s is missing (restore the starter with 'mgpu-learn reset %s', or run 'mgpu-learn init' again)", e.ID, p, e.ID)
		}
	}
	return checker.Target{Exercise: e, Files: files, Label: "yours"}, none, nil
}

// targetDir makes a fresh directory for one check of the course's files of exercise id.
func targetDir(workDir, id, label string) (string, error) {
	root := filepath.Join(workDir, "targets")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(root, strings.ReplaceAll(id, "/", "-")+"-"+strings.ReplaceAll(label, ":", "-")+"-")
}

// torchrun is the path of the torchrun program that doctor found, for --torchrun.
func (a *App) torchrun(ctx context.Context) (string, error) {
	facts := a.Facts(ctx, false)
	if facts.Python == nil || facts.Python.Torchrun == "" {
		return "", &exitError{code: ExitUnsupported, err: fmt.Errorf("--torchrun: no torchrun program was found next to the Python that has torch (see 'mgpu-learn doctor')")}
	}
	return facts.Python.Torchrun, nil
}

// newChecker wires the checker to this machine's builder, launcher and facts.
func (a *App) newChecker(ctx context.Context, perf bool) (*checker.Checker, error) {
	c, err := a.Course()
	if err != nil {
		return nil, err
	}
	facts := a.Facts(ctx, false)
	cache, err := cacheDir()
	if err != nil {
		return nil, runnerErrorf("cache directory: %v", err)
	}
	b := build.NewBuilder(filepath.Join(cache, "build"))
	return &checker.Checker{
		Course:   c,
		Harness:  a.Harness(),
		Builder:  b,
		Launcher: launch.New(),
		Env:      machine{facts: facts},
		WorkDir:  filepath.Join(cache, "work"),
		Perf:     perf,
		// The programs and sources later checks trust: no learner program may write them.
		Protect: []string{cache},
	}, nil
}

// perfFor says whether the performance stage is judged for an exercise on this machine:
// GPU exercises only where there are GPUs (on CPU their timings mean nothing and the report
// says the stage was skipped); CPU exercises (kind c) time CPU work, so always.
func (a *App) perfFor(ctx context.Context, e *course.Exercise, want bool) bool {
	if !want {
		return false
	}
	return e.Kind == "c" || len(a.Facts(ctx, false).GPUs) > 0
}

func cacheDir() (string, error) {
	if d := os.Getenv("MGPU_LEARN_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "mgpu-learn"), nil
}

// machine adapts the probed facts to checker.Environment.
type machine struct{ facts *probe.Facts }

func (m machine) Unmet(req course.Requirements, l course.Launch) []string {
	return reasons(doctor.Unmet(m.facts, req, l))
}

// unmetExercise is doctor's full list for an exercise: its requirements plus what its kind
// and build need (nvcc, cc, Python, the libraries it links).
func (m machine) unmetExercise(e *course.Exercise) []string {
	return reasons(doctor.UnmetExercise(m.facts, &e.Manifest))
}

func reasons(rs []doctor.Reason) []string {
	var out []string
	for _, r := range rs {
		s := r.What
		if r.Fix != "" {
			s += " — " + r.Fix
		}
		out = append(out, s)
	}
	return out
}

func (m machine) Toolchain(cudaAwareMPI bool) *build.Toolchain {
	return m.facts.Toolchain(cudaAwareMPI)
}
func (m machine) GPUCount() int { return len(m.facts.GPUs) }

func (m machine) Python() string {
	if m.facts.Python == nil {
		return ""
	}
	return m.facts.Python.Path
}

func (m machine) MPI(cudaAware bool) *launch.MPI {
	mp := m.facts.MPI
	if cudaAware {
		mp = m.facts.CudaMPI
	}
	if mp == nil {
		return nil
	}
	return &launch.MPI{Mpirun: mp.Mpirun, Dialect: mp.Dialect, Home: mp.Home}
}

// recordAttempt saves the check in the workspace's progress (never fatal).
func (a *App) recordAttempt(ws *workspace.Workspace, e *course.Exercise, r *checker.Report) {
	if r.Verdict == "refused" {
		return
	}
	err := ws.UpdateProgress(func(p *workspace.Progress) error {
		ep := p.Exercise(e.ID)
		at := workspace.Attempt{
			Time: time.Now(), Target: "yours", Verdict: r.Verdict, Stage: r.Stage,
			Headline: headline(r), DurationMS: time.Duration(r.Duration).Milliseconds(),
			// Passed, but the speed target was never judged: correct, not passed.
			SpeedUnjudged: r.Verdict == checker.Passed && e.Perf != nil && r.Stage != checker.StagePerformance,
		}
		ep.Record(at)
		if r.Verdict == checker.Passed {
			for k, v := range at.Headline {
				ep.SetBest(k, v, higherIsBetter(k))
			}
		}
		p.LastExercise = e.ID
		return nil
	})
	if err != nil {
		fmt.Fprintf(a.Err, "warning: could not save progress: %v\n", err)
	}
}

func summarize(a *App, reports []*checker.Report) {
	counts := map[string]int{}
	for _, r := range reports {
		counts[r.Verdict]++
	}
	fmt.Fprintf(a.Out, "\n%d passed, %d failed", counts["passed"], counts["failed"])
	for _, k := range []string{"refused", "inconclusive", "error"} {
		if counts[k] > 0 {
			fmt.Fprintf(a.Out, ", %d %s", counts[k], k)
		}
	}
	fmt.Fprintln(a.Out)
}
