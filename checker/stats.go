package checker

import (
	"math"
	"math/rand/v2"
	"slices"
)

// bootstrapResamples is how many resamples estimate a confidence interval.
const bootstrapResamples = 2000

// median of xs (NaN for none); xs is not modified.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return sortedMedian(s)
}

func sortedMedian(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile of sorted s by linear interpolation between order statistics, q in [0, 1].
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	frac := pos - float64(lo)
	return s[lo] + (s[hi]-s[lo])*frac
}

// medianCI is the median of xs and a percentile-bootstrap confidence interval for it at the
// given level (0.95). The generator is seeded from fixed constants so that the same samples
// always give the same interval.
func medianCI(xs []float64, level float64) (med, lo, hi float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	med = median(xs)
	if n == 1 {
		// One sample says nothing about spread: an interval as wide as can be.
		return med, math.Inf(-1), math.Inf(1)
	}
	rng := rand.New(rand.NewPCG(0x6d677075, 0x6c6561726e))
	meds := make([]float64, bootstrapResamples)
	buf := make([]float64, n)
	for b := range meds {
		for i := range buf {
			buf[i] = xs[rng.IntN(n)]
		}
		slices.Sort(buf)
		meds[b] = sortedMedian(buf)
	}
	slices.Sort(meds)
	alpha := (1 - level) / 2
	return med, quantile(meds, alpha), quantile(meds, 1-alpha)
}

// robustCV is a coefficient of variation that one preempted sample cannot inflate: the
// interquartile range scaled to a normal standard deviation (IQR/1.349), over the median.
func robustCV(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := sortedMedian(s)
	if m == 0 {
		return math.Inf(1)
	}
	iqr := quantile(s, 0.75) - quantile(s, 0.25)
	return math.Abs(iqr / 1.349 / m)
}

// maxAcrossRanks combines per-rank samples by index, keeping the largest (the slowest rank
// sets the pace). The result has the length of the shortest rank's samples. NaN samples
// (a rank that could not time one) make that index NaN.
func maxAcrossRanks(perRank [][]float64) []float64 {
	if len(perRank) == 0 {
		return nil
	}
	n := len(perRank[0])
	for _, s := range perRank[1:] {
		n = min(n, len(s))
	}
	out := make([]float64, n)
	for i := range out {
		m := math.Inf(-1)
		for _, s := range perRank {
			v := s[i]
			if math.IsNaN(v) {
				m = math.NaN()
				break
			}
			m = max(m, v)
		}
		out[i] = m
	}
	return out
}

// metricOf turns a time per operation (µs) into the metric: GB/s for busbw/algbw, the time
// itself for "time".
func metricOf(metric string, bytes, factor, us float64) float64 {
	if metric == "time" {
		return us
	}
	if factor == 0 || math.IsNaN(factor) {
		factor = 1
	}
	return bytes * factor / us / 1000
}

// higherIsBetter says which way the metric goes.
func higherIsBetter(metric string) bool { return metric != "time" }

// pairedRatios divides yours by the baseline sample by sample (same index, taken back to back),
// oriented so that above 1 means yours is faster: yours/baseline for bandwidths,
// baseline/yours for times. Pairs with a non-finite or non-positive side are left out.
func pairedRatios(yours, baseline []float64, higherBetter bool) []float64 {
	n := min(len(yours), len(baseline))
	out := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		y, b := yours[i], baseline[i]
		if !(y > 0) || !(b > 0) || math.IsInf(y, 0) || math.IsInf(b, 0) {
			continue
		}
		if higherBetter {
			out = append(out, y/b)
		} else {
			out = append(out, b/y)
		}
	}
	return out
}
