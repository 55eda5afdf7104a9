package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

// mapRow is one line of the course map: a module heading, a lesson or an exercise.
type mapRow struct {
	module   *course.Module
	lesson   *course.Lesson
	exercise *course.Exercise
}

func (r mapRow) selectable() bool { return r.lesson != nil || r.exercise != nil }

// mapView is the course map: every module with its progress, lessons and exercises.
type mapView struct {
	s      *session
	w, h   int
	rows   []mapRow
	cursor int // index into rows; always a selectable row
	offset int // first row shown
}

func newMapView(s *session) *mapView {
	m := &mapView{s: s}
	for _, mod := range s.course.Modules {
		m.rows = append(m.rows, mapRow{module: mod})
		for _, l := range mod.Lessons {
			m.rows = append(m.rows, mapRow{module: mod, lesson: l})
		}
		for _, e := range mod.Exercises {
			m.rows = append(m.rows, mapRow{module: mod, exercise: e})
		}
	}
	m.cursor = m.step(-1, 1)
	return m
}

func (m *mapView) SetSize(w, h int) {
	m.w, m.h = w, h
	m.offset = 0 // then as little scrolling as shows the cursor
	m.scroll()
}

// step returns the next selectable row from i in direction dir (i itself when none).
func (m *mapView) step(i, dir int) int {
	for j := i + dir; j >= 0 && j < len(m.rows); j += dir {
		if m.rows[j].selectable() {
			return j
		}
	}
	if i < 0 {
		return 0
	}
	return i
}

// selectExercise puts the cursor on e's row.
func (m *mapView) selectExercise(e *course.Exercise) {
	if e == nil {
		return
	}
	for i, r := range m.rows {
		if r.exercise == e {
			m.cursor = i
			m.scroll()
			return
		}
	}
}

// listHeight is the number of rows the list gets; the rest shows the selected row's details.
func (m *mapView) listHeight() int { return max(1, m.h-3) }

func (m *mapView) scroll() {
	h := m.listHeight()
	if m.cursor < m.offset {
		m.offset = m.cursor
		// Show the module heading above its first row.
		if m.offset > 0 && m.rows[m.offset-1].module != nil && !m.rows[m.offset-1].selectable() {
			m.offset--
		}
	}
	if m.cursor >= m.offset+h {
		m.offset = m.cursor - h + 1
	}
	m.offset = max(0, min(m.offset, len(m.rows)-h))
}

func (m *mapView) selected() mapRow {
	if m.cursor >= 0 && m.cursor < len(m.rows) {
		return m.rows[m.cursor]
	}
	return mapRow{}
}

func (m *mapView) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	switch {
	case key.Matches(k, keys.Up):
		m.cursor = m.step(m.cursor, -1)
	case key.Matches(k, keys.Down):
		m.cursor = m.step(m.cursor, 1)
	case key.Matches(k, keys.PageUp):
		for i := 0; i < m.listHeight()-1; i++ {
			m.cursor = m.step(m.cursor, -1)
		}
	case key.Matches(k, keys.PageDown):
		for i := 0; i < m.listHeight()-1; i++ {
			m.cursor = m.step(m.cursor, 1)
		}
	case key.Matches(k, keys.Top):
		m.cursor = m.step(-1, 1)
	case key.Matches(k, keys.Bottom):
		m.cursor = m.step(len(m.rows), -1)
	case key.Matches(k, keys.Open):
		r := m.selected()
		switch {
		case r.lesson != nil:
			return msgCmd(openLessonMsg{lesson: r.lesson})
		case r.exercise != nil:
			return msgCmd(openExerciseMsg{e: r.exercise})
		}
	}
	m.scroll()
	return nil
}

func (m *mapView) keyMap() keyMap {
	return keyMap{
		short: []key.Binding{keys.Up, keys.Down, keys.Open, keys.Quit, keys.Help},
		full:  [][]key.Binding{{keys.Up, keys.Down, keys.PageUp, keys.PageDown}, {keys.Top, keys.Bottom, keys.Open}, {keys.Quit, keys.Help}},
	}
}

// solutionOpen: the reference solution may be shown (the learner's files passed, or were
// correct where the speed could not be judged).
func solutionOpen(status string) bool {
	return status == workspace.StatusPassed || status == workspace.StatusCorrect
}

// statusMark is an exercise's status as one symbol and a word.
func statusMark(status string) (string, string) {
	switch status {
	case workspace.StatusPassed:
		return "✓", "passed"
	case workspace.StatusCorrect:
		return "◐", "correct, speed not judged"
	case workspace.StatusAttempted:
		return "●", "attempted"
	}
	return "○", "not started"
}

// bar draws a progress bar of n of total in w cells.
func bar(n, total, w int) string {
	if total <= 0 {
		return strings.Repeat("░", w)
	}
	full := n * w / total
	return strings.Repeat("█", full) + strings.Repeat("░", w-full)
}

func (m *mapView) moduleLine(mod *course.Module) string {
	st := m.s.st
	passed := 0
	cannot := 0
	for _, e := range mod.Exercises {
		if m.s.progress != nil && m.s.progress.Status(e.ID) == workspace.StatusPassed {
			passed++
		}
		if l, _ := m.s.lack(e); !l.CanRun() {
			cannot++
		}
	}
	right := fmt.Sprintf("%s %d/%d passed", bar(passed, len(mod.Exercises), 10), passed, len(mod.Exercises))
	left := st.heading.Render(mod.Title) + st.dim.Render(" ("+mod.ID+")")
	if cannot > 0 && cannot == len(mod.Exercises) {
		word := cantRunWord(m.w-ansi.StringWidth(right)-1, ansi.Strip(left), "can't run here", "can't run")
		right = st.warn.Render(word) + " " + right
	}
	return rightAlign(left, right, m.w)
}

func (m *mapView) rowLine(i int) string {
	r := m.rows[i]
	st := m.s.st
	if r.lesson == nil && r.exercise == nil {
		return m.moduleLine(r.module)
	}
	cur := "  "
	if i == m.cursor {
		cur = st.sel.Render("▸ ")
	}
	if r.lesson != nil {
		l := r.lesson
		pages := len(l.Pages)
		right := pluralize(pages, "page", "pages")
		if m.s.progress != nil {
			if p, ok := m.s.progress.LessonPage[l.ID]; ok {
				right = fmt.Sprintf("read to page %d of %d", min(p, pages-1)+1, pages)
			}
		}
		title := "lesson: " + l.Title
		if i == m.cursor {
			title = st.sel.Render(title)
		}
		return rightAlign("  "+cur+title, st.dim.Render(right), m.w)
	}
	e := r.exercise
	status := workspace.StatusNotStarted
	if m.s.progress != nil {
		status = m.s.progress.Status(e.ID)
	}
	mark, word := statusMark(status)
	var style lipgloss.Style
	lack, known := m.s.lack(e)
	name := padRight(e.Name(), m.nameWidth())
	left := "  " + cur + st.verdict(status).Render(mark) + " "
	switch {
	case !lack.CanRun():
		// What the machine lacks, when that leaves room for the title (30 columns, or all of
		// a shorter one); else just that it can't run (the module's heading says "can't run
		// here" too, and the line under the list says why for the exercise under the cursor).
		word, style = cantRunWord(m.w-ansi.StringWidth(left+name+"  "), e.Title, lack.short(), "can't run"), st.warn
	case !known:
		word += " · …"
		style = st.verdict(word)
	default:
		style = st.verdict(word)
	}
	title := name + "  " + e.Title
	if i == m.cursor {
		title = st.sel.Render(title)
	}
	return rightAlign(left+title, style.Render(word), m.w)
}

// cantRunWord is the first of words that leaves a title whole in room columns (the title, a
// space, the word); the last one when none does, except that the first is kept as long as
// the title keeps 30 columns.
func cantRunWord(room int, title string, words ...string) string {
	tw := ansi.StringWidth(title)
	for i, w := range words {
		left := room - 1 - ansi.StringWidth(w)
		if left >= tw || (i == 0 && left >= 30) {
			return w
		}
	}
	return words[len(words)-1]
}

// nameWidth is the column width of exercise names.
func (m *mapView) nameWidth() int {
	w := 0
	for _, e := range m.s.course.Exercises() {
		w = max(w, len(e.Name()))
	}
	return min(w, 24)
}

// details describes the selected row under the list.
func (m *mapView) details() []string {
	st := m.s.st
	r := m.selected()
	switch {
	case r.lesson != nil:
		return []string{st.dim.Render(r.module.Title + " · " + r.module.Summary)}
	case r.exercise != nil:
		e := r.exercise
		lack, known := m.s.lack(e)
		line := e.ID + " · " + e.Kind
		switch {
		case !known:
			return []string{line + " · " + st.dim.Render("checking what this machine can run…")}
		case !lack.CanRun():
			return []string{line + " · " + st.warn.Render("can't run on this machine: ") + lack.missing()}
		}
		return []string{line + " · " + st.ok.Render("runs on this machine")}
	}
	return nil
}

func (m *mapView) View() string {
	var lines []string
	h := m.listHeight()
	for i := m.offset; i < len(m.rows) && i < m.offset+h; i++ {
		lines = append(lines, m.rowLine(i))
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	lines = append(lines, m.s.st.dim.Render(strings.Repeat("─", m.w)))
	for _, d := range m.details() {
		lines = append(lines, wrap(d, m.w, 0)...)
	}
	return frame(strings.Join(lines, "\n"), m.w, m.h)
}

// msgCmd is a command that returns msg.
func msgCmd(msg tea.Msg) tea.Cmd { return func() tea.Msg { return msg } }
