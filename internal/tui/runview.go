package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
)

// runView shows a check while it runs: the stages, the build output, one live row per rank
// and the tail of one rank's output.
type runView struct {
	s         *session
	w, h      int
	st        runState
	canceling bool
	watch     bool
	selected  int // the rank whose output is shown
	follow    bool
}

func newRunView(s *session) *runView { return &runView{s: s, follow: true} }

func (v *runView) SetSize(w, h int) { v.w, v.h = w, h }

// reset starts the view for a new check.
func (v *runView) reset(st runState, watch bool) {
	v.st, v.canceling, v.watch, v.selected, v.follow = st, false, watch, 0, true
}

// set takes a fresh copy of the check's state.
func (v *runView) set(st runState) {
	v.st = st
	if v.follow {
		// Show the first rank that went wrong, else the first still running, else rank 0.
		v.selected = 0
		running := -1
		for _, r := range st.ranks {
			if r.state == "running" && running < 0 {
				running = r.rank
			}
			if r.state != "running" && r.state != "done" && r.state != "building" {
				running = r.rank
				break
			}
		}
		v.selected = max(0, running)
	}
	v.selected = min(v.selected, max(0, len(st.ranks)-1))
}

func (v *runView) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	switch {
	case key.Matches(k, keys.Cancel):
		return msgCmd(cancelCheckMsg{})
	case key.Matches(k, keys.Up):
		v.follow = false
		v.selected = max(0, v.selected-1)
	case key.Matches(k, keys.Down):
		v.follow = false
		v.selected = min(max(0, len(v.st.ranks)-1), v.selected+1)
	}
	return nil
}

func (v *runView) keyMap() keyMap {
	sel := withHelp(keys.Down, "↑/↓", "rank output")
	return keyMap{
		short: []key.Binding{keys.Cancel, sel, keys.Help},
		full:  [][]key.Binding{{keys.Cancel}, {keys.Up, keys.Down}},
	}
}

// stageMark is a stage status as a symbol.
func stageMark(status string) string {
	switch status {
	case "running":
		return "▸"
	case "ok":
		return "✓"
	case "failed", "error":
		return "✗"
	case "skipped":
		return "-"
	case "inconclusive":
		return "?"
	}
	return "·"
}

func (v *runView) View() string {
	st := v.s.st
	now := v.s.now()
	var lines []string
	title := "Checking " + st.bold.Render(v.st.exercise) + " (your files)"
	if v.watch {
		title += st.dim.Render(" · started by a save")
	}
	right := fmtDur(now.Sub(v.st.started))
	if v.st.run > 1 {
		right = fmt.Sprintf("run %d · %s", v.st.run, right)
	}
	if v.canceling {
		right = st.warn.Render("canceling… ") + right
	}
	lines = append(lines, rightAlign(title, right, v.w))

	// Stages on one line (two when narrow).
	var cells []string
	for _, s := range v.st.stages {
		cell := stageMark(s.status) + " " + s.name
		switch {
		case s.status == "running":
			cell += " " + fmtDur(now.Sub(s.began))
			cell = st.warn.Render(cell)
		case s.status != "" && s.dur >= 100*time.Millisecond:
			cell = st.verdict(s.status).Render(cell + " " + fmtDur(s.dur))
		case s.status != "":
			cell = st.verdict(s.status).Render(cell)
		default:
			cell = st.dim.Render(cell)
		}
		cells = append(cells, cell)
	}
	lines = append(lines, flow(cells, "   ", v.w, 2)...)
	lines = append(lines, "")

	// Build output: all of it while building, the last lines after.
	building := false
	for _, s := range v.st.stages {
		if s.name == "build" && s.status == "running" {
			building = true
		}
	}
	if v.st.buildN > 0 || building {
		keep := 3
		if building || v.st.run == 0 {
			keep = max(3, v.h-len(lines)-len(v.st.ranks)-6)
		}
		head := fmt.Sprintf("build output (%s)", pluralize(v.st.buildN, "line", "lines"))
		if v.st.buildN == 0 {
			head = "build output: none yet"
		}
		lines = append(lines, st.bold.Render(head))
		from := max(0, len(v.st.build)-keep)
		for _, l := range v.st.build[from:] {
			lines = append(lines, "  "+l)
		}
		lines = append(lines, "")
	}

	// One row per rank.
	if len(v.st.ranks) > 0 {
		lines = append(lines, st.bold.Render(fmt.Sprintf("%-6s %-10s %8s  %s", "rank", "state", "elapsed", "last output")))
		shown := v.st.ranks
		maxRows := max(2, v.h-len(lines)-4)
		if len(shown) > maxRows {
			// Keep the selected rank in view.
			first := max(0, min(v.selected-maxRows/2, len(shown)-maxRows))
			shown = shown[first : first+maxRows]
		}
		for _, r := range shown {
			el := ""
			if !r.began.IsZero() {
				end := now
				if !r.ended.IsZero() {
					end = r.ended
				}
				el = fmtDur(end.Sub(r.began))
			}
			state := r.state
			switch {
			case r.signal != "":
				state += " " + r.signal
			case r.state == "failed":
				state += fmt.Sprintf(" (%d)", r.exit)
			}
			last := ""
			if n := len(r.tail); n > 0 {
				last = r.tail[n-1]
			}
			mark := "  "
			if r.rank == v.selected {
				mark = st.sel.Render("▸ ")
			}
			row := fmt.Sprintf("%s%-4d %s %8s  %s", mark, r.rank, st.verdict(r.state).Render(padRight(state, 10)), el, last)
			lines = append(lines, fit(row, v.w))
		}
		lines = append(lines, "")
		// The selected rank's tail fills the rest.
		if v.selected < len(v.st.ranks) {
			r := v.st.ranks[v.selected]
			room := v.h - len(lines) - 1
			if room > 0 {
				head := fmt.Sprintf("rank %d output (%s)", r.rank, pluralize(r.lines, "line", "lines"))
				if r.lines == 0 {
					head = fmt.Sprintf("rank %d output: none yet", r.rank)
				}
				lines = append(lines, st.bold.Render(head))
				from := max(0, len(r.tail)-room)
				for _, l := range r.tail[from:] {
					lines = append(lines, "  "+l)
				}
			}
		}
	} else if v.st.run == 0 {
		lines = append(lines, st.dim.Render("The ranks start once the program is built."))
	}
	return frame(strings.Join(lines, "\n"), v.w, v.h)
}

// flow lays out cells separated by sep on lines of at most w columns, using at most maxLines
// lines (the last one cut).
func flow(cells []string, sep string, w, maxLines int) []string {
	var lines []string
	cur := ""
	for _, c := range cells {
		switch {
		case cur == "":
			cur = c
		case ansi.StringWidth(cur+sep+c) <= w:
			cur += sep + c
		default:
			lines = append(lines, cur)
			cur = c
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	if len(lines) > maxLines {
		lines = lines[:maxLines]
	}
	return lines
}
