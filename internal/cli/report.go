package cli

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
)

// headline extracts the figures worth remembering from a report: the headline case's
// measurement, the baseline's and their ratio.
func headline(r *checker.Report) map[string]float64 {
	p := r.Perf
	if p == nil {
		return nil
	}
	out := map[string]float64{}
	for _, c := range p.Cases {
		if c.Case != p.Case {
			continue
		}
		out[p.Metric+"_"+p.Unit] = float64(c.Yours)
		out["baseline_"+p.Metric+"_"+p.Unit] = float64(c.Baseline)
	}
	if p.Ratio > 0 {
		out["ratio"] = float64(p.Ratio)
	}
	return out
}

// higherIsBetter says whether a remembered figure improves upwards (bandwidths, ratios) or
// downwards (times in µs).
func higherIsBetter(key string) bool {
	return !strings.HasSuffix(key, "_us")
}

// figures is the verification report's view of a check's performance stage.
func figures(r *checker.Report) *verifyFigures {
	p := r.Perf
	if p == nil {
		return nil
	}
	f := &verifyFigures{Metric: p.Metric, Unit: p.Unit, Ratio: float64(p.Ratio), CILow: float64(p.CILow), CIHigh: float64(p.CIHigh), Target: p.Target}
	for _, c := range p.Cases {
		if c.Case == p.Case {
			f.Yours, f.Baseline = float64(c.Yours), float64(c.Baseline)
		}
	}
	return f
}

// doctorSummary is doctor's plain report as lines, for the verification report.
func doctorSummary(rep *doctor.Report) []string {
	var b bytes.Buffer
	rep.WriteText(&b, true)
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}

// progressPrinter shows a check's progress on stderr: stages as they start and end, and, in
// verbose mode, every line the compiler and the ranks print.
func progressPrinter(a *App, verbose bool) func(checker.Event) {
	// A rank's end comes live, then again in the run's summary: say each state once per run.
	said := map[int]string{}
	return func(ev checker.Event) {
		switch e := ev.(type) {
		case checker.StageStarted:
			fmt.Fprintf(a.Err, "  %-12s ...\n", e.Stage)
		case checker.StageDone:
			fmt.Fprintf(a.Err, "  %-12s %s (%s)\n", e.Stage, e.Status, e.Duration.Round(time.Millisecond))
		case checker.CrossCheckStarted:
			fmt.Fprintf(a.Err, "Cross-checking with %d ranks on the CPU (with two ranks, left and right are the same rank)...\n", e.Ranks)
		case checker.RunStarted:
			clear(said)
			if e.Run > 1 {
				fmt.Fprintf(a.Err, "  run %d of the program (settling noisy timings), %d ranks\n", e.Run, e.Ranks)
			}
		case checker.BuildLine:
			if verbose {
				fmt.Fprintf(a.Err, "    | %s\n", e.Line)
			}
		case checker.RankLine:
			if verbose {
				tag := fmt.Sprintf("rank %d", e.Rank)
				if e.Rank < 0 {
					tag = "launcher"
				}
				fmt.Fprintf(a.Err, "    [%s] %s\n", tag, e.Line)
			}
		case checker.RankState:
			if said[e.Rank] == e.State {
				break
			}
			said[e.Rank] = e.State
			if verbose || (e.State != "done" && e.State != "killed") {
				fmt.Fprintf(a.Err, "    rank %d: %s\n", e.Rank, e.State)
			}
		}
	}
}
