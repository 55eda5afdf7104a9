package checker

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestMedian(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("odd: %g", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("even: %g", m)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("empty median must be NaN")
	}
	xs := []float64{3, 1, 2}
	median(xs)
	if xs[0] != 3 {
		t.Error("median sorted its input")
	}
}

func TestMedianCIDeterministicAndCoversMedian(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float64, 40)
	for i := range xs {
		xs[i] = 1 + 0.05*rng.NormFloat64()
	}
	m1, lo1, hi1 := medianCI(xs, 0.95)
	m2, lo2, hi2 := medianCI(xs, 0.95)
	if m1 != m2 || lo1 != lo2 || hi1 != hi2 {
		t.Fatal("the interval is not deterministic")
	}
	if !(lo1 <= m1 && m1 <= hi1) {
		t.Fatalf("median %g outside [%g, %g]", m1, lo1, hi1)
	}
	if hi1-lo1 > 0.1 || hi1-lo1 <= 0 {
		t.Fatalf("implausible width %g for 40 samples with sd 0.05", hi1-lo1)
	}
	// Constant samples: a zero-width interval at the value.
	m, lo, hi := medianCI([]float64{2, 2, 2, 2}, 0.95)
	if m != 2 || lo != 2 || hi != 2 {
		t.Fatalf("constant: %g [%g, %g]", m, lo, hi)
	}
	// One sample: no spread known, unbounded interval.
	_, lo, hi = medianCI([]float64{5}, 0.95)
	if !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
		t.Fatalf("one sample: [%g, %g]", lo, hi)
	}
}

func TestMedianCIWidensWithNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	quiet, noisy := make([]float64, 30), make([]float64, 30)
	for i := range quiet {
		z := rng.NormFloat64()
		quiet[i] = 1 + 0.01*z
		noisy[i] = 1 + 0.3*z
	}
	_, ql, qh := medianCI(quiet, 0.95)
	_, nl, nh := medianCI(noisy, 0.95)
	if nh-nl <= 5*(qh-ql) {
		t.Fatalf("noisy interval %g not much wider than quiet %g", nh-nl, qh-ql)
	}
}

func TestRobustCV(t *testing.T) {
	steady := []float64{100, 101, 99, 100, 100, 102, 98, 100}
	if cv := robustCV(steady); cv > 0.02 {
		t.Errorf("steady cv %g", cv)
	}
	// One preempted sample does not make a steady series noisy.
	withOutlier := append(append([]float64{}, steady...), 1000)
	if cv := robustCV(withOutlier); cv > 0.03 {
		t.Errorf("one outlier inflated the cv to %g", cv)
	}
	spread := []float64{60, 140, 80, 120, 100, 70, 130, 90}
	if cv := robustCV(spread); cv < 0.2 {
		t.Errorf("spread cv %g", cv)
	}
}

func TestMaxAcrossRanks(t *testing.T) {
	got := maxAcrossRanks([][]float64{{1, 5, 3, 9}, {2, 4, 6}})
	want := []float64{2, 5, 6}
	if len(got) != len(want) {
		t.Fatalf("len %d", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	got = maxAcrossRanks([][]float64{{1, math.NaN()}, {2, 3}})
	if got[0] != 2 || !math.IsNaN(got[1]) {
		t.Fatalf("NaN must poison its index: %v", got)
	}
}

func TestPairedRatiosOrientation(t *testing.T) {
	// Bandwidth: yours 50 GB/s vs 100: half as fast.
	r := pairedRatios([]float64{50, 80}, []float64{100, 100}, true)
	if r[0] != 0.5 || r[1] != 0.8 {
		t.Fatalf("bandwidth: %v", r)
	}
	// Time: yours 200 us vs 100 us: half as fast.
	r = pairedRatios([]float64{200, 0, 100}, []float64{100, 100, math.NaN()}, false)
	if len(r) != 1 || r[0] != 0.5 {
		t.Fatalf("time (bad pairs dropped): %v", r)
	}
}

func TestMetricOf(t *testing.T) {
	// 1 GB in 1e6 us (1 s) is 1 GB/s; busbw factor multiplies.
	if g := metricOf("algbw", 1e9, 1, 1e6); math.Abs(g-1) > 1e-12 {
		t.Errorf("algbw %g", g)
	}
	if g := metricOf("busbw", 1e9, 1.5, 1e6); math.Abs(g-1.5) > 1e-12 {
		t.Errorf("busbw %g", g)
	}
	if g := metricOf("busbw", 1e9, 0, 1e6); math.Abs(g-1) > 1e-12 {
		t.Errorf("factor 0 means 1: %g", g)
	}
	if g := metricOf("time", 1e9, 2, 37); g != 37 {
		t.Errorf("time %g", g)
	}
}
