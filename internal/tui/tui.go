// Package tui is mgpu-learn's terminal UI: a course map, a lesson pager, an exercise view, a
// live view of a running check and its result. The root model owns the shared session (course,
// workspace, progress, styles) and delegates to one child model per screen; every child takes
// its size through SetSize so that a resize reaches all of them at once.
package tui

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

// Deps is what the UI drives. Course and Workspace are required; the rest have fallbacks.
type Deps struct {
	Course    *course.Course
	Workspace *workspace.Workspace
	// Unmet says what this machine lacks to run an exercise; the zero Lack means it can run.
	// It may be slow (it probes the machine once), so it is called off the update loop.
	Unmet func(*course.Exercise) Lack
	// NewChecker returns a checker wired to this machine; the UI sets its Events.
	NewChecker func(ctx context.Context) (*checker.Checker, error)
	// Record saves a finished check in the progress record; nil records it here.
	Record func(e *course.Exercise, r *checker.Report)
	// Editor is the command that opens a file ($EDITOR, "code -w"); empty: vi.
	Editor string
	// NoColor draws without colours or styles.
	NoColor bool
	// Width and Height are the starting size (tests); a real terminal sends its own.
	Width, Height int
}

// Run shows the UI in the terminal's alternate screen until the learner quits. A check still
// running then is cancelled (its processes are killed) before Run returns.
func Run(ctx context.Context, d Deps) error {
	if d.NoColor {
		// bubbles' own styles (help, text input) use the default renderer.
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	m := New(d)
	m.s.ctx = ctx
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx))
	_, err := p.Run()
	m.shutdown(10 * time.Second)
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// Lack is what this machine lacks to run one exercise (doctor's findings); the zero Lack:
// nothing, the exercise runs here.
type Lack struct {
	// Needs says it in a few words, for a row of the course map: "2 GPUs, nvcc".
	Needs string
	// Reasons are doctor's, one per unmet requirement: what is missing here and how to get it.
	Reasons []doctor.Reason
}

// CanRun reports whether nothing is lacking.
func (l Lack) CanRun() bool { return len(l.Reasons) == 0 && l.Needs == "" }

// short is the lack as a status: "can't run here (needs 2 GPUs)".
func (l Lack) short() string {
	if l.Needs == "" {
		return "can't run here"
	}
	return "can't run here (needs " + l.Needs + ")"
}

// missing is what is missing, in doctor's words: "needs 2 GPUs; this machine has none; ...".
func (l Lack) missing() string {
	if len(l.Reasons) == 0 {
		return "needs " + l.Needs
	}
	whats := make([]string, len(l.Reasons))
	for i, r := range l.Reasons {
		whats[i] = r.What
	}
	return strings.Join(whats, "; ")
}

// session is what every screen shares.
type session struct {
	d        Deps
	ctx      context.Context
	course   *course.Course
	ws       *workspace.Workspace
	progress *workspace.Progress
	st       styles
	plain    bool
	// unmet is nil until the machine has been probed.
	unmet  map[string]Lack
	status flash

	// Seams, replaced by tests.
	now   func() time.Time
	after func(time.Duration, tea.Msg) tea.Cmd
	// wait wraps commands that block until something outside happens (a check's events, a
	// file saved).
	wait func(tea.Cmd) tea.Cmd
	// check runs one check; events may be called from another goroutine.
	check func(ctx context.Context, t checker.Target, events func(checker.Event)) *checker.Report
	// exec hands the terminal to a program (the editor).
	exec func(name string, args []string, done func(error) tea.Msg) tea.Cmd
	// home is shown as "~" in paths.
	home string
}

func newSession(d Deps) *session {
	s := &session{
		d:      d,
		ctx:    context.Background(),
		course: d.Course,
		ws:     d.Workspace,
		plain:  d.NoColor,
		st:     newStyles(d.NoColor),
		now:    time.Now,
		after: func(dur time.Duration, msg tea.Msg) tea.Cmd {
			return tea.Tick(dur, func(time.Time) tea.Msg { return msg })
		},
		wait: func(c tea.Cmd) tea.Cmd { return c },
		exec: execProcess,
	}
	s.home, _ = os.UserHomeDir()
	s.check = s.realCheck
	return s
}

// realCheck checks with a checker from Deps.NewChecker.
func (s *session) realCheck(ctx context.Context, t checker.Target, events func(checker.Event)) *checker.Report {
	if s.d.NewChecker == nil {
		return failedReport(t, "the UI was started without a checker")
	}
	ck, err := s.d.NewChecker(ctx)
	if err != nil {
		return failedReport(t, "the checker could not be set up: "+err.Error())
	}
	ck.Events = events
	return ck.Check(ctx, t)
}

// failedReport is a report for a check that could not start (the runner's fault).
func failedReport(t checker.Target, why string) *checker.Report {
	r := &checker.Report{Target: t.Label, Verdict: checker.Errored, Stage: checker.StageEnvironment,
		Fault: checker.FaultRunner, Headline: why, Message: why, Started: time.Now()}
	if t.Exercise != nil {
		r.Exercise, r.Title = t.Exercise.ID, t.Exercise.Title
	}
	return r
}

// exerciseProgress is the progress of e (never nil; not stored when new).
func (s *session) exerciseProgress(e *course.Exercise) *workspace.ExerciseProgress {
	if s.progress != nil {
		if ep := s.progress.Exercises[e.ID]; ep != nil {
			return ep
		}
	}
	return &workspace.ExerciseProgress{Status: workspace.StatusNotStarted}
}

// update changes the progress record on disk and keeps the saved record.
func (s *session) update(fn func(p *workspace.Progress)) error {
	var saved *workspace.Progress
	err := s.ws.UpdateProgress(func(p *workspace.Progress) error {
		fn(p)
		saved = p
		return nil
	})
	if err == nil {
		s.progress = saved
	}
	return err
}

// record saves a finished check: Deps.Record, or the same bookkeeping done here.
func (s *session) record(e *course.Exercise, r *checker.Report) {
	if s.d.Record != nil {
		s.d.Record(e, r)
		return
	}
	if r.Verdict == checker.Refused {
		return
	}
	_ = s.ws.UpdateProgress(func(p *workspace.Progress) error {
		p.Exercise(e.ID).Record(workspace.Attempt{
			Target: workspace.TargetYours, Verdict: r.Verdict, Stage: r.Stage,
			DurationMS: time.Duration(r.Duration).Milliseconds(),
		})
		p.LastExercise = e.ID
		return nil
	})
}

// lack is what this machine lacks for e; known reports whether the machine was probed yet.
func (s *session) lack(e *course.Exercise) (l Lack, known bool) {
	if s.unmet == nil {
		return Lack{}, false
	}
	return s.unmet[e.ID], true
}

// flash is the one-line message under the screen; it stays until the next key.
type flash struct {
	text string
	err  bool
}

// doctorHint points to the details of what this machine lacks.
const doctorHint = "mgpu-learn doctor says how to get what is missing"

// cantRunMessage is the flash for a check this machine can't run.
func cantRunMessage(l Lack) string {
	return "This machine can't run this exercise: " + l.missing() + " (" + doctorHint + ")."
}

func (s *session) flashInfo(text string) { s.status = flash{text: text} }
func (s *session) flashErr(text string)  { s.status = flash{text: text, err: true} }
