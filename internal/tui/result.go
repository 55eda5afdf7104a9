package tui

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// resultView shows a finished check: the verdict stage by stage, the correctness and timing
// tables, a chart of the timed sizes, the prediction against the measurement, and whose fault
// a failure is.
type resultView struct {
	s    *session
	w, h int
	e    *course.Exercise
	r    *checker.Report
	vp   viewport.Model
}

func newResultView(s *session) *resultView {
	vp := viewport.New(0, 0)
	vp.KeyMap = scrollKeys()
	return &resultView{s: s, vp: vp}
}

func (v *resultView) SetSize(w, h int) {
	v.w, v.h = w, h
	v.vp.Width, v.vp.Height = w, max(1, h-1)
	if v.r != nil {
		v.fill()
	}
}

func (v *resultView) open(e *course.Exercise, r *checker.Report) {
	v.e, v.r = e, r
	v.fill()
	v.vp.GotoTop()
}

func (v *resultView) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	switch {
	case key.Matches(k, keys.Back):
		return msgCmd(backMsg{})
	case key.Matches(k, keys.Check):
		return msgCmd(recheckMsg{})
	case key.Matches(k, keys.Edit), key.Matches(k, keys.Watch), key.Matches(k, keys.Hint):
		// These act on the exercise: hand them to its view.
		return msgCmd(exerciseKeyMsg{k})
	case key.Matches(k, keys.Solution):
		if !solutionOpen(v.s.exerciseProgress(v.e).Status) {
			v.s.flashInfo("The solution opens once your files pass the check.")
			return nil
		}
		return msgCmd(openSolutionMsg{e: v.e})
	case key.Matches(k, keys.Top):
		v.vp.GotoTop()
	case key.Matches(k, keys.Bottom):
		v.vp.GotoBottom()
	default:
		var cmd tea.Cmd
		v.vp, cmd = v.vp.Update(msg)
		return cmd
	}
	return nil
}

func (v *resultView) keyMap() keyMap {
	short := []key.Binding{withHelp(keys.Check, "c", "check again"), keys.Edit, keys.Watch}
	if v.e != nil && solutionOpen(v.s.exerciseProgress(v.e).Status) {
		short = append(short, keys.Solution)
	}
	short = append(short, keys.Down, keys.Back, keys.Help)
	return keyMap{
		short: short,
		full: [][]key.Binding{
			{withHelp(keys.Check, "c", "check again"), keys.Edit, keys.Watch, keys.Solution},
			{keys.Up, keys.Down, keys.PageDown, keys.PageUp},
			{keys.Back, keys.Interrupt},
		},
	}
}

func (v *resultView) View() string {
	st := v.s.st
	r := v.r
	if r == nil {
		return ""
	}
	verdict := strings.ToUpper(r.Verdict)
	if r.Verdict == checker.Errored {
		verdict = "ERROR"
	}
	left := st.verdict(r.Verdict).Bold(true).Render(verdict) + "  " + st.bold.Render(r.Exercise)
	right := st.dim.Render(fmtDur(time.Duration(r.Duration)))
	if !v.vp.AtBottom() {
		right = st.dim.Render("↓ more · ") + right
	}
	return frame(rightAlign(left, right, v.w)+"\n"+v.vp.View(), v.w, v.h)
}

// fill lays the report out for the current width.
func (v *resultView) fill() {
	st := v.s.st
	r := v.r
	w := v.w
	var out []string
	add := func(lines ...string) { out = append(out, lines...) }

	add(wrap(r.Headline, w, 0)...)
	if v.e != nil && v.e.Perf != nil {
		if line := predictionLine(v.s.exerciseProgress(v.e), r); line != "" {
			add(wrap(st.bold.Render("Predict, then measure: ")+line, w, 0)...)
		}
	}
	if f := faultLine(r); f != "" {
		add(wrap(st.bold.Render(f), w, 0)...)
	}
	add("")

	// Stages.
	add(st.bold.Render("Stages"))
	var rows [][]string
	for _, s := range r.Stages {
		status := s.Status
		dur := ""
		if s.Status != checker.StatusSkipped && time.Duration(s.Duration) >= time.Millisecond {
			dur = fmtDur(time.Duration(s.Duration))
		}
		detail := s.Detail
		if s.Status == checker.StatusSkipped && detail == "" {
			detail = "not reached"
		}
		rows = append(rows, []string{stageMark(status), s.Name, status, dur, oneLine(detail)})
	}
	add(table(rows, nil, func(row, col int, cell string) string {
		if col == 0 || col == 2 {
			return st.verdict(rows[row][2]).Render(cell)
		}
		return cell
	}, w, 2)...)
	if r.Build != nil && r.Build.Cached {
		add(st.dim.Render("  the build came from the cache"))
	}

	// Compiler messages in the learner's files.
	if r.Build != nil {
		var diags []string
		for _, d := range r.Build.Diagnostics {
			if d.Learner {
				diags = append(diags, fmt.Sprintf("  %s:%d: %s: %s", d.File, d.Line, d.Severity, d.Msg))
			}
		}
		if len(diags) > 0 {
			add("", st.bold.Render("Compiler messages in your files"))
			for _, d := range diags {
				add(wrap(d, w, 0)...)
			}
		}
	}

	if len(r.Policy) > 0 {
		title := checker.PolicyTitle(r.Policy)
		add("", st.bold.Render(strings.ToUpper(title[:1])+title[1:]))
		for _, p := range r.Policy {
			line := fmt.Sprintf("  %s in %s", p.Name(), p.File)
			if p.Why != "" {
				line += ": " + p.Why
			}
			add(wrap(line, w, 0)...)
		}
	}

	if len(r.Cases) > 0 {
		add("", st.bold.Render("Correctness"))
		add(v.casesTable(w)...)
	}

	if r.Perf != nil && len(r.Perf.Cases) > 0 {
		add("")
		add(v.timing(w)...)
		if len(r.Perf.Cases) >= 2 {
			add("")
			add(chart(r.Perf, w, st)...)
		}
	}
	if len(r.Values) > 0 {
		add("", st.bold.Render("Values your code reported"))
		for _, val := range r.Values {
			add(fmt.Sprintf("  rank %d: %s = %s %s", val.Rank, val.Name, fmtNum(float64(val.Value)), val.Unit))
		}
	}
	if r.Message != "" && (r.Verdict != checker.Passed || r.Perf != nil) {
		add("")
		for _, l := range strings.Split(r.Message, "\n") {
			add(wrap(cleanLine(l), w, 2)...)
		}
	}
	for _, n := range r.Notes {
		add("")
		add(wrap("note: "+n, w, 2)...)
	}
	if r.Run != nil && r.Run.Dir != "" && r.Verdict != checker.Passed {
		add(st.dim.Render("  run directory: " + v.s.showPath(r.Run.Dir)))
	}
	v.vp.SetContent(strings.Join(out, "\n"))
}

// casesTable groups the cases that passed on every rank and lists the failing rows.
func (v *resultView) casesTable(w int) []string {
	st := v.s.st
	r := v.r
	head := []string{"case", "n", "rank", "result", "wrong", "unwritten", "guard", "max abs err"}
	var rows [][]string
	type group struct {
		ranks []int
		n     int64
		abs   float64
	}
	var order []string
	groups := map[string]*group{}
	bad := 0
	for _, c := range r.Cases {
		if c.OK {
			g := groups[c.Case]
			if g == nil {
				g = &group{n: c.N}
				groups[c.Case] = g
				order = append(order, c.Case)
			}
			g.ranks = append(g.ranks, c.Rank)
			g.abs = math.Max(g.abs, float64(c.MaxAbsErr))
			continue
		}
		bad++
		if bad > 12 {
			continue
		}
		result := "FAIL"
		if c.Missing {
			result = "missing"
		}
		rows = append(rows, []string{c.Case, fmt.Sprint(c.N), fmt.Sprint(c.Rank), result,
			fmt.Sprint(c.Bad), fmt.Sprint(c.Unwritten), fmt.Sprint(c.GuardHits), fmtNum(float64(c.MaxAbsErr))})
	}
	for _, name := range order {
		g := groups[name]
		rows = append(rows, []string{name, fmt.Sprint(g.n), checker.RankRange(g.ranks), "ok", "0", "0", "0", fmtNum(g.abs)})
	}
	lines := table(rows, head, func(row, col int, cell string) string {
		if col == 3 {
			if rows[row][3] == "ok" {
				return st.ok.Render(cell)
			}
			return st.bad.Render(cell)
		}
		return cell
	}, w, 2)
	if bad > 12 {
		lines = append(lines, st.dim.Render(fmt.Sprintf("  … and %d more failing rows", bad-12)))
	}
	// The first wrong elements of the first failing case.
	for _, c := range r.Cases {
		if !c.OK && len(c.First) > 0 {
			lines = append(lines, fmt.Sprintf("  first wrong elements of case %s on rank %d:", c.Case, c.Rank))
			for i, m := range c.First {
				if i == 3 {
					break
				}
				lines = append(lines, fmt.Sprintf("    [%d] got %s, want %s", m.I, m.Got, m.Want))
			}
			break
		}
		if !c.OK && c.Msg != "" {
			lines = append(lines, wrap(fmt.Sprintf("case %s on rank %d: %s", c.Case, c.Rank, c.Msg), w, 2)...)
			break
		}
	}
	return lines
}

// timing is the table of timed cases: yours against the baseline.
func (v *resultView) timing(w int) []string {
	st := v.s.st
	p := v.r.Perf
	what := p.Metric + ", higher is better"
	if p.Metric == "time" {
		what = "time per call, lower is better"
	}
	base := p.Baseline
	if base == "" {
		base = "baseline"
	}
	lines := wrap(st.bold.Render("Timing")+fmt.Sprintf(" (%s; baseline: %s; %s, %d samples)", what, base, pluralize(p.Runs, "run", "runs"), p.Samples), w, 0)
	head := []string{"case", "size", "yours", "baseline", "ratio", "95% CI", "target", "result"}
	var rows [][]string
	for _, c := range p.Cases {
		target, result := "", ""
		if c.Case == p.Case {
			target = "≥ " + fmtRatio(p.Target)
			result = outcomeWord(p.Outcome)
		}
		size := ""
		if c.Bytes > 0 {
			size = fmtBytes(float64(c.Bytes))
		}
		rows = append(rows, []string{c.Case, size, fmtMetric(float64(c.Yours), p.Unit), fmtMetric(float64(c.Baseline), p.Unit),
			fmtRatio(float64(c.Ratio)), "[" + fmtRatio(float64(c.CILow)) + ", " + fmtRatio(float64(c.CIHigh)) + "]", target, result})
	}
	lines = append(lines, table(rows, head, func(row, col int, cell string) string {
		if col == 7 && rows[row][7] != "" {
			return st.verdict(p.Outcome).Render(cell)
		}
		return cell
	}, w, 2)...)
	if p.Suspect && p.SuspectWhy != "" {
		lines = append(lines, wrap("suspect: "+p.SuspectWhy, w, 2)...)
	}
	if p.Inconclusive != "" {
		lines = append(lines, wrap("inconclusive: "+p.Inconclusive, w, 2)...)
	}
	return lines
}

func outcomeWord(o string) string {
	switch o {
	case checker.Passed:
		return "pass"
	case checker.Failed:
		return "FAIL"
	case "suspect", "unseen":
		return "SUSPECT"
	}
	return o
}

func fmtMetric(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "?"
	case math.Abs(v) >= 1 && !math.IsInf(v, 0):
		return fmt.Sprintf("%.1f %s", v, unit)
	}
	return fmtNum(v) + " " + unit
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmtNum(v)
	}
	return fmt.Sprintf("%.2f", v)
}

// faultLine says whose doing the outcome is.
func faultLine(r *checker.Report) string {
	switch r.Verdict {
	case checker.Passed:
		return "Passed: your code is correct" + map[bool]string{true: " and fast enough.", false: "."}[r.Perf != nil && r.Perf.Outcome == checker.Passed]
	case checker.Inconclusive:
		return "No verdict: the timings were too noisy to judge. Nothing is known to be wrong with your code."
	}
	switch r.Fault {
	case checker.FaultYou:
		return fmt.Sprintf("Whose fault: your code (it failed at the %s stage).", r.Stage)
	case checker.FaultMachine:
		return "Whose fault: this machine, which cannot run this exercise. Your code is not at fault."
	case checker.FaultRunner:
		return "Whose fault: mgpu-learn or the course, not your code. Please report it with the run directory."
	}
	return ""
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// table lays out plain-text cells in columns two spaces apart, indented; style, when set, is
// applied to each cell after padding so escapes do not upset the widths. Columns that do not
// fit in w are dropped from the right.
func table(rows [][]string, head []string, style func(row, col int, cell string) string, w, indent int) []string {
	all := rows
	if head != nil {
		all = append([][]string{head}, rows...)
	}
	ncol := 0
	for _, r := range all {
		ncol = max(ncol, len(r))
	}
	widths := make([]int, ncol)
	for _, r := range all {
		for i, c := range r {
			widths[i] = max(widths[i], ansi.StringWidth(c))
		}
	}
	// Drop trailing columns that do not fit (keep at least two).
	total := indent
	keep := 0
	for i, cw := range widths {
		if i >= 2 && total+cw > w {
			break
		}
		total += cw + 2
		keep = i + 1
	}
	pad := strings.Repeat(" ", indent)
	var out []string
	for ri, r := range all {
		var b strings.Builder
		b.WriteString(pad)
		for i := 0; i < keep && i < len(r); i++ {
			cell := r[i]
			if i < keep-1 {
				cell = padRight(cell, widths[i])
			}
			if head != nil && ri == 0 {
				b.WriteString(cell)
			} else if style != nil {
				row := ri
				if head != nil {
					row--
				}
				b.WriteString(style(row, i, cell))
			} else {
				b.WriteString(cell)
			}
			if i < keep-1 {
				b.WriteString("  ")
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}
