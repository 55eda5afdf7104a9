package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

// screen names a child model.
type screen int

const (
	screenMap screen = iota
	screenLesson
	screenExercise
	screenRun
	screenResult
	screenSolution
)

// Timings of the UI (not of checks).
const (
	reflowDelay = 150 * time.Millisecond // debounce of re-rendering after a resize
	tickEvery   = 250 * time.Millisecond // refresh of elapsed times while a check runs
	watchDelay  = 300 * time.Millisecond // debounce of saves in watch mode
)

// Messages between the children and the root.
type (
	openLessonMsg   struct{ lesson *course.Lesson }
	openExerciseMsg struct{ e *course.Exercise }
	openSolutionMsg struct{ e *course.Exercise }
	backMsg         struct{}
	checkMsg        struct{ e *course.Exercise }
	recheckMsg      struct{}
	cancelCheckMsg  struct{}
	toggleWatchMsg  struct{}
	showResultMsg   struct{}
	exerciseKeyMsg  struct{ k tea.KeyMsg }
	unmetMsg        struct{ m map[string]Lack }
	reflowMsg       struct{ seq int }
	tickMsg         struct{}
)

// Model is the root model. It is a handle: copies share one state, as bubbletea expects of a
// model whose Update returns itself.
type Model struct{ *model }

type model struct {
	s      *session
	w, h   int
	bodyH  int
	screen screen
	stack  []screen

	cmap  *mapView
	pager *pagerView
	ex    *exerciseView
	run   *runView
	res   *resultView
	sol   *solutionView

	help      help.Model
	reflowSeq int
	sized     bool

	job          *job
	watch        *watcher
	watchPending bool
	reports      map[string]*checker.Report // the newest report of this session, by exercise
}

// New builds the root model. It opens where the learner left off: the last exercise worked
// on, over the course map.
func New(d Deps) Model {
	s := newSession(d)
	m := &model{
		s:       s,
		cmap:    newMapView(s),
		pager:   newPagerView(s),
		ex:      newExerciseView(s),
		run:     newRunView(s),
		res:     newResultView(s),
		sol:     newSolutionView(s),
		help:    help.New(),
		reports: map[string]*checker.Report{},
	}
	p, warnings, err := d.Workspace.LoadProgress()
	switch {
	case err != nil:
		s.flashErr("could not read your progress: " + err.Error())
		p = workspace.NewProgress()
	case len(warnings) > 0:
		s.flashErr(strings.Join(warnings, "; "))
	}
	s.progress = p
	if e := d.Course.Exercise(p.LastExercise); e != nil {
		m.cmap.selectExercise(e)
		m.stack = []screen{screenMap}
		m.screen = screenExercise
		m.ex.open(e)
	}
	if d.Width > 0 && d.Height > 0 {
		m.resize(d.Width, d.Height)
	}
	return Model{m}
}

// Init probes the machine (for the locks) and renders what the first screen shows.
func (m Model) Init() tea.Cmd {
	cmds := []tea.Cmd{m.probeCmd()}
	if m.sized {
		cmds = append(cmds, m.reflow())
	}
	return tea.Batch(cmds...)
}

func (m *model) probeCmd() tea.Cmd {
	unmet := m.s.d.Unmet
	exs := m.s.course.Exercises()
	return func() tea.Msg {
		res := map[string]Lack{}
		for _, e := range exs {
			if unmet != nil {
				res[e.ID] = unmet(e)
			}
		}
		return unmetMsg{res}
	}
}

// resize fans the new size out to every child.
func (m *model) resize(w, h int) {
	m.w, m.h = w, h
	m.help.Width = w
	m.sized = true
	m.layout()
}

// layout gives the children the room left by the title, status and help lines.
func (m *model) layout() {
	helpH := 1
	if m.help.ShowAll {
		helpH = max(1, strings.Count(m.help.View(m.keyMap()), "\n")+1)
	}
	bodyH := max(1, m.h-1-len(m.statusLines())-helpH)
	if bodyH == m.bodyH && m.w == m.cmap.w {
		return
	}
	m.bodyH = bodyH
	for _, c := range []interface{ SetSize(w, h int) }{m.cmap, m.pager, m.ex, m.run, m.res, m.sol} {
		c.SetSize(m.w, bodyH)
	}
}

// reflow renders markdown again for the current width.
func (m *model) reflow() tea.Cmd {
	var cmds []tea.Cmd
	if len(m.pager.pages) > 0 {
		cmds = append(cmds, m.pager.reflow())
	}
	if m.ex.e != nil {
		cmds = append(cmds, m.ex.reflow())
	}
	return tea.Batch(cmds...)
}

func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	m.layout()
	return m, cmd
}

func (m *model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		first := !m.sized
		m.resize(msg.Width, msg.Height)
		if first {
			return m.reflow()
		}
		m.reflowSeq++
		return m.s.after(reflowDelay, reflowMsg{m.reflowSeq})
	case reflowMsg:
		if msg.seq == m.reflowSeq {
			return m.reflow()
		}
		return nil
	case renderedMsg:
		if ok, cmd := m.pager.rendered(msg); ok {
			return cmd
		}
		m.ex.rendered(msg)
		return nil
	case unmetMsg:
		m.s.unmet = msg.m
		if m.ex.e != nil {
			m.ex.fill()
		}
		return nil
	case tea.KeyMsg:
		return m.key(msg)

	case openLessonMsg:
		m.push(screenLesson)
		return m.pager.open(msg.lesson)
	case openExerciseMsg:
		return m.openExercise(msg.e)
	case openSolutionMsg:
		if err := m.s.update(func(p *workspace.Progress) { p.Exercise(msg.e.ID).SolutionViewed = true }); err != nil {
			m.s.flashErr("could not save your progress: " + err.Error())
		}
		m.sol.open(msg.e)
		m.push(screenSolution)
		return nil
	case backMsg:
		m.back()
		return nil
	case showResultMsg:
		r := m.reports[m.ex.e.ID]
		if r == nil {
			m.s.flashInfo("No check of this exercise yet in this session: press c to run one.")
			return nil
		}
		m.res.open(m.ex.e, r)
		m.push(screenResult)
		return nil
	case exerciseKeyMsg:
		return m.ex.Update(msg.k)

	case checkMsg:
		return m.startCheck(msg.e, false)
	case recheckMsg:
		if m.screen == screenResult {
			m.back()
		}
		return m.ex.requestCheck()
	case cancelCheckMsg:
		if m.job != nil {
			m.job.stop()
			m.run.canceling = true
		}
		return nil
	case jobUpdateMsg:
		if msg.j != m.job {
			return nil
		}
		m.run.set(msg.j.snapshot())
		m.run.canceling = msg.j.isCanceling()
		return m.s.wait(msg.j.waitCmd())
	case jobDoneMsg:
		return m.finishCheck(msg.j)
	case tickMsg:
		if m.job != nil {
			return m.s.after(tickEvery, tickMsg{})
		}
		return nil

	case toggleWatchMsg:
		return m.toggleWatch()
	case fileChangedMsg:
		if msg.w != m.watch {
			return nil
		}
		msg.w.seq++
		return tea.Batch(m.s.wait(msg.w.waitCmd()), m.s.after(watchDelay, watchFireMsg{msg.w, msg.w.seq}))
	case watchFireMsg:
		if msg.w != m.watch || msg.seq != msg.w.seq {
			return nil
		}
		if m.job != nil {
			m.watchPending = true
			return nil
		}
		return m.watchCheck()
	case editorDoneMsg:
		switch {
		case msg.err != nil:
			m.s.flashErr("the editor failed: " + msg.err.Error())
		case m.watch != nil && m.watch.e == m.ex.e:
			m.s.flashInfo("Back from the editor; watch mode checks your saves.")
		default:
			m.s.flashInfo("Back from the editor. Press c to check your file.")
		}
		return nil
	}
	return nil
}

// key handles the keys every screen shares, then hands the key to the screen.
func (m *model) key(k tea.KeyMsg) tea.Cmd {
	m.s.status = flash{}
	if k.String() == "ctrl+c" {
		if m.screen == screenRun {
			return msgCmd(cancelCheckMsg{})
		}
		return m.quit()
	}
	if !m.typing() && key.Matches(k, keys.Help) {
		m.help.ShowAll = !m.help.ShowAll
		return nil
	}
	switch m.screen {
	case screenMap:
		if key.Matches(k, keys.Quit) {
			return m.quit()
		}
		return m.cmap.Update(k)
	case screenLesson:
		return m.pager.Update(k)
	case screenExercise:
		return m.ex.Update(k)
	case screenRun:
		return m.run.Update(k)
	case screenResult:
		return m.res.Update(k)
	case screenSolution:
		return m.sol.Update(k)
	}
	return nil
}

func (m *model) typing() bool {
	switch m.screen {
	case screenLesson:
		return m.pager.typing()
	case screenExercise:
		return m.ex.typing()
	}
	return false
}

func (m *model) quit() tea.Cmd {
	m.stopWatch()
	if m.job != nil {
		m.job.stop()
	}
	return tea.Quit
}

// shutdown stops the watcher and any check, waiting up to timeout for its processes to end.
func (m *model) shutdown(timeout time.Duration) {
	m.stopWatch()
	if j := m.job; j != nil {
		j.stop()
		select {
		case <-j.done:
		case <-time.After(timeout):
		}
	}
}

func (m *model) push(s screen) {
	m.stack = append(m.stack, m.screen)
	m.screen = s
}

// back returns to the previous screen; leaving the exercise for the map ends watch mode.
func (m *model) back() {
	if n := len(m.stack); n > 0 {
		m.screen = m.stack[n-1]
		m.stack = m.stack[:n-1]
	} else {
		m.screen = screenMap
	}
	if m.screen == screenMap {
		m.stopWatch()
		m.cmap.selectExercise(m.ex.e)
	}
	if m.screen == screenExercise {
		m.ex.fill()
	}
}

func (m *model) openExercise(e *course.Exercise) tea.Cmd {
	if m.watch != nil && m.watch.e != e {
		m.stopWatch()
	}
	m.push(screenExercise)
	m.ex.hasResult = m.reports[e.ID] != nil
	cmd := m.ex.open(e)
	if m.s.progress == nil || m.s.progress.LastExercise != e.ID {
		if err := m.s.update(func(p *workspace.Progress) { p.LastExercise = e.ID }); err != nil {
			m.s.flashErr("could not save your progress: " + err.Error())
		}
	}
	return cmd
}

// startCheck runs a check of e in the background and shows the run view.
func (m *model) startCheck(e *course.Exercise, byWatch bool) tea.Cmd {
	if m.job != nil {
		m.s.flashInfo("A check is already running.")
		return nil
	}
	m.job = m.s.startJob(e)
	m.job.watch = byWatch
	m.run.reset(m.job.first, byWatch)
	switch m.screen {
	case screenRun:
	case screenResult:
		m.screen = screenRun // the new result replaces the old one
	default:
		m.push(screenRun)
	}
	return tea.Batch(m.s.wait(m.job.waitCmd()), m.s.after(tickEvery, tickMsg{}))
}

// finishCheck shows the result of a check that ended (or says it was canceled).
func (m *model) finishCheck(j *job) tea.Cmd {
	if j != m.job {
		return nil
	}
	m.job = nil
	m.run.set(j.snapshot())
	j.mu.Lock()
	rep, canceled, p := j.report, j.canceled, j.progress
	j.mu.Unlock()
	if p != nil {
		m.s.progress = p
	}
	if m.screen == screenRun {
		m.back()
	}
	if canceled {
		m.s.flashInfo("Check canceled: every rank was stopped. It was not recorded.")
		m.ex.fill()
		return nil
	}
	m.reports[j.e.ID] = rep
	m.ex.hasResult = true
	m.ex.fill()
	m.res.open(j.e, rep)
	if m.screen == screenExercise {
		m.push(screenResult)
	}
	if m.watchPending && m.watch != nil {
		m.watchPending = false
		return m.watchCheck()
	}
	return nil
}

// watchCheck checks the watched exercise after a save.
func (m *model) watchCheck() tea.Cmd {
	e := m.watch.e
	if m.ex.e != e {
		return nil
	}
	if m.screen == screenResult {
		m.back()
	}
	if m.screen != screenExercise {
		m.s.flashInfo(fmt.Sprintf("%s changed: press c to check it.", strings.Join(e.Files, ", ")))
		return nil
	}
	if m.ex.needsPrediction() {
		return m.ex.requestCheck()
	}
	if l, known := m.s.lack(e); known && !l.CanRun() {
		m.s.flashErr(cantRunMessage(l))
		return nil
	}
	return m.startCheck(e, true)
}

func (m *model) toggleWatch() tea.Cmd {
	e := m.ex.e
	if m.watch != nil && m.watch.e == e {
		m.stopWatch()
		m.s.flashInfo("Watch mode off.")
		return nil
	}
	m.stopWatch()
	w, err := startWatch(m.s.ws.ExerciseDir(e), e)
	if err != nil {
		m.s.flashErr("cannot watch your files: " + err.Error())
		return nil
	}
	m.watch = w
	m.s.flashInfo(fmt.Sprintf("Watch mode on: each save of %s runs the check.", strings.Join(e.Files, ", ")))
	return m.s.wait(w.waitCmd())
}

func (m *model) stopWatch() {
	if m.watch != nil {
		m.watch.stop()
		m.watch = nil
	}
	m.watchPending = false
}

// keyMap is the current screen's help.
func (m *model) keyMap() keyMap {
	switch m.screen {
	case screenLesson:
		return m.pager.keyMap()
	case screenExercise:
		return m.ex.keyMap()
	case screenRun:
		return m.run.keyMap()
	case screenResult:
		return m.res.keyMap()
	case screenSolution:
		return m.sol.keyMap()
	}
	return m.cmap.keyMap()
}

// crumb says where the learner is, for the title line.
func (m *model) crumb() string {
	switch m.screen {
	case screenLesson:
		if m.pager.mod != nil {
			return m.pager.mod.Title + " › lessons"
		}
		return "lessons"
	case screenExercise:
		return "exercise " + m.ex.e.ID
	case screenRun:
		if m.run.st.cross > 0 {
			return fmt.Sprintf("cross-checking %s with %d ranks on the CPU", m.run.st.exercise, m.run.st.cross)
		}
		return "checking " + m.run.st.exercise
	case screenResult:
		return "result of " + m.res.r.Exercise
	case screenSolution:
		return "solution of " + m.sol.e.ID
	}
	return "course map"
}

func (m Model) View() string {
	if !m.sized {
		return ""
	}
	st := m.s.st
	if m.w < 40 || m.h < 12 {
		return frame(fmt.Sprintf("The terminal is %d×%d: mgpu-learn needs at least 40×12.\nPress q to quit.", m.w, m.h), m.w, m.h)
	}
	var body string
	switch m.screen {
	case screenLesson:
		body = m.pager.View()
	case screenExercise:
		body = m.ex.View()
	case screenRun:
		body = m.run.View()
	case screenResult:
		body = m.res.View()
	case screenSolution:
		body = m.sol.View()
	default:
		body = m.cmap.View()
	}
	right := ""
	if m.watch != nil {
		right = st.info.Render("watch: on (" + m.watch.e.Name() + ")")
	}
	title := rightAlign(st.title.Render("mgpu-learn")+st.crumb.Render(" · "+m.s.course.Title+" · "+m.crumb()), right, m.w)

	status := strings.Join(m.statusLines(), "\n")
	return frame(title+"\n"+frame(body, m.w, m.bodyH)+"\n"+status+"\n"+m.help.View(m.keyMap()), m.w, m.h)
}

// statusLines is the message under the screen: one line, or up to three for a long one.
func (m *model) statusLines() []string {
	st := m.s.st
	text, style := "", st.dim
	switch {
	case m.s.status.text != "" && m.s.status.err:
		text, style = m.s.status.text, st.errLine
	case m.s.status.text != "":
		text, style = m.s.status.text, st.info
	case m.screen == screenLesson && m.pager.query != "" && !m.pager.searching:
		text = m.pager.searchStatus()
	}
	if text == "" {
		return []string{""}
	}
	lines := wrap(text, m.w, 0)
	if len(lines) > 3 {
		lines = lines[:3]
	}
	for i, l := range lines {
		lines[i] = style.Render(l)
	}
	return lines
}
