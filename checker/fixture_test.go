package checker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/build"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// The fixture tests run the whole pipeline — the real builder (cc), the real launcher, the
// real C harness core — over testdata/fixture-course: every solution must pass, every
// starter and variant must end as its manifest says, with the words it lists.

// cpuEnv is a machine without GPUs that has a C compiler.
type cpuEnv struct{ cc string }

func (e *cpuEnv) Unmet(req course.Requirements, _ course.Launch) []string {
	var out []string
	if req.GPUs > 0 {
		out = append(out, fmt.Sprintf("%d GPU(s) (this machine has none)", req.GPUs))
	}
	for _, l := range req.Libs {
		if l != "cc" || e.cc == "" {
			out = append(out, l)
		}
	}
	return out
}
func (e *cpuEnv) Toolchain(bool) *build.Toolchain { return &build.Toolchain{CC: e.cc, Version: "test"} }
func (e *cpuEnv) GPUCount() int                   { return 0 }
func (e *cpuEnv) Python() string                  { return "" }
func (e *cpuEnv) MPI(bool) *launch.MPI            { return nil }

var fixture struct {
	once    sync.Once
	course  *course.Course
	checker *Checker
	dir     string
	err     error
}

func fixtureChecker(t testing.TB) (*course.Course, *Checker) {
	t.Helper()
	fixture.once.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			fixture.err = fmt.Errorf("no C compiler (cc) on PATH: %v", err)
			return
		}
		if _, err := exec.LookPath("nm"); err != nil {
			fixture.err = fmt.Errorf("no nm on PATH: %v", err)
			return
		}
		c, err := course.Load(os.DirFS("../testdata/fixture-course"))
		if err != nil {
			fixture.err = fmt.Errorf("the fixture course does not load:\n%v", err)
			return
		}
		dir, err := os.MkdirTemp("", "mgpu-checker-fixtures-")
		if err != nil {
			fixture.err = err
			return
		}
		fixture.dir = dir
		fixture.course = c
		fixture.checker = &Checker{
			Course:   c,
			Harness:  os.DirFS("../csrc"),
			Builder:  build.NewBuilder(filepath.Join(dir, "cache")),
			Launcher: launch.New(),
			Env:      &cpuEnv{cc: cc},
			WorkDir:  filepath.Join(dir, "work"),
			Perf:     true, // the fixture timings are CPU timings
			KeepRuns: 100,
		}
	})
	if fixture.err != nil {
		if strings.Contains(fixture.err.Error(), "does not load") {
			t.Fatal(fixture.err)
		}
		t.Skip(fixture.err)
	}
	return fixture.course, fixture.checker
}

func TestMain(m *testing.M) {
	code := m.Run()
	if fixture.dir != "" && code == 0 {
		os.RemoveAll(fixture.dir)
	}
	os.Exit(code)
}

// fixtureJob is one target of the fixture course and how it must end.
type fixtureJob struct {
	e      *course.Exercise
	name   string // "solution", "starter", "variant:<v>"
	expect string // "pass" or a stage
	words  []string
}

func fixtureJobs(c *course.Course, exercise string) []fixtureJob {
	e := c.Exercise(exercise)
	jobs := []fixtureJob{
		{e: e, name: "solution", expect: "pass"},
		{e: e, name: "starter", expect: e.Starter.FailsAt},
	}
	for _, v := range e.Variants {
		jobs = append(jobs, fixtureJob{e: e, name: "variant:" + v.Name, expect: v.Expect, words: v.Message})
	}
	return jobs
}

func runFixture(t *testing.T, ck *Checker, j fixtureJob) *Report {
	t.Helper()
	dir := t.TempDir()
	var tg Target
	var err error
	switch {
	case j.name == "solution":
		tg, err = SolutionTarget(j.e, dir)
	case j.name == "starter":
		tg, err = StarterTarget(j.e, dir)
	default:
		tg, err = VariantTarget(j.e, strings.TrimPrefix(j.name, "variant:"), dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	r := ck.Check(context.Background(), tg)
	if t.Failed() || testing.Verbose() {
		var b strings.Builder
		WriteText(&b, []*Report{r}, TextOptions{Verbose: true})
		t.Log("\n" + b.String())
	}
	return r
}

func assertOutcome(t *testing.T, j fixtureJob, r *Report) {
	t.Helper()
	if j.expect == "pass" {
		if r.Verdict != Passed {
			t.Fatalf("%s %s: want pass, got %s at %s: %s\n%s", j.e.ID, j.name, r.Verdict, r.Stage, r.Headline, r.Message)
		}
		return
	}
	if r.Verdict != Failed || r.Stage != j.expect || r.Fault != FaultYou {
		t.Fatalf("%s %s: want failed at %s (your fault), got %s at %s (fault %q): %s\n%s",
			j.e.ID, j.name, j.expect, r.Verdict, r.Stage, r.Fault, r.Headline, r.Message)
	}
	text := strings.ToLower(r.Headline + "\n" + r.Message)
	for _, w := range j.words {
		if !strings.Contains(text, strings.ToLower(w)) {
			t.Errorf("%s %s: the report lacks %q:\n%s\n%s", j.e.ID, j.name, w, r.Headline, r.Message)
		}
	}
}

func TestFixtureSum(t *testing.T) {
	c, ck := fixtureChecker(t)
	for _, j := range fixtureJobs(c, "module0/sum") {
		if j.name == "variant:hang-rank0" {
			continue // TestFixtureHang: it waits for the timeout, beside the timing tests
		}
		t.Run(j.name, func(t *testing.T) {
			t.Parallel()
			r := runFixture(t, ck, j)
			assertOutcome(t, j, r)
			switch j.name {
			case "variant:flood":
				// 50 MB per rank went through the launcher; the report keeps a bounded tail.
				for _, rk := range r.Run.Ranks {
					if len(rk.Tail) > 16<<10 {
						t.Errorf("rank %d: %d bytes of output kept in the report", rk.Rank, len(rk.Tail))
					}
					if rk.Dropped < 40<<20 {
						t.Errorf("rank %d: only %d bytes dropped; the flood did not happen", rk.Rank, rk.Dropped)
					}
				}
			case "variant:crash-rank1":
				if r.Run.Ranks[1].Signal != "SIGSEGV" {
					t.Errorf("rank 1 signal %q", r.Run.Ranks[1].Signal)
				}
			case "variant:compile-error":
				if r.Build == nil || len(r.Build.Diagnostics) == 0 || !r.Build.Diagnostics[0].Learner {
					t.Errorf("diagnostics %+v", r.Build)
				}
			case "variant:odd-size-only-bug":
				for _, cr := range r.Cases {
					if cr.Case != "odd" && !cr.OK {
						t.Errorf("case %s failed on rank %d: the bug shows only at odd sizes", cr.Case, cr.Rank)
					}
				}
			case "solution":
				if len(r.Cases) != 6 { // small, pow2, odd on two ranks
					t.Errorf("case rows %d, want 6", len(r.Cases))
				}
			}
		})
	}
}

// TestFixtureHang waits out the sum exercise's timeout. It runs in parallel with
// TestFixtureTiming only: its hung rank sleeps, so it does not disturb the timings.
func TestFixtureHang(t *testing.T) {
	t.Parallel()
	c, ck := fixtureChecker(t)
	for _, j := range fixtureJobs(c, "module0/sum") {
		if j.name != "variant:hang-rank0" {
			continue
		}
		r := runFixture(t, ck, j)
		assertOutcome(t, j, r)
		if !r.Run.TimedOut || r.Run.Ranks[0].State != launch.StateHung || !r.Run.Ranks[1].Done {
			t.Errorf("want rank 0 hung and rank 1 done: %+v", r.Run.Ranks)
		}
		return
	}
	t.Fatal("no hang-rank0 variant")
}

// TestFixtureTiming runs after every other test (parallel tests start last), beside
// TestFixtureHang only.
func TestFixtureTiming(t *testing.T) {
	t.Parallel()
	c, ck := fixtureChecker(t)
	for _, j := range fixtureJobs(c, "module0/timing") {
		t.Run(j.name, func(t *testing.T) {
			r := runFixture(t, ck, j)
			assertOutcome(t, j, r)
			if j.expect == "pass" || j.expect == StagePerformance {
				if r.Perf == nil || len(r.Perf.Cases) != 1 || r.Perf.Samples < 20 {
					t.Fatalf("perf result %+v", r.Perf)
				}
			}
			switch j.name {
			case "variant:suspect":
				if r.Perf.Outcome != "suspect" {
					t.Errorf("outcome %s", r.Perf.Outcome)
				}
			case "variant:side-stream":
				if r.Perf.Outcome != "unseen" {
					t.Errorf("outcome %s", r.Perf.Outcome)
				}
			}
		})
	}
}

// TestFixturePerfOffSkipsTiming: with Perf false the timing exercise's slow variant passes
// (correctness is all that is judged) and the report says performance was not judged.
func TestFixturePerfOffSkipsTiming(t *testing.T) {
	c, ck := fixtureChecker(t)
	off := *ck
	off.Perf = false
	e := c.Exercise("module0/timing")
	tg, err := VariantTarget(e, "slow", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := off.Check(context.Background(), tg)
	if r.Verdict != Passed || r.Perf != nil || !strings.Contains(strings.Join(r.Notes, " "), "not judged") {
		t.Fatalf("verdict %s perf %+v notes %q", r.Verdict, r.Perf, r.Notes)
	}
}

// TestFixtureBuildOnly: Build compiles and polices without running.
func TestFixtureBuildOnly(t *testing.T) {
	c, ck := fixtureChecker(t)
	e := c.Exercise("module0/sum")
	for _, v := range []struct{ variant, stage, verdict string }{
		{"hang-rank0", StagePolicy, Passed}, // never run, so it cannot hang
		{"forbidden", StagePolicy, Failed},
		{"compile-error", StageBuild, Failed},
	} {
		tg, err := VariantTarget(e, v.variant, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		r := ck.Build(context.Background(), tg)
		if r.Verdict != v.verdict || r.Stage != v.stage {
			t.Errorf("%s: %s at %s (%s)", v.variant, r.Verdict, r.Stage, r.Headline)
		}
	}
}
