package checker

import (
	"fmt"
	"math"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// Thresholds of the performance judgement (docs/checker.md explains them).
const (
	ciLevel = 0.95
	// noisyCV: a baseline whose robust coefficient of variation exceeds this is too noisy to
	// judge from one run.
	noisyCV = 0.10
	// A "yours" whose timer saw less than unseenYours of its wall time, while the baseline's
	// saw at least unseenBaseline, did work the timer did not see...
	unseenYours    = 0.5
	unseenBaseline = 0.8
	// ...provided the unseen part is a real share of the work (not launch overhead around an
	// operation that does nothing).
	unseenShare = 0.25
)

// series is one (case, who)'s samples of one run, combined across ranks.
type series struct {
	bytes, factor float64
	metric        string
	us, wall      []float64
}

// perfPool pools, per case, the paired samples of every run.
type perfPool struct {
	runs  int
	cases map[string]*pooledCase
	order []string
	// lastBaselineCV is the headline baseline's noise in the latest run, by case.
	lastCV map[string]float64
}

type pooledCase struct {
	metric              string
	bytes               float64
	ratios              []float64 // yours relative to baseline, >1 faster
	yoursM, baseM       []float64 // metric per sample
	yoursUS, baseUS     []float64
	yoursWall, baseWall []float64 // only where wall times were given
	yoursSeen, baseSeen []float64 // us / wall_us per sample
	yoursUnseen         []float64 // wall_us - us per sample
}

// combine merges the ranks' timing records of one run by (case, who).
func combine(records []*rankRecords) (map[[2]string]*series, []string, error) {
	type acc struct {
		s        *series
		us, wall [][]float64
	}
	accs := map[[2]string]*acc{}
	var order []string
	for _, recs := range records {
		perRank := map[[2]string]int{}
		for _, t := range recs.Timings {
			key := [2]string{t.Case, t.Who}
			a := accs[key]
			if a == nil {
				a = &acc{s: &series{bytes: float64(t.Bytes), factor: float64(t.Factor), metric: t.Metric}}
				accs[key] = a
				if t.Who == "yours" || !containsStr(order, t.Case) {
					if !containsStr(order, t.Case) {
						order = append(order, t.Case)
					}
				}
			} else if a.s.metric != t.Metric || !sameFloat(a.s.bytes, float64(t.Bytes)) {
				return nil, nil, fmt.Errorf("rank %d's timing of %s/%s disagrees with another rank's (metric %s, %g bytes vs %s, %g bytes)",
					recs.Rank, t.Case, t.Who, t.Metric, float64(t.Bytes), a.s.metric, a.s.bytes)
			}
			us, wall := floats(t.US), floats(t.WallUS)
			if i, ok := perRank[key]; ok {
				// A second record of the same rank continues its samples.
				a.us[i] = append(a.us[i], us...)
				a.wall[i] = append(a.wall[i], wall...)
				continue
			}
			perRank[key] = len(a.us)
			a.us = append(a.us, us)
			a.wall = append(a.wall, wall)
		}
	}
	out := map[[2]string]*series{}
	for key, a := range accs {
		a.s.us = maxAcrossRanks(a.us)
		haveWall := true
		for i, w := range a.wall {
			if len(w) != len(a.us[i]) {
				haveWall = false
			}
		}
		if haveWall {
			a.s.wall = maxAcrossRanks(a.wall)
		}
		out[key] = a.s
	}
	return out, order, nil
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

func floats(fs []Float) []float64 {
	out := make([]float64, len(fs))
	for i, f := range fs {
		out[i] = float64(f)
	}
	return out
}

// add pools one run's timings.
func (p *perfPool) add(records []*rankRecords) error {
	ser, order, err := combine(records)
	if err != nil {
		return err
	}
	if p.cases == nil {
		p.cases = map[string]*pooledCase{}
	}
	p.runs++
	p.lastCV = map[string]float64{}
	for _, name := range order {
		y, b := ser[[2]string{name, "yours"}], ser[[2]string{name, "baseline"}]
		if y == nil || b == nil {
			continue
		}
		if y.metric != b.metric {
			return fmt.Errorf("timing of case %s: yours is %s but the baseline is %s", name, y.metric, b.metric)
		}
		pc := p.cases[name]
		if pc == nil {
			pc = &pooledCase{metric: y.metric, bytes: y.bytes}
			p.cases[name] = pc
			p.order = append(p.order, name)
		}
		n := min(len(y.us), len(b.us))
		var runBase []float64
		for i := 0; i < n; i++ {
			yu, bu := y.us[i], b.us[i]
			if !(yu > 0) || !(bu > 0) || math.IsInf(yu, 0) || math.IsInf(bu, 0) {
				continue
			}
			ym, bm := metricOf(y.metric, y.bytes, y.factor, yu), metricOf(b.metric, b.bytes, b.factor, bu)
			pc.yoursM = append(pc.yoursM, ym)
			pc.baseM = append(pc.baseM, bm)
			pc.yoursUS = append(pc.yoursUS, yu)
			pc.baseUS = append(pc.baseUS, bu)
			runBase = append(runBase, bm)
			if higherIsBetter(y.metric) {
				pc.ratios = append(pc.ratios, ym/bm)
			} else {
				pc.ratios = append(pc.ratios, bm/ym)
			}
			if i < len(y.wall) && i < len(b.wall) && y.wall[i] > 0 && b.wall[i] > 0 {
				pc.yoursWall = append(pc.yoursWall, y.wall[i])
				pc.baseWall = append(pc.baseWall, b.wall[i])
				pc.yoursSeen = append(pc.yoursSeen, math.Min(yu/y.wall[i], 1))
				pc.baseSeen = append(pc.baseSeen, math.Min(bu/b.wall[i], 1))
				pc.yoursUnseen = append(pc.yoursUnseen, math.Max(y.wall[i]-yu, 0))
			}
		}
		p.lastCV[name] = robustCV(runBase)
	}
	return nil
}

// Actions the performance judgement asks for.
const (
	actionPass = iota
	actionFail
	actionRerun
	actionInconclusive
	actionError
)

type perfDecision struct {
	action            int
	headline, message string
	why               string // why a re-run (for the stage detail)
	result            *PerfResult
}

// judgePerf decides the performance stage from the pooled samples of runs so far.
func judgePerf(p *course.Perf, pool *perfPool, runs, maxRuns int) perfDecision {
	res := &PerfResult{
		Metric: p.Metric, Case: p.Case, Baseline: p.Baseline, Target: p.MinRatio,
		SuspectAbove: p.SuspectAbove, Runs: runs,
		Ratio: Float(math.NaN()), CILow: Float(math.NaN()), CIHigh: Float(math.NaN()), BaselineCV: Float(math.NaN()),
	}
	res.Unit = "GB/s"
	if p.Metric == "time" {
		res.Unit = "us"
	}
	d := perfDecision{result: res}
	for _, name := range pool.order {
		pc := pool.cases[name]
		med, lo, hi := medianCI(pc.ratios, ciLevel)
		res.Cases = append(res.Cases, PerfCase{
			Case: name, Bytes: Float(pc.bytes),
			Yours: Float(median(pc.yoursM)), Baseline: Float(median(pc.baseM)),
			YoursUS: Float(median(pc.yoursUS)), BaselineUS: Float(median(pc.baseUS)),
			YoursWall: Float(median(pc.yoursWall)), BaseWall: Float(median(pc.baseWall)),
			Ratio: Float(med), CILow: Float(lo), CIHigh: Float(hi), Samples: len(pc.ratios),
		})
	}
	head := pool.cases[p.Case]
	if head == nil || len(head.ratios) == 0 {
		d.action = actionError
		d.headline = fmt.Sprintf("no timings for the headline case %s", p.Case)
		var have []string
		have = append(have, pool.order...)
		d.message = fmt.Sprintf("The performance target is judged on case %q, but the run wrote no paired timings (yours and baseline) for it", p.Case)
		if len(have) > 0 {
			d.message += fmt.Sprintf(" (it timed: %s)", strings.Join(have, ", "))
		}
		d.message += ". The driver times the cases listed in MGPU_PERF_CASES; this is a bug in the course or the harness."
		res.Outcome = Errored
		return d
	}
	if pc := head; pc.metric != p.Metric && p.Metric != "" {
		d.action = actionError
		d.headline = fmt.Sprintf("the driver timed %s as %s, the manifest says %s", p.Case, pc.metric, p.Metric)
		d.message = d.headline + "; this is a bug in the course."
		res.Outcome = Errored
		return d
	}
	med, lo, hi := medianCI(head.ratios, ciLevel)
	res.Ratio, res.CILow, res.CIHigh = Float(med), Float(lo), Float(hi)
	res.Samples = len(head.ratios)
	cv := pool.lastCV[p.Case]
	res.BaselineCV = Float(cv)
	yoursShown, baseShown := fmtMetric(median(head.yoursM), res.Unit), fmtMetric(median(head.baseM), res.Unit)
	cmp := fmt.Sprintf("yours %s vs baseline %s", yoursShown, baseShown)
	ratioShown := fmt.Sprintf("%s [%s, %s]", fmtRatio(med), fmtRatio(lo), fmtRatio(hi))
	baselineWords := p.Baseline
	if baselineWords == "" {
		baselineWords = "the baseline"
	}

	// Work the timer did not see.
	if len(head.yoursSeen) > 0 {
		ys, bs := median(head.yoursSeen), median(head.baseSeen)
		unseen := median(head.yoursUnseen)
		if ys < unseenYours && bs >= unseenBaseline && unseen >= unseenShare*median(head.baseWall) {
			res.Outcome = "unseen"
			res.Suspect = true
			res.SuspectWhy = fmt.Sprintf("the timer saw %.0f%% of your operation's wall time (the baseline's: %.0f%%)", 100*ys, 100*bs)
			d.action = actionFail
			d.headline = "work the timer did not see (a side stream?): " + fmtMetric(median(head.yoursUS), "us") + " timed, " + fmtMetric(median(head.yoursWall), "us") + " of wall time"
			d.message = fmt.Sprintf("Your operation's timer measured %s per operation, but the host waited %s for the device to finish it: the timer saw only %.0f%% of the work. For %s the two agree (%.0f%%).\n"+
				"Work ran where the timer could not see it: on another stream than the one you were given, or after your function returned. Enqueue all of the work on the stream you are given, so that the time it takes is the time that is measured.",
				fmtMetric(median(head.yoursUS), "us"), fmtMetric(median(head.yoursWall), "us"), 100*ys, baselineWords, 100*bs)
			return d
		}
	}
	// Faster than the baseline can be.
	if p.SuspectAbove > 0 && lo > p.SuspectAbove {
		res.Outcome = "suspect"
		res.Suspect = true
		res.SuspectWhy = fmt.Sprintf("ratio %s is above %s, faster than %s can be", ratioShown, fmtRatio(p.SuspectAbove), baselineWords)
		d.action = actionFail
		d.headline = fmt.Sprintf("suspect: faster than the baseline can be: %s, ratio %s (limit %s)", cmp, ratioShown, fmtRatio(p.SuspectAbove))
		d.message = fmt.Sprintf("Your code measured %s relative to %s (%s), more than the %s that is physically believable here. "+
			"A result this far ahead usually means the timed operation did not do the work: did you time the launch instead of the copy, skip the work once its result had been checked, or return early on repeated calls?\n"+
			"The check counts this as a failure until the timing is believable.", ratioShown, baselineWords, cmp, fmtRatio(p.SuspectAbove))
		return d
	}
	noisy := cv > noisyCV
	nearSuspect := p.SuspectAbove > 0 && med > p.SuspectAbove
	passes := lo >= p.MinRatio && !nearSuspect
	fails := hi < p.MinRatio
	target := fmtRatio(p.MinRatio)
	passHeadline := fmt.Sprintf("passed: %s, ratio %s (target %s)", cmp, ratioShown, target)
	failHeadline := fmt.Sprintf("too slow: %s, ratio %s is below the target %s", cmp, ratioShown, target)
	failMessage := fmt.Sprintf("Your code is correct but too slow: on case %s it reached %s the speed of the baseline (%s): median ratio %s, 95%% confidence interval %s to %s, over %d paired samples in %d run(s). The target is %s.\n",
		p.Case, fmtRatio(med), baselineWords, fmtRatio(med), fmtRatio(lo), fmtRatio(hi), len(head.ratios), runs, target)
	if p.FailHint != "" {
		failMessage += "Hint: " + p.FailHint + "\n"
	}
	if !noisy || runs >= maxRuns {
		switch {
		case passes:
			res.Outcome = Passed
			d.action = actionPass
			d.headline = passHeadline
			if noisy {
				d.message = fmt.Sprintf("The baseline's timings varied (%.0f%%), but the pooled confidence interval clears the target.", 100*cv)
			}
			return d
		case fails:
			res.Outcome = Failed
			d.action = actionFail
			d.headline = failHeadline
			d.message = failMessage
			if noisy {
				d.message += fmt.Sprintf("(The baseline's timings varied by %.0f%%; even so, the whole confidence interval is below the target.)\n", 100*cv)
			}
			return d
		}
	}
	var why string
	switch {
	case noisy:
		why = fmt.Sprintf("the baseline's timings vary by %.0f%% (more than %.0f%%)", 100*cv, 100*noisyCV)
	case nearSuspect:
		why = fmt.Sprintf("the median ratio %s is above the believable %s but its interval reaches below", fmtRatio(med), fmtRatio(p.SuspectAbove))
	default:
		why = fmt.Sprintf("the confidence interval %s to %s contains the target %s", fmtRatio(lo), fmtRatio(hi), target)
	}
	if runs < maxRuns {
		d.action = actionRerun
		d.why = why
		res.Outcome = "undecided"
		return d
	}
	res.Outcome = Inconclusive
	res.Inconclusive = why
	d.action = actionInconclusive
	d.headline = fmt.Sprintf("inconclusive: %s, ratio %s (target %s)", cmp, ratioShown, target)
	d.message = fmt.Sprintf("The timings could not settle whether your code reaches the target after %d runs: %s.\n"+
		"This is not a failure. The machine may be busy: run the check again when it is quiet.", runs, why)
	return d
}

func fmtMetric(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "?"
	case unit == "us" && v < 10:
		return fmt.Sprintf("%.3g us", v)
	case unit == "us":
		return fmt.Sprintf("%.1f us", v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func fmtRatio(v float64) string {
	switch {
	case math.IsNaN(v):
		return "?"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case v >= 100:
		return fmt.Sprintf("%.0fx", v)
	case v >= 10:
		return fmt.Sprintf("%.1fx", v)
	}
	return fmt.Sprintf("%.2fx", v)
}
