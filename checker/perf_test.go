package checker

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

func timingRec(rank int, who, metric string, bytes float64, us, wall []float64) record {
	r := rank
	rec := record{T: "timing", Rank: &r, Case: "main", Who: who, Metric: metric, Bytes: Float(bytes), Factor: 1}
	for _, u := range us {
		rec.US = append(rec.US, Float(u))
	}
	for _, w := range wall {
		rec.WallUS = append(rec.WallUS, Float(w))
	}
	return rec
}

// oneRankRun is a run whose rank 0 timed yours and the baseline (wall = us when nil).
func oneRankRun(metric string, yours, base, yoursWall, baseWall []float64) []*rankRecords {
	if yoursWall == nil {
		yoursWall = yours
	}
	if baseWall == nil {
		baseWall = base
	}
	return []*rankRecords{{Rank: 0, Timings: []record{
		timingRec(0, "yours", metric, 1e9, yours, yoursWall),
		timingRec(0, "baseline", metric, 1e9, base, baseWall),
	}}}
}

func timePerf() *course.Perf {
	return &course.Perf{Case: "main", Metric: "time", Baseline: "the loop", MinRatio: 0.8, SuspectAbove: 1.5,
		FailHint: "is peer access enabled?", Cases: []course.Case{{Name: "main", N: 1}}}
}

// noisy returns n samples around v with relative noise sd.
func noisy(rng *rand.Rand, n int, v, sd float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v * (1 + sd*rng.NormFloat64())
		if out[i] <= 0 {
			out[i] = v / 10
		}
	}
	return out
}

func judgeRuns(t *testing.T, p *course.Perf, maxRuns int, runs ...[]*rankRecords) perfDecision {
	t.Helper()
	var pool perfPool
	var d perfDecision
	for i, r := range runs {
		if err := pool.add(r); err != nil {
			t.Fatal(err)
		}
		d = judgePerf(p, &pool, i+1, maxRuns)
	}
	return d
}

func TestJudgePass(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	d := judgeRuns(t, timePerf(), 3, oneRankRun("time", noisy(rng, 30, 100, 0.02), noisy(rng, 30, 100, 0.02), nil, nil))
	if d.action != actionPass {
		t.Fatalf("want pass, got %d: %s %s", d.action, d.headline, d.message)
	}
	if d.result.Outcome != Passed || d.result.Samples != 30 || float64(d.result.CILow) < 0.8 {
		t.Fatalf("result: %+v", d.result)
	}
}

func TestJudgeFailNamesHint(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Yours takes 3x as long: ratio 0.33.
	d := judgeRuns(t, timePerf(), 3, oneRankRun("time", noisy(rng, 30, 300, 0.02), noisy(rng, 30, 100, 0.02), nil, nil))
	if d.action != actionFail || d.result.Outcome != Failed {
		t.Fatalf("want fail, got %d: %s", d.action, d.headline)
	}
	if !strings.Contains(d.message, "is peer access enabled?") || !strings.Contains(d.headline, "too slow") {
		t.Fatalf("message lacks hint or headline: %q / %q", d.headline, d.message)
	}
	if r := float64(d.result.Ratio); r < 0.3 || r > 0.37 {
		t.Fatalf("ratio %g", r)
	}
}

func TestJudgeBandwidthOrientation(t *testing.T) {
	p := timePerf()
	p.Metric = "busbw"
	// Same time per op for both: ratio 1. Twice the time for yours: half the bandwidth.
	d := judgeRuns(t, p, 1, oneRankRun("busbw", []float64{200, 200, 200, 200}, []float64{100, 100, 100, 100}, nil, nil))
	if float64(d.result.Ratio) != 0.5 || d.result.Unit != "GB/s" {
		t.Fatalf("ratio %g unit %s", float64(d.result.Ratio), d.result.Unit)
	}
	if got := float64(d.result.Cases[0].Yours); got != 5000 { // 1e9 B in 200 us
		t.Fatalf("yours GB/s %g", got)
	}
}

func TestJudgeSuspect(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	d := judgeRuns(t, timePerf(), 3, oneRankRun("time", noisy(rng, 30, 1, 0.02), noisy(rng, 30, 100, 0.02), nil, nil))
	if d.action != actionFail || !d.result.Suspect || d.result.Outcome != "suspect" {
		t.Fatalf("want suspect, got %d: %s", d.action, d.headline)
	}
	if !strings.HasPrefix(d.headline, "suspect: faster than the baseline can be") {
		t.Fatalf("headline %q", d.headline)
	}
}

func TestJudgeUnseenWork(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	yours := noisy(rng, 30, 2, 0.02)
	wall := noisy(rng, 30, 100, 0.02)
	base := noisy(rng, 30, 100, 0.02)
	d := judgeRuns(t, timePerf(), 3, oneRankRun("time", yours, base, wall, nil))
	if d.action != actionFail || d.result.Outcome != "unseen" {
		t.Fatalf("want unseen, got %d: %s", d.action, d.headline)
	}
	if !strings.Contains(d.headline, "work the timer did not see (a side stream?)") {
		t.Fatalf("headline %q", d.headline)
	}
}

func TestJudgeDoNothingIsSuspectNotUnseen(t *testing.T) {
	// An operation that does nothing: tiny us, tiny wall (the sync around it dominates), far
	// below the baseline's time. The unseen share is not a real part of the work.
	d := judgeRuns(t, timePerf(), 3, oneRankRun("time",
		[]float64{0.006, 0.006, 0.007, 0.006, 0.006}, []float64{100, 101, 99, 100, 100},
		[]float64{0.012, 0.013, 0.012, 0.012, 0.012}, nil))
	if d.result.Outcome != "suspect" {
		t.Fatalf("want suspect, got %s: %s", d.result.Outcome, d.headline)
	}
}

func TestJudgeNoisyBaselineReRunsThenPoolsToInconclusive(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	p := timePerf()
	// Yours at the target exactly, both noisy: never decidable.
	run := func() []*rankRecords {
		return oneRankRun("time", noisy(rng, 20, 125, 0.3), noisy(rng, 20, 100, 0.3), nil, nil)
	}
	var pool perfPool
	for n := 1; n <= 3; n++ {
		if err := pool.add(run()); err != nil {
			t.Fatal(err)
		}
		d := judgePerf(p, &pool, n, 3)
		if n < 3 && d.action != actionRerun {
			t.Fatalf("run %d: want a re-run, got %d (%s)", n, d.action, d.headline)
		}
		if n == 3 {
			if d.action != actionInconclusive || d.result.Outcome != Inconclusive || d.result.Inconclusive == "" {
				t.Fatalf("want inconclusive after 3 runs, got %d (%s)", d.action, d.headline)
			}
			if d.result.Samples != 60 || d.result.Runs != 3 {
				t.Fatalf("samples not pooled: %d over %d runs", d.result.Samples, d.result.Runs)
			}
		}
	}
}

func TestJudgeNoisyBaselineButClearResultAfterReRuns(t *testing.T) {
	// A baseline that drifts (CV well above 10 %) while the paired ratio stays at 0.5: the
	// checker re-runs, and at the bound the clear interval decides. No false pass.
	p := timePerf()
	mk := func() []*rankRecords {
		var y, b []float64
		for i := 0; i < 20; i++ {
			load := 1 + float64(i%5)*0.2
			b = append(b, 100*load)
			y = append(y, 200*load)
		}
		return oneRankRun("time", y, b, nil, nil)
	}
	d := judgeRuns(t, p, 2, mk())
	if d.action != actionRerun {
		t.Fatalf("noisy baseline must re-run first, got %d", d.action)
	}
	d = judgeRuns(t, p, 2, mk(), mk())
	if d.action != actionFail {
		t.Fatalf("want fail at the bound, got %d: %s", d.action, d.headline)
	}
}

func TestJudgeMissingHeadline(t *testing.T) {
	p := timePerf()
	p.Case = "large"
	d := judgeRuns(t, p, 3, oneRankRun("time", []float64{1, 2}, []float64{1, 2}, nil, nil))
	if d.action != actionError || !strings.Contains(d.headline, "large") {
		t.Fatalf("want an error naming the case, got %d: %s", d.action, d.headline)
	}
	var pool perfPool
	if err := pool.add([]*rankRecords{{Rank: 0}}); err != nil {
		t.Fatal(err)
	}
	if d := judgePerf(timePerf(), &pool, 1, 3); d.action != actionError {
		t.Fatalf("no timings at all must be an error, got %d", d.action)
	}
}

func TestCombineTakesTheSlowestRankPerIndex(t *testing.T) {
	recs := []*rankRecords{
		{Rank: 0, Timings: []record{timingRec(0, "yours", "time", 8, []float64{10, 30, 10}, []float64{10, 30, 10})}},
		{Rank: 1, Timings: []record{timingRec(1, "yours", "time", 8, []float64{20, 10, 10, 99}, []float64{20, 10, 10, 99})}},
	}
	ser, order, err := combine(recs)
	if err != nil {
		t.Fatal(err)
	}
	s := ser[[2]string{"main", "yours"}]
	want := []float64{20, 30, 10}
	if len(order) != 1 || len(s.us) != 3 {
		t.Fatalf("order %v us %v", order, s.us)
	}
	for i := range want {
		if s.us[i] != want[i] || s.wall[i] != want[i] {
			t.Fatalf("us %v wall %v, want %v", s.us, s.wall, want)
		}
	}
	// Ranks that disagree on what they timed are a protocol error.
	recs[1].Timings[0].Bytes = 16
	if _, _, err := combine(recs); err == nil {
		t.Fatal("disagreeing bytes accepted")
	}
}

func TestPoolPairsWithinARunOnly(t *testing.T) {
	var pool perfPool
	if err := pool.add(oneRankRun("time", []float64{100, 100}, []float64{100, 100}, nil, nil)); err != nil {
		t.Fatal(err)
	}
	// The second run has one more yours sample than baseline samples: it is left unpaired.
	if err := pool.add(oneRankRun("time", []float64{200, 200, 200}, []float64{100, 100}, nil, nil)); err != nil {
		t.Fatal(err)
	}
	pc := pool.cases["main"]
	want := []float64{1, 1, 0.5, 0.5}
	if len(pc.ratios) != len(want) {
		t.Fatalf("ratios %v", pc.ratios)
	}
	for i := range want {
		if pc.ratios[i] != want[i] {
			t.Fatalf("ratios %v, want %v", pc.ratios, want)
		}
	}
}
