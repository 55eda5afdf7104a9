package checker

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// TextOptions shape the readable report.
type TextOptions struct {
	Color   bool // ANSI colours; false: plain text, no escape codes
	Verbose bool // every case row, every stage detail, the run directory
}

// WriteText writes a readable report of each check and, for more than one, a closing count.
func WriteText(w io.Writer, reports []*Report, opt TextOptions) error {
	tw := &textWriter{w: w, opt: opt}
	for i, r := range reports {
		if i > 0 {
			tw.printf("\n")
		}
		tw.report(r)
	}
	if len(reports) > 1 {
		counts := map[string]int{}
		for _, r := range reports {
			counts[r.Verdict]++
		}
		var parts []string
		for _, v := range []string{Passed, Failed, Refused, Errored, Inconclusive} {
			if counts[v] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
			}
		}
		tw.printf("\n%d checks: %s\n", len(reports), strings.Join(parts, ", "))
	}
	return tw.err
}

type textWriter struct {
	w   io.Writer
	opt TextOptions
	err error
}

// cell is one table cell; color is applied after alignment so escape codes take no width.
type cell struct{ s, color string }

func plain(s string) cell { return cell{s: s} }

// table writes rows aligned in columns, two spaces apart, indented by two.
func (t *textWriter) table(rows [][]cell) {
	var widths []int
	for _, row := range rows {
		for i, cl := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(cl.s))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for i, cl := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(t.paint(cl.color, cl.s))
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len(cl.s)))
			}
		}
		t.printf("%s\n", strings.TrimRight(b.String(), " "))
	}
}

func (t *textWriter) printf(format string, args ...any) {
	if t.err != nil {
		return
	}
	s := fmt.Sprintf(format, args...)
	if !t.opt.Color {
		s = asciiPunct.Replace(s)
	}
	_, t.err = io.WriteString(t.w, s)
}

// asciiPunct spells the typographic characters compilers and drivers print in ASCII, for
// plain output.
var asciiPunct = strings.NewReplacer("\u2018", "'", "\u2019", "'", "\u201c", "\"", "\u201d", "\"",
	"\u2013", "-", "\u2014", "--", "\u2026", "...", "\u00b5", "u", "\u00d7", "x", "\u2265", ">=", "\u2264", "<=")

const (
	ansiReset   = "\x1b[0m"
	ansiBold    = "\x1b[1m"
	ansiRed     = "\x1b[31m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiMagenta = "\x1b[35m"
	ansiDim     = "\x1b[2m"
)

func (t *textWriter) paint(code, s string) string {
	if !t.opt.Color || code == "" {
		return s
	}
	return code + s + ansiReset
}

func verdictColor(v string) string {
	switch v {
	case Passed, StatusOK:
		return ansiGreen
	case Failed:
		return ansiRed
	case Refused, Inconclusive:
		return ansiYellow
	case Errored:
		return ansiMagenta
	}
	return ""
}

func (t *textWriter) report(r *Report) {
	verdict := strings.ToUpper(r.Verdict)
	if r.Verdict == Errored {
		verdict = "ERROR"
	}
	target := ""
	if r.Target != "" && r.Target != "yours" {
		target = " [" + r.Target + "]"
	}
	t.printf("%s %s%s: %s\n", t.paint(ansiBold+verdictColor(r.Verdict), fmt.Sprintf("%-12s", verdict)),
		t.paint(ansiBold, r.Exercise), target, oneLine(r.Headline))
	if r.Title != "" && t.opt.Verbose {
		t.printf("  %s\n", r.Title)
	}

	// Stages.
	var rows [][]cell
	for _, s := range r.Stages {
		status := s.Status
		if status == StatusFailed && r.Verdict == Inconclusive && s.Name == r.Stage {
			status = StatusInconclusive
		}
		dur := ""
		if s.Status != StatusSkipped && s.Duration > 0 {
			dur = fmtDuration(time.Duration(s.Duration))
		}
		detail := s.Detail
		if s.Status == StatusSkipped && detail == "" {
			detail = "not reached"
		}
		if s.Name == r.Stage && s.Status != StatusOK && !t.opt.Verbose {
			detail = "" // the headline said it
		}
		rows = append(rows, []cell{plain(s.Name), {status, verdictColor(status)}, plain(dur), plain(oneLine(detail))})
	}
	t.table(rows)

	if r.Build != nil && r.Build.Log != "" && t.opt.Verbose {
		t.printf("  build log: %s\n", r.Build.Log)
	}
	if len(r.Policy) > 0 {
		t.printf("\n  %s:\n", PolicyTitle(r.Policy))
		for _, v := range r.Policy {
			t.printf("    %s in %s", v.Name(), v.File)
			if v.Why != "" {
				t.printf(": %s", v.Why)
			}
			t.printf("\n")
		}
	}
	if len(r.Cases) > 0 && (t.opt.Verbose || r.Stage == StageCorrectness || r.Verdict == Passed) {
		t.cases(r)
	}
	if r.Perf != nil {
		t.perf(r.Perf)
	}
	if len(r.Values) > 0 {
		t.printf("\n  reported values:\n")
		for _, v := range r.Values {
			t.printf("    rank %d: %s = %s %s\n", v.Rank, v.Name, fmtFloat(float64(v.Value)), v.Unit)
		}
	}
	if r.Message != "" && r.Verdict != Passed || (r.Verdict == Passed && r.Message != "" && t.opt.Verbose) {
		t.printf("\n")
		for _, line := range strings.Split(r.Message, "\n") {
			t.printf("  %s\n", line)
		}
	}
	if len(r.Notes) > 0 {
		t.printf("\n")
		for _, n := range r.Notes {
			t.printf("  note: %s\n", oneLine(n))
		}
	}
	if s := faultSentence(r); s != "" {
		t.printf("\n  %s\n", t.paint(ansiBold, s))
	}
	if r.Run != nil && (t.opt.Verbose || r.Verdict == Errored) {
		t.printf("  run directory: %s (seed %s)\n", r.Run.Dir, r.Run.Seed)
	}
}

// faultSentence says whose doing a failure is.
func faultSentence(r *Report) string {
	switch r.Verdict {
	case Passed:
		return ""
	case Inconclusive:
		return "No verdict: the timings were too noisy to judge. Nothing is known to be wrong with your code."
	}
	switch r.Fault {
	case FaultYou:
		return fmt.Sprintf("The problem is in your code (stage: %s).", r.Stage)
	case FaultMachine:
		return "This machine cannot run this exercise; nothing is wrong with your code."
	case FaultRunner:
		return "This is a bug in the runner or the course, not in your code. Please report it with the run directory below."
	}
	return ""
}

func (t *textWriter) cases(r *Report) {
	t.printf("\n")
	rows := [][]cell{{plain("case"), plain("n"), plain("rank"), plain("result"), plain("wrong"), plain("unwritten"), plain("guard hits"), plain("max abs err"), plain("max rel err")}}
	// Passing rows of a case are grouped into one (unless verbose), where the first of them is.
	type group struct {
		ranks    []int
		abs, rel float64
	}
	groups := map[string]*group{}
	for _, cr := range r.Cases {
		if cr.OK && !t.opt.Verbose {
			g := groups[cr.Case]
			if g == nil {
				g = &group{}
				groups[cr.Case] = g
			}
			g.ranks = append(g.ranks, cr.Rank)
			g.abs = math.Max(g.abs, float64(cr.MaxAbsErr))
			g.rel = math.Max(g.rel, float64(cr.MaxRelErr))
		}
	}
	shown := map[string]bool{}
	for _, cr := range r.Cases {
		if cr.OK && !t.opt.Verbose {
			if shown[cr.Case] {
				continue
			}
			shown[cr.Case] = true
			g := groups[cr.Case]
			rows = append(rows, []cell{plain(cr.Case), plain(fmt.Sprint(cr.N)), plain(RankRange(g.ranks)), {"ok", ansiGreen}, plain("0"), plain("0"), plain("0"), plain(fmtFloat(g.abs)), plain(fmtFloat(g.rel))})
			continue
		}
		result, color := "ok", ansiGreen
		switch {
		case cr.Missing:
			result, color = "missing", ansiMagenta
		case !cr.OK:
			result, color = "FAIL", ansiRed
		}
		rows = append(rows, []cell{plain(cr.Case), plain(fmt.Sprint(cr.N)), plain(fmt.Sprint(cr.Rank)), {result, color},
			plain(fmt.Sprint(cr.Bad)), plain(fmt.Sprint(cr.Unwritten)), plain(fmt.Sprint(cr.GuardHits)), plain(fmtFloat(float64(cr.MaxAbsErr))), plain(fmtFloat(float64(cr.MaxRelErr)))})
	}
	t.table(rows)
}

// RankRange prints ranks as "0-3" when they are contiguous, else "0,2,3".
func RankRange(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprint(rs[0])
	}
	contiguous := true
	for i := 1; i < len(rs); i++ {
		if rs[i] != rs[i-1]+1 {
			contiguous = false
		}
	}
	if contiguous {
		return fmt.Sprintf("%d-%d", rs[0], rs[len(rs)-1])
	}
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprint(r)
	}
	return strings.Join(s, ",")
}

func (t *textWriter) perf(p *PerfResult) {
	base := p.Baseline
	if base == "" {
		base = "baseline"
	}
	metric := p.Metric
	if metric == "time" {
		metric = "time per operation, lower is better"
	} else {
		metric += ", higher is better"
	}
	t.printf("\n  timing (%s; baseline: %s; %d run(s), %d samples):\n", metric, base, p.Runs, p.Samples)
	rows := [][]cell{{plain("case"), plain("yours"), plain("baseline"), plain("ratio [95% CI]"), plain("target"), plain("result")}}
	for _, pc := range p.Cases {
		target, result := plain("-"), plain("-")
		if pc.Case == p.Case {
			target = plain(">= " + fmtRatio(p.Target))
			result = plain(p.Outcome)
			switch p.Outcome {
			case Passed:
				result = cell{"pass", ansiGreen}
			case Failed:
				result = cell{"FAIL", ansiRed}
			case "suspect", "unseen":
				result = cell{"SUSPECT", ansiRed}
			case Inconclusive, "undecided":
				result = cell{p.Outcome, ansiYellow}
			}
		}
		rows = append(rows, []cell{plain(pc.Case), plain(fmtMetric(float64(pc.Yours), p.Unit)), plain(fmtMetric(float64(pc.Baseline), p.Unit)),
			plain(fmt.Sprintf("%s [%s, %s]", fmtRatio(float64(pc.Ratio)), fmtRatio(float64(pc.CILow)), fmtRatio(float64(pc.CIHigh)))), target, result})
	}
	t.table(rows)
	if p.Suspect && p.SuspectWhy != "" {
		t.printf("  suspect: %s\n", p.SuspectWhy)
	}
	if p.Inconclusive != "" {
		t.printf("  inconclusive: %s\n", p.Inconclusive)
	}
}

func fmtFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	case v == 0:
		return "0"
	}
	return fmt.Sprintf("%.3g", v)
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// fmtDuration prints a duration short: "850ms", "1.2s", "2m03s".
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dus", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	m := int(d.Minutes())
	return fmt.Sprintf("%dm%02ds", m, int(d.Seconds())-60*m)
}

// cleanOutput replaces control characters (escape sequences a program printed) so a report
// never drives the terminal.
func cleanOutput(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}
