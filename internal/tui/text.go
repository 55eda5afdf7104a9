package tui

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// fit cuts a line (which may hold escape sequences) to w columns, ending it with "…" when cut.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// frame makes text exactly h lines, each cut to w columns.
func frame(s string, w, h int) string {
	if h <= 0 {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = fit(l, w)
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// wrap word-wraps plain text at w columns, indenting every line by indent spaces.
func wrap(s string, w, indent int) []string {
	pad := strings.Repeat(" ", indent)
	var out []string
	for _, para := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if strings.TrimSpace(para) == "" {
			out = append(out, "")
			continue
		}
		for _, l := range strings.Split(ansi.Wrap(para, max(10, w-indent), " -/"), "\n") {
			out = append(out, pad+strings.TrimRight(l, " "))
		}
	}
	return out
}

// rightAlign puts right at the end of a w-column line that starts with left; when both do not
// fit, left is cut (right is the status, which must stay readable).
func rightAlign(left, right string, w int) string {
	rw := ansi.StringWidth(right)
	if rw+2 > w {
		return fit(left, w)
	}
	left = fit(left, w-rw-1)
	gap := w - ansi.StringWidth(left) - rw
	return left + strings.Repeat(" ", gap) + right
}

// padRight pads s with spaces to w columns (escape sequences do not count).
func padRight(s string, w int) string {
	if d := w - ansi.StringWidth(s); d > 0 {
		return s + strings.Repeat(" ", d)
	}
	return s
}

// showPath shortens p for display: the home folder becomes "~".
func (s *session) showPath(p string) string {
	if s.home != "" && s.home != "/" {
		if p == s.home {
			return "~"
		}
		if rel, err := filepath.Rel(s.home, p); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join("~", rel)
		}
	}
	return p
}

// fmtDur prints a duration short: "850ms", "1.2s", "2m03s".
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	m := int(d.Minutes())
	return fmt.Sprintf("%dm%02ds", m, int(d.Seconds())-60*m)
}

// fmtNum prints a figure with three significant digits (more for large values).
func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "?"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// fmtBytes prints a size in binary units: "4 KiB", "256 MiB".
func fmtBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if b == math.Trunc(b) {
		return fmt.Sprintf("%.0f %s", b, units[i])
	}
	return fmt.Sprintf("%.3g %s", b, units[i])
}

// cleanLine makes a line a program printed safe to draw: no control characters or escapes,
// tabs expanded, at most 400 characters.
func cleanLine(s string) string {
	s = ansi.Strip(s)
	s = strings.ReplaceAll(s, "\t", "    ")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
	if len(s) > 400 {
		s = strings.ToValidUTF8(s[:400], "")
	}
	return s
}

// pluralize returns "1 thing" or "n things".
func pluralize(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
