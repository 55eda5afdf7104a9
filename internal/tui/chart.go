package tui

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/checker"
)

// series is what the chart draws for one timed case.
type series struct {
	label           string
	yours, baseline float64
}

// chartData picks what to plot: the metric itself when it is a bandwidth; for a time metric,
// the bandwidth the times give (bytes moved over time) when the sizes are known, else the times.
func chartData(p *checker.PerfResult) (title, unit string, data []series) {
	cases := append([]checker.PerfCase(nil), p.Cases...)
	sized := true
	for _, c := range cases {
		if float64(c.Bytes) <= 0 {
			sized = false
		}
	}
	if sized {
		sort.SliceStable(cases, func(i, j int) bool { return cases[i].Bytes < cases[j].Bytes })
	}
	label := func(c checker.PerfCase) string {
		if c.Bytes > 0 {
			return fmtBytes(float64(c.Bytes))
		}
		return c.Case
	}
	switch {
	case p.Metric != "time":
		title = fmt.Sprintf("Bandwidth (%s) by message size, yours against the baseline; higher is better", p.Metric)
		unit = p.Unit
		for _, c := range cases {
			data = append(data, series{label(c), float64(c.Yours), float64(c.Baseline)})
		}
	case sized:
		title = "Bandwidth (bytes / time) by size, yours against the baseline; higher is better"
		unit = "GB/s"
		for _, c := range cases {
			data = append(data, series{label(c), float64(c.Bytes) / float64(c.YoursUS) / 1e3, float64(c.Bytes) / float64(c.BaselineUS) / 1e3})
		}
	default:
		title = "Time per call by case, yours against the baseline; lower is better"
		unit = p.Unit
		for _, c := range cases {
			data = append(data, series{label(c), float64(c.Yours), float64(c.Baseline)})
		}
	}
	return title, unit, data
}

func usable(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// chart draws horizontal bars, two per case: yours (solid) and the baseline (shaded).
func chart(p *checker.PerfResult, w int, st styles) []string {
	title, unit, data := chartData(p)
	top := 0.0
	labelW := 0
	valueW := 0
	for _, d := range data {
		for _, v := range []float64{d.yours, d.baseline} {
			if usable(v) {
				top = math.Max(top, v)
			}
			valueW = max(valueW, len(fmtMetric(v, unit)))
		}
		labelW = max(labelW, len(d.label))
	}
	lines := wrap(st.bold.Render("Chart")+" · "+title, w, 0)
	if top <= 0 {
		return append(lines, "  (no usable figures to draw)")
	}
	barW := min(60, w-2-labelW-2-len("baseline")-2-1-valueW)
	if barW < 8 {
		return append(lines, "  (too narrow to draw)")
	}
	for _, d := range data {
		for i, who := range []string{"yours", "baseline"} {
			v := d.yours
			if i == 1 {
				v = d.baseline
			}
			label := ""
			if i == 0 {
				label = d.label
			}
			b := ""
			if usable(v) {
				if i == 0 {
					b = st.info.Render(solidBar(v/top, barW))
				} else {
					b = st.dim.Render(shadeBar(v/top, barW))
				}
			}
			lines = append(lines, fmt.Sprintf("  %s  %s  %s %s", padRight(label, labelW), padRight(who, len("baseline")), padRight(b, barW), fmtMetric(v, unit)))
		}
	}
	return lines
}

// solidBar is a bar of fraction f of w cells, in eighths of a cell.
func solidBar(f float64, w int) string {
	eighths := int(math.Round(math.Max(0, math.Min(1, f)) * float64(w*8)))
	if eighths == 0 && f > 0 {
		eighths = 1
	}
	part := []string{"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"}
	return strings.Repeat("█", eighths/8) + part[eighths%8]
}

// shadeBar is a bar of fraction f of w whole cells.
func shadeBar(f float64, w int) string {
	n := int(math.Round(math.Max(0, math.Min(1, f)) * float64(w)))
	if n == 0 && f > 0 {
		n = 1
	}
	return strings.Repeat("▒", n)
}
