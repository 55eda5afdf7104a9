package tui

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

// exerciseView shows one exercise: its task, the learner's files, status, hints, and the keys
// that edit, check, reset and show the solution. It also asks for a prediction before the
// first timed run, and confirms a reset.
type exerciseView struct {
	s     *session
	w, h  int
	e     *course.Exercise
	vp    viewport.Model
	cache *renderCache

	confirmReset bool
	predicting   bool
	input        textinput.Model
	// skipped are exercises whose prediction the learner declined this session.
	skipped map[string]bool
	// hasResult is set by the root model when this session has a report for the exercise.
	hasResult bool
}

func newExerciseView(s *session) *exerciseView {
	in := textinput.New()
	in.Prompt = "> "
	in.Placeholder = "a number"
	in.CharLimit = 24
	in.Width = 20
	in.Cursor.SetMode(cursor.CursorStatic)
	vp := viewport.New(0, 0)
	vp.KeyMap = scrollKeys()
	return &exerciseView{s: s, vp: vp, cache: newRenderCache(), input: in, skipped: map[string]bool{}}
}

func (x *exerciseView) open(e *course.Exercise) tea.Cmd {
	if x.e != e {
		x.vp.GotoTop()
	}
	x.e = e
	x.confirmReset, x.predicting = false, false
	x.layout()
	return x.refresh()
}

func (x *exerciseView) SetSize(w, h int) {
	x.w, x.h = w, h
	x.layout()
	if x.e != nil {
		x.fill()
	}
}

func (x *exerciseView) layout() {
	x.vp.Width = x.w
	x.vp.Height = max(1, x.h-len(x.header())-x.promptHeight())
}

func (x *exerciseView) promptHeight() int {
	switch {
	case x.predicting:
		return 6
	case x.confirmReset:
		return 2
	}
	return 0
}

func (x *exerciseView) taskKey() string { return "task:" + x.e.ID }

func (x *exerciseView) taskMarkdown() string {
	b, err := x.e.ReadFile(x.e.Task)
	if err != nil {
		return "*The task could not be read: " + err.Error() + "*"
	}
	return string(b)
}

// refresh fills the viewport and asks for the task's rendering when it is missing.
func (x *exerciseView) refresh() tea.Cmd {
	if x.e == nil || x.w == 0 {
		return nil
	}
	x.fill()
	return x.cache.want(x.taskKey(), x.taskMarkdown(), wrapWidth(x.w), x.s.plain)
}

func (x *exerciseView) reflow() tea.Cmd { return x.refresh() }

func (x *exerciseView) rendered(msg renderedMsg) bool {
	if !x.cache.put(msg) {
		return false
	}
	if x.e != nil && msg.key == x.taskKey() {
		x.fill()
	}
	return true
}

// header is the fixed part above the task: title, status, files.
func (x *exerciseView) header() []string {
	if x.e == nil {
		return nil
	}
	st := x.s.st
	e := x.e
	ep := x.s.exerciseProgress(e)
	lines := []string{st.bold.Render(e.ID) + " · " + e.Title}

	mark, word := statusMark(ep.Status)
	status := st.verdict(ep.Status).Render(mark + " " + word)
	if n := len(ep.Attempts); n > 0 {
		a := ep.Attempts[n-1]
		last := a.Verdict
		if a.Verdict != workspace.VerdictPassed && a.Stage != "" {
			last += " at " + a.Stage
		}
		status += " · last check: " + st.verdict(a.Verdict).Render(last)
		if x.hasResult {
			status += st.dim.Render(" (v shows it)")
		}
	}
	lack, known := x.s.lack(e)
	switch {
	case !known:
		status += " · " + st.dim.Render("checking this machine…")
	case !lack.CanRun():
		status += " · " + st.warn.Render(lack.short())
	default:
		status += " · " + st.ok.Render("runs here")
	}
	lines = append(lines, status)
	if !lack.CanRun() {
		reason := wrap(lack.missing()+" ("+doctorHint+")", x.w, 2)
		if len(reason) > 2 {
			reason = reason[:2]
			reason[1] = fit(reason[1]+" …", x.w)
		}
		for _, l := range reason {
			lines = append(lines, st.warn.Render(l))
		}
	}

	files := x.s.ws.Files(e)
	nameW := 0
	for _, f := range e.Files {
		nameW = max(nameW, len(f))
	}
	for i, f := range e.Files {
		label := "your file: "
		if len(e.Files) > 1 {
			label = "your files:"
			if i > 0 {
				label = "           "
			}
		}
		if i == 3 && len(e.Files) > 4 {
			lines = append(lines, st.dim.Render(fmt.Sprintf("           … and %d more in %s", len(e.Files)-3, x.s.showPath(x.s.ws.ExerciseDir(e)))))
			break
		}
		lines = append(lines, st.dim.Render(label)+" "+padRight(f, nameW)+"  "+st.dim.Render(x.s.showPath(files[f])))
	}
	if n := len(ep.Predictions); n > 0 && e.Perf != nil {
		pr := ep.Predictions[n-1]
		line := fmt.Sprintf("your prediction: %s %s", fmtNum(pr.Predicted), metricUnit(pr.Metric))
		if pr.Measured != 0 {
			line += fmt.Sprintf(" · measured: %s %s", fmtNum(pr.Measured), metricUnit(pr.Metric))
		}
		lines = append(lines, st.dim.Render(line))
	}
	lines = append(lines, st.dim.Render(strings.Repeat("─", x.w)))
	return lines
}

// fill puts the hints shown and the task in the viewport.
func (x *exerciseView) fill() {
	x.layout()
	st := x.s.st
	e := x.e
	ep := x.s.exerciseProgress(e)
	var lines []string
	if len(e.Hints) > 0 {
		shown := min(ep.HintsShown, len(e.Hints))
		head := fmt.Sprintf("Hints: %d of %d shown", shown, len(e.Hints))
		if shown < len(e.Hints) {
			head += " (h shows the next)"
		}
		lines = append(lines, st.bold.Render(head))
		for i := 0; i < shown; i++ {
			hint := wrap(e.Hints[i], x.w-6, 0)
			for j, l := range hint {
				prefix := "      "
				if j == 0 {
					prefix = fmt.Sprintf("  %2d. ", i+1)
				}
				lines = append(lines, prefix+l)
			}
		}
		lines = append(lines, "")
	}
	task, ok := x.cache.get(x.taskKey(), wrapWidth(x.w))
	if !ok {
		task, ok = x.cache.stale(x.taskKey())
	}
	if !ok {
		task = "  rendering the task…"
	}
	lines = append(lines, task)
	x.vp.SetContent(strings.Join(lines, "\n"))
}

// needsPrediction reports whether to ask for a prediction before checking e: a timed
// exercise with a question, never run nor predicted.
func (x *exerciseView) needsPrediction() bool {
	e := x.e
	if e.Perf == nil || strings.TrimSpace(e.Perf.Predict) == "" || x.skipped[e.ID] {
		return false
	}
	ep := x.s.exerciseProgress(e)
	return len(ep.Predictions) == 0 && len(ep.Attempts) == 0
}

// requestCheck starts a check, or first asks for the prediction.
func (x *exerciseView) requestCheck() tea.Cmd {
	if l, known := x.s.lack(x.e); known && !l.CanRun() {
		x.s.flashErr(cantRunMessage(l))
		return nil
	}
	for name, p := range x.s.ws.Files(x.e) {
		if _, err := os.Stat(p); err != nil {
			x.s.flashErr(fmt.Sprintf("Your file %s is missing (%s): press r to restore the starter.", name, x.s.showPath(p)))
			return nil
		}
	}
	if x.needsPrediction() {
		x.predicting = true
		x.input.SetValue("")
		x.layout()
		return x.input.Focus()
	}
	return msgCmd(checkMsg{e: x.e})
}

// parsePrediction reads a positive number; a unit or thousands separators after it are fine.
func parsePrediction(s string) (float64, error) {
	s = strings.TrimSpace(strings.NewReplacer(",", "", "_", "").Replace(s))
	end := 0
	for end < len(s) && strings.ContainsRune("0123456789.eE+-", rune(s[end])) {
		end++
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	if err != nil || end == 0 || v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("type a positive number, such as 350")
	}
	return v, nil
}

func metricUnit(metric string) string {
	if metric == "time" {
		return "us"
	}
	return "GB/s"
}

func (x *exerciseView) typing() bool { return x.predicting }

func (x *exerciseView) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	e := x.e
	switch {
	case x.predicting:
		switch k.String() {
		case "enter":
			v, err := parsePrediction(x.input.Value())
			if err != nil {
				x.s.flashErr(err.Error())
				return nil
			}
			x.predicting = false
			x.input.Blur()
			x.layout()
			if err := x.s.update(func(p *workspace.Progress) {
				p.Exercise(e.ID).Predict(workspace.Prediction{Metric: e.Perf.Metric, Predicted: v})
			}); err != nil {
				x.s.flashErr("could not save your prediction: " + err.Error())
			}
			x.fill()
			return msgCmd(checkMsg{e: e})
		case "esc":
			x.predicting = false
			x.skipped[e.ID] = true
			x.input.Blur()
			x.layout()
			return msgCmd(checkMsg{e: e})
		}
		var cmd tea.Cmd
		x.input, cmd = x.input.Update(msg)
		return cmd
	case x.confirmReset:
		switch {
		case key.Matches(k, keys.Yes):
			x.confirmReset = false
			x.layout()
			x.reset()
		case key.Matches(k, keys.No):
			x.confirmReset = false
			x.layout()
			x.s.flashInfo("Reset canceled; nothing changed.")
		}
		return nil
	}
	switch {
	case key.Matches(k, keys.Back):
		return msgCmd(backMsg{})
	case key.Matches(k, keys.Check):
		return x.requestCheck()
	case key.Matches(k, keys.Edit):
		return x.edit()
	case key.Matches(k, keys.Hint):
		x.revealHint()
	case key.Matches(k, keys.Reset):
		x.confirmReset = true
		x.layout()
	case key.Matches(k, keys.Solution):
		if !solutionOpen(x.s.exerciseProgress(e).Status) {
			x.s.flashInfo("The solution opens once your files pass the check.")
			return nil
		}
		return msgCmd(openSolutionMsg{e: e})
	case key.Matches(k, keys.Watch):
		return msgCmd(toggleWatchMsg{})
	case key.Matches(k, keys.Result):
		return msgCmd(showResultMsg{})
	case key.Matches(k, keys.Lesson):
		l := x.s.course.Lesson(e.Lesson)
		if l == nil && e.Module != nil && len(e.Module.Lessons) > 0 {
			l = e.Module.Lessons[0]
		}
		if l == nil {
			x.s.flashInfo("This exercise has no lesson.")
			return nil
		}
		return msgCmd(openLessonMsg{lesson: l})
	case key.Matches(k, keys.Top):
		x.vp.GotoTop()
	case key.Matches(k, keys.Bottom):
		x.vp.GotoBottom()
	default:
		var cmd tea.Cmd
		x.vp, cmd = x.vp.Update(msg)
		return cmd
	}
	return nil
}

func (x *exerciseView) revealHint() {
	e := x.e
	if len(e.Hints) == 0 {
		x.s.flashInfo("This exercise has no hints.")
		return
	}
	shown := x.s.exerciseProgress(e).HintsShown
	if shown >= len(e.Hints) {
		x.s.flashInfo(fmt.Sprintf("No more hints: all %d are shown.", len(e.Hints)))
		return
	}
	if err := x.s.update(func(p *workspace.Progress) {
		ep := p.Exercise(e.ID)
		ep.HintsShown = min(max(ep.HintsShown, shown)+1, len(e.Hints))
	}); err != nil {
		x.s.flashErr("could not save the hint: " + err.Error())
		return
	}
	x.fill()
	x.vp.GotoTop()
}

func (x *exerciseView) reset() {
	backups, err := x.s.ws.Reset(x.e)
	if err != nil {
		x.s.flashErr("Reset failed, your files are unchanged where no backup was made: " + err.Error())
		return
	}
	if len(backups) == 0 {
		x.s.flashInfo("Your files were already the starter; nothing needed a backup.")
		return
	}
	shown := make([]string, len(backups))
	for i, b := range backups {
		shown[i] = x.s.showPath(b)
	}
	x.s.flashInfo("Reset to the starter. Your version was saved to " + strings.Join(shown, ", "))
}

// editorDoneMsg reports that the editor exited.
type editorDoneMsg struct {
	file string
	err  error
}

// edit opens the first learner file in the editor.
func (x *exerciseView) edit() tea.Cmd {
	if len(x.e.Files) == 0 {
		x.s.flashInfo("This exercise has no files to edit.")
		return nil
	}
	file := x.s.ws.FilePath(x.e, x.e.Files[0])
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		x.s.flashErr(fmt.Sprintf("%s is missing: press r to restore the starter.", x.s.showPath(file)))
		return nil
	}
	name, args, err := editorCommand(x.s.d.Editor)
	if err != nil {
		x.s.flashErr(err.Error())
		return nil
	}
	return x.s.exec(name, append(args, file), func(err error) tea.Msg { return editorDoneMsg{file: file, err: err} })
}

// editorCommand splits the editor setting into a program on PATH and its arguments; with no
// setting it is vi.
func editorCommand(editor string) (string, []string, error) {
	fields := strings.Fields(editor)
	if len(fields) == 0 {
		p, err := exec.LookPath("vi")
		if err != nil {
			return "", nil, errors.New("no editor: set $EDITOR (vi was not found either)")
		}
		return p, nil, nil
	}
	p, err := exec.LookPath(fields[0])
	if err != nil {
		return "", nil, fmt.Errorf("the editor %q ($EDITOR) was not found", fields[0])
	}
	return p, fields[1:], nil
}

// execProcess runs a program in the terminal, the UI suspended meanwhile.
func execProcess(name string, args []string, done func(error) tea.Msg) tea.Cmd {
	return tea.ExecProcess(exec.Command(name, args...), func(err error) tea.Msg { return done(err) })
}

func (x *exerciseView) keyMap() keyMap {
	switch {
	case x.predicting:
		return keyMap{short: []key.Binding{keys.Submit, withHelp(keys.Skip, "esc", "skip the prediction")}}
	case x.confirmReset:
		return keyMap{short: []key.Binding{keys.Yes, keys.No}}
	}
	short := []key.Binding{keys.Edit, keys.Check, keys.Hint, keys.Reset}
	if solutionOpen(x.s.exerciseProgress(x.e).Status) {
		short = append(short, keys.Solution)
	}
	short = append(short, keys.Watch, keys.Back, keys.Help)
	return keyMap{
		short: short,
		full: [][]key.Binding{
			{keys.Edit, keys.Check, keys.Watch, keys.Result},
			{keys.Hint, keys.Reset, keys.Solution, keys.Lesson},
			{keys.Up, keys.Down, keys.PageDown, keys.PageUp},
			{keys.Back, keys.Interrupt},
		},
	}
}

func (x *exerciseView) View() string {
	if x.e == nil {
		return ""
	}
	parts := append(x.header(), x.vp.View())
	st := x.s.st
	switch {
	case x.predicting:
		p := x.e.Perf
		parts = append(parts,
			st.dim.Render(strings.Repeat("─", x.w)),
			st.bold.Render("Predict, then measure.")+" Before the first run, what do you expect?",
			"  "+p.Predict+" ("+metricUnit(p.Metric)+"):",
			"  "+x.input.View(),
			st.dim.Render("  Your guess is kept with your progress and compared with the measurement."),
			"")
	case x.confirmReset:
		parts = append(parts,
			st.dim.Render(strings.Repeat("─", x.w)),
			st.warn.Render(fmt.Sprintf("Reset %s to the starter? Your version is backed up first. (y/n)", strings.Join(x.e.Files, ", "))))
	}
	return frame(strings.Join(parts, "\n"), x.w, x.h)
}

// solutionView shows the reference solution's files.
type solutionView struct {
	s    *session
	w, h int
	e    *course.Exercise
	vp   viewport.Model
}

func newSolutionView(s *session) *solutionView {
	vp := viewport.New(0, 0)
	vp.KeyMap = scrollKeys()
	return &solutionView{s: s, vp: vp}
}

func (v *solutionView) SetSize(w, h int) {
	v.w, v.h = w, h
	v.vp.Width, v.vp.Height = w, max(1, h-1)
}

func (v *solutionView) open(e *course.Exercise) {
	v.e = e
	st := v.s.st
	var lines []string
	for _, f := range e.Files {
		lines = append(lines, st.bold.Render("── "+f+" "+strings.Repeat("─", 40)))
		b, err := fs.ReadFile(e.FS(), e.SolutionPath(f))
		if err != nil {
			lines = append(lines, st.bad.Render("  could not read it: "+err.Error()), "")
			continue
		}
		for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			lines = append(lines, cleanLine(l))
		}
		lines = append(lines, "")
	}
	v.vp.SetContent(strings.Join(lines, "\n"))
	v.vp.GotoTop()
}

func (v *solutionView) Update(msg tea.Msg) tea.Cmd {
	k, ok := msg.(tea.KeyMsg)
	if !ok {
		return nil
	}
	switch {
	case key.Matches(k, keys.Back):
		return msgCmd(backMsg{})
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

func (v *solutionView) keyMap() keyMap {
	return keyMap{
		short: []key.Binding{keys.Up, keys.Down, keys.PageDown, keys.Back, keys.Help},
		full:  [][]key.Binding{{keys.Up, keys.Down, keys.PageDown, keys.PageUp}, {keys.Top, keys.Bottom, keys.Back}},
	}
}

func (v *solutionView) View() string {
	head := rightAlign(v.s.st.bold.Render("Reference solution of "+v.e.ID),
		v.s.st.dim.Render(filepath.Base(v.e.Dir)+"/solution"), v.w)
	return frame(head+"\n"+v.vp.View(), v.w, v.h)
}
