package cli

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
)

func newCourseCmd(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "course",
		Short: "Tools for course authors and instructors",
	}
	cmd.AddCommand(newLintCmd(app), newVerifyCmd(app))
	return cmd
}

func newLintCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "lint [DIR]",
		Short: "Validate a course: manifests, lessons, files (every problem as file:line)",
		Long: `lint loads a course directory (default: the built-in course) and reports every problem
it finds — unknown keys, missing files, duplicate ids, lessons pointing at missing exercises —
each as file:line. To prove that starters fail and solutions pass on this machine's GPUs, use
'mgpu-learn course verify'.`,
		Example: `  mgpu-learn course lint ./my-course
  mgpu-learn course lint            # the built-in course`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				app.CourseDir = args[0]
			}
			c, err := app.Course()
			if err != nil {
				return err
			}
			n := 0
			for _, m := range c.Modules {
				n += len(m.Exercises)
			}
			fmt.Fprintf(app.Out, "%s: %d modules, %d exercises, no problems found.\n", c.Title, len(c.Modules), n)
			return nil
		},
	}
}

// verifyOptions are the flags of course verify.
type verifyOptions struct {
	ReportDir string
	Machine   string
	JSON      bool
	NoPerf    bool
	Ranks     int
	// Beyond: only what a run with this many ranks cannot show (the solutions, and the
	// variants whose min_ranks is above it); 0 verifies everything.
	Beyond int
	// RaceRuns: how many times a variant marked race runs; each run must end as expected.
	RaceRuns int
}

func newVerifyCmd(app *App) *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [exercise|module|all]...",
		Short: "Prove the course on this machine: solutions pass, starters and variants fail as stated",
		Long: `verify runs, for every exercise this machine can run: the reference solution (must pass),
the pristine starter (must fail at the stage its manifest names, never with a runner error),
and every variant (must end as its manifest says, with the stated words in the report).
Exercises this machine can't run are listed as skipped with doctor's reason. With
--report-dir it writes <machine>.md and <machine>.json there.

--beyond N is for a second run with more ranks after a whole run with N: it verifies only
what that run could not show, the reference solutions (which must pass on any number of
ranks) and the variants whose min_ranks is above N.

A variant marked race (a missing fence, a signal raised too early) fails only when the race
goes its way, which the driver provokes but cannot force: it runs --race-runs times (3 by
default) and must end as expected every time.`,
		Example: `  mgpu-learn course verify
  mgpu-learn course verify module0 --report-dir docs/validation --machine nvidia-h200-x4
  mgpu-learn course verify module1 --ranks 2 && mgpu-learn course verify module1 --ranks 4 --beyond 2`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"all"}
			}
			if o.Beyond < 0 || o.Beyond > 0 && o.Ranks <= o.Beyond {
				return usageErrorf("--beyond %d needs --ranks above it (the run that shows more)", o.Beyond)
			}
			if o.RaceRuns < 1 {
				return usageErrorf("--race-runs %d: a race variant runs at least once", o.RaceRuns)
			}
			return app.verify(cmd.Context(), args, o)
		},
	}
	cmd.Flags().StringVar(&o.ReportDir, "report-dir", "", "write <machine>.md and <machine>.json into `DIR`")
	cmd.Flags().StringVar(&o.Machine, "machine", "", "machine `NAME` for the report (default: the host name)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the JSON report to stdout")
	cmd.Flags().BoolVar(&o.NoPerf, "no-perf", false, "skip performance stages")
	cmd.Flags().IntVar(&o.Ranks, "ranks", 0, "run every exercise with `N` ranks instead of its default")
	cmd.Flags().IntVar(&o.Beyond, "beyond", 0, "after a whole run with `N` ranks: only the solutions and the variants that need more than N")
	cmd.Flags().IntVar(&o.RaceRuns, "race-runs", 3, "run each variant marked race `N` times; every run must end as expected")
	return cmd
}

// verifyRun is one check the verification made.
type verifyRun struct {
	Exercise string          `json:"exercise"`
	Target   string          `json:"target"` // solution, starter, variant:<name>
	Expect   string          `json:"expect"` // pass, or the stage it must fail at
	Verdict  string          `json:"verdict"`
	Stage    string          `json:"stage"`
	OK       bool            `json:"ok"`
	Problem  string          `json:"problem,omitempty"`
	Headline string          `json:"headline"`
	Figures  *verifyFigures  `json:"figures,omitempty"`
	WallS    float64         `json:"wall_s"`
	Report   *checker.Report `json:"-"`
}

type verifyFigures struct {
	Metric   string  `json:"metric"`
	Yours    float64 `json:"yours"`
	Baseline float64 `json:"baseline"`
	Ratio    float64 `json:"ratio"`
	CILow    float64 `json:"ci_low"`
	CIHigh   float64 `json:"ci_high"`
	Target   float64 `json:"target"`
	Unit     string  `json:"unit"`
}

type verifySkip struct {
	Exercise string   `json:"exercise"`
	Why      []string `json:"why"`
}

type verifyReport struct {
	Schema   int          `json:"schema"`
	Machine  string       `json:"machine"`
	Date     string       `json:"date"`
	Version  string       `json:"version"`
	Doctor   []string     `json:"doctor"`
	Runs     []verifyRun  `json:"runs"`
	Skipped  []verifySkip `json:"skipped"`
	Leftover []string     `json:"leftover"`
	WallS    float64      `json:"wall_s"`
	Passed   int          `json:"passed"`
	Failed   int          `json:"failed"`
}

func (a *App) verify(ctx context.Context, args []string, o verifyOptions) error {
	start := time.Now()
	c, err := a.Course()
	if err != nil {
		return err
	}
	var exs []*course.Exercise
	seen := map[string]bool{}
	for _, arg := range args {
		some, err := c.Resolve(arg)
		if err != nil {
			return usageErrorf("%v", err)
		}
		for _, e := range some {
			if !seen[e.ID] {
				seen[e.ID] = true
				exs = append(exs, e)
			}
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	session := markSession() // before anything is started: every child inherits it
	ctx, closeWarm := a.withWarmRanks(ctx, false)
	defer closeWarm()
	ck, err := a.newChecker(ctx, !o.NoPerf)
	if err != nil {
		return err
	}
	ck.Ranks = o.Ranks
	facts := a.Facts(ctx, false)
	rep := &verifyReport{Schema: 1, Machine: o.Machine, Date: start.UTC().Format("2006-01-02"), Version: Version}
	if rep.Machine == "" {
		rep.Machine, _ = os.Hostname()
	}
	rep.Doctor = doctorSummary(doctor.Build(facts, c))
	gpus := len(facts.GPUs) > 0

	for _, e := range exs {
		if why := (machine{facts: facts}).unmetExercise(e); len(why) > 0 {
			rep.Skipped = append(rep.Skipped, verifySkip{Exercise: e.ID, Why: why})
			fmt.Fprintf(a.Err, "skip  %s: %s\n", e.ID, strings.Join(why, "; "))
			continue
		}
		type job struct {
			label, expect string
			words         []string
			hangs         bool
			mk            func(dir string) (checker.Target, error)
		}
		jobs := []job{{label: "solution", expect: "pass", mk: func(dir string) (checker.Target, error) { return checker.SolutionTarget(e, dir) }}}
		ck.Perf = a.perfFor(ctx, e, !o.NoPerf)
		if o.Beyond > 0 {
			fmt.Fprintf(a.Err, "skip  %s starter: shown by the run with %d ranks (--beyond)\n", e.ID, o.Beyond)
		} else if why := perfSkip(e.Starter.FailsAt, false, ck.Perf, o.NoPerf); why != "" {
			fmt.Fprintf(a.Err, "skip  %s starter: %s\n", e.ID, why)
		} else {
			jobs = append(jobs, job{label: "starter", expect: e.Starter.FailsAt, hangs: e.Starter.Hangs,
				mk: func(dir string) (checker.Target, error) { return starterTarget(e, dir) }})
		}
		if o.Beyond > 0 {
			shown := 0
			for _, v := range e.Variants {
				if v.MinRanks <= o.Beyond {
					shown++
				}
			}
			if shown > 0 {
				fmt.Fprintf(a.Err, "skip  %s %d variant(s): shown by the run with %d ranks (--beyond)\n", e.ID, shown, o.Beyond)
			}
		}
		for _, v := range e.Variants {
			if o.Beyond > 0 && v.MinRanks <= o.Beyond {
				continue // shown by the run with o.Beyond ranks; counted in the line above
			}
			if v.GPU && !gpus {
				fmt.Fprintf(a.Err, "skip  %s variant %s: its bug shows on GPUs only, and this machine has none\n", e.ID, v.Name)
				continue
			}
			if v.MinRanks > 0 && ranksFor(e, o.Ranks, len(facts.GPUs)) < v.MinRanks {
				fmt.Fprintf(a.Err, "skip  %s variant %s: needs %d ranks, this run has %d\n", e.ID, v.Name, v.MinRanks, ranksFor(e, o.Ranks, len(facts.GPUs)))
				continue
			}
			if why := perfSkip(v.Expect, v.Timed, ck.Perf, o.NoPerf); why != "" {
				fmt.Fprintf(a.Err, "skip  %s variant %s: %s\n", e.ID, v.Name, why)
				continue
			}
			v := v
			runs := 1
			if v.Race {
				runs = o.RaceRuns
			}
			for i := 1; i <= runs; i++ {
				label := "variant:" + v.Name
				if runs > 1 {
					label += fmt.Sprintf("#%d", i) // a race is caught only if every run catches it
				}
				jobs = append(jobs, job{label: label, expect: v.Expect, words: v.Message,
					mk: func(dir string) (checker.Target, error) { return checker.VariantTarget(e, v.Name, dir) }})
			}
		}
		for _, j := range jobs {
			if ctx.Err() != nil {
				break
			}
			t0 := time.Now()
			dir, err := targetDir(ck.WorkDir, e.ID, j.label)
			if err != nil {
				return runnerErrorf("%s %s: %v", e.ID, j.label, err)
			}
			t, err := j.mk(dir)
			if err != nil {
				os.RemoveAll(dir)
				return runnerErrorf("%s %s: %v", e.ID, j.label, err)
			}
			r := ck.Check(ctx, t)
			os.RemoveAll(dir)
			run := verifyRun{Exercise: e.ID, Target: j.label, Expect: j.expect, Verdict: r.Verdict, Stage: r.Stage,
				Headline: r.Headline, WallS: time.Since(t0).Seconds(), Report: r, Figures: figures(r)}
			run.OK, run.Problem = judge(r, j.expect, j.words, j.hangs)
			rep.Runs = append(rep.Runs, run)
			status := "ok  "
			if run.OK {
				rep.Passed++
			} else {
				rep.Failed++
				status = "FAIL"
			}
			fmt.Fprintf(a.Err, "%s  %-32s %-24s expect %-12s got %s at %s (%.1fs)%s\n", status, e.ID, j.label, j.expect, r.Verdict, r.Stage, run.WallS, problemSuffix(run.Problem))
		}
		if o.ReportDir != "" {
			// Written after every exercise, so a run cut short still leaves its findings.
			rep.WallS = time.Since(start).Seconds()
			_ = writeVerifyReport(o.ReportDir, rep)
		}
	}
	rep.Leftover = leftovers(ck.WorkDir, session)
	rep.WallS = time.Since(start).Seconds()
	if o.ReportDir != "" {
		if err := writeVerifyReport(o.ReportDir, rep); err != nil {
			return runnerErrorf("writing the report: %v", err)
		}
	}
	if o.JSON {
		if err := writeJSON(a.Out, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.Out, "%d passed, %d failed\n", rep.Passed, rep.Failed)
	}
	switch {
	case ctx.Err() != nil:
		return silentExit(ExitRunner)
	case len(rep.Leftover) > 0:
		fmt.Fprintf(a.Err, "left behind: %s\n", strings.Join(rep.Leftover, "; "))
		return silentExit(ExitRunner)
	case rep.Failed > 0:
		return silentExit(ExitFailed)
	}
	return nil
}

func problemSuffix(p string) string {
	if p == "" {
		return ""
	}
	return "\n      " + p
}

// judge decides whether a check ended as the manifest expects.
func judge(r *checker.Report, expect string, words []string, hangs bool) (bool, string) {
	if expect == "pass" || expect == "" {
		if r.Verdict == "passed" {
			return true, ""
		}
		return false, fmt.Sprintf("expected to pass: %s", r.Headline)
	}
	if r.Verdict == "error" {
		return false, "a runner error is never an acceptable failure: " + r.Headline
	}
	if r.Verdict != "failed" {
		return false, fmt.Sprintf("expected to fail at %s, got %s: %s", expect, r.Verdict, r.Headline)
	}
	if r.Stage != expect {
		return false, fmt.Sprintf("expected to fail at %s, failed at %s: %s", expect, r.Stage, r.Headline)
	}
	text := strings.ToLower(r.Headline + "\n" + r.Message)
	if hangs && !strings.Contains(text, "hung") && !strings.Contains(text, "timed out") {
		return false, "expected a hang to be reported: " + r.Headline
	}
	for _, w := range words {
		if !strings.Contains(text, strings.ToLower(w)) {
			return false, fmt.Sprintf("report lacks %q: %s", w, r.Headline)
		}
	}
	return true, ""
}

// starterTarget materializes an exercise's pristine starter files into dir.
func starterTarget(e *course.Exercise, dir string) (checker.Target, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return checker.Target{}, err
	}
	files := map[string]string{}
	for _, f := range e.Files {
		b, err := fs.ReadFile(e.FS(), e.StarterPath(f))
		if err != nil {
			return checker.Target{}, err
		}
		p := filepath.Join(dir, f)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return checker.Target{}, err
		}
		files[f] = p
	}
	return checker.Target{Exercise: e, Files: files, Label: "starter"}, nil
}

// ranksFor is how many ranks a check of e starts: the --ranks override, the manifest's
// number, or for "all" one per GPU (two on a machine without GPUs, as the checker does).
func ranksFor(e *course.Exercise, override, gpus int) int {
	if override > 0 {
		return override
	}
	if e.Launch.Launcher == "single" {
		return 1
	}
	if n, err := strconv.Atoi(e.Launch.Ranks); err == nil {
		return n
	}
	if gpus > 0 {
		return gpus
	}
	return 2
}

// perfSkip says why a starter or variant that must fail at the performance stage, or whose
// mistake only the check after timing finds (timed), is not run: with the stage off it can only
// pass (it is correct by design, or the driver does not time), which would read as a failure of
// the course. "" when it runs.
func perfSkip(expect string, timed, perf, noPerf bool) string {
	if perf || expect != "performance" && !timed {
		return ""
	}
	what := "it fails at the performance stage"
	if expect != "performance" {
		what = "its mistake shows only when the driver times it"
	}
	if noPerf {
		return what + ", which --no-perf turns off"
	}
	return what + ", which is not judged on this machine (no GPU)"
}
