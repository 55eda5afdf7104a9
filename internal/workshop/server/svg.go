package server

import (
	"math"
	"strconv"
)

// histogram is the geometry of one exercise's ratio histogram, drawn as inline SVG by the
// dashboard template: one bar per bin of equal width, the baseline (ratio 1) marked.
type histogram struct {
	Width, Height float64
	Bars          []histBar
	Ticks         []histTick
	BaselineX     float64
	Left, Right   float64 // x of the axis' ends
	Top           float64 // y of the plot's top
	Bottom        float64 // y of the axis
	MaxCount      int
	N             int // values drawn
}

type histBar struct {
	X, Y, W, H float64
	CX         float64 // the bar's centre, for its count
	Lo, Hi     float64
	Count      int
	Fast       bool // the bin is at or above the baseline
}

type histTick struct {
	X     float64
	Label string
}

// Plot box, in SVG user units.
const (
	histW      = 360
	histH      = 130
	histLeft   = 28
	histRight  = 12
	histTop    = 12
	histBottom = 28 // room for the tick labels
	maxBins    = 10
)

// binSteps are the bin widths tried, smallest first: the first that covers the range in at
// most maxBins bins wins.
var binSteps = []float64{0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 25, 50, 100, 1000, 1e4, 1e5, 1e6}

// newHistogram bins the ratios; the range always includes 1 so the baseline shows. Nil when
// there are no values.
func newHistogram(values []float64) *histogram {
	if len(values) == 0 {
		return nil
	}
	lo, hi := 1.0, 1.0
	for _, v := range values {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	var step, start float64
	var bins int
	for _, step = range binSteps {
		start = math.Floor(lo/step+1e-9) * step
		bins = int(math.Floor((hi-start)/step+1e-9)) + 1 // hi falls in the last bin
		if bins <= maxBins {
			break
		}
	}
	counts := make([]int, bins)
	for _, v := range values {
		i := int(math.Floor((v-start)/step + 1e-9))
		counts[min(max(i, 0), bins-1)]++
	}
	h := &histogram{Width: histW, Height: histH, Left: histLeft, Right: histW - histRight, Top: histTop, Bottom: histH - histBottom, N: len(values)}
	for _, c := range counts {
		h.MaxCount = max(h.MaxCount, c)
	}
	plotW := float64(histW - histLeft - histRight)
	plotH := h.Bottom - h.Top
	bw := plotW / float64(bins)
	xOf := func(v float64) float64 { return histLeft + (v-start)/step*bw }
	for i, c := range counts {
		b := histBar{Lo: start + float64(i)*step, Hi: start + float64(i+1)*step, Count: c}
		b.X, b.W = round1(histLeft+float64(i)*bw+1), round1(bw-2)
		b.CX = round1(b.X + b.W/2)
		b.H = round1(float64(c) / float64(h.MaxCount) * plotH)
		b.Y = round1(h.Bottom - b.H)
		b.Fast = b.Lo >= 1-1e-9
		h.Bars = append(h.Bars, b)
	}
	h.BaselineX = round1(xOf(1))
	every := 1
	if bins > 6 {
		every = 2
	}
	for i := 0; i <= bins; i += every {
		v := start + float64(i)*step
		h.Ticks = append(h.Ticks, histTick{X: round1(xOf(v)), Label: formatRatio(v)})
	}
	return h
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// formatRatio prints a ratio or a bin edge with as few digits as it needs.
func formatRatio(v float64) string {
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}
