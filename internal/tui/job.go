package tui

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

// A check runs in a goroutine with its own cancellable context. The checker's events are
// folded into a runState under a lock (so a rank that floods its output never waits for the
// screen), and a one-slot channel tells the UI that there is news; the UI's command waits on
// that channel, copies the state and waits again.

// Keep this much of each stream.
const (
	buildKeep = 200
	tailKeep  = 40
)

// stageRow is one stage of the check as the run view shows it.
type stageRow struct {
	name   string
	status string // "" (not reached), "running", or the checker's status
	began  time.Time
	dur    time.Duration
	detail string
}

// rankRow is one rank of the current run.
type rankRow struct {
	rank   int
	state  string // building, running, then launch's words: done, failed, signaled, hung, killed
	began  time.Time
	ended  time.Time
	exit   int
	signal string
	tail   []string
	lines  int
}

// runState is everything the run view draws.
type runState struct {
	exercise string
	started  time.Time
	stages   []stageRow
	build    []string
	buildN   int // build lines seen
	run      int // 1-based run number; 0 before the first run
	runDir   string
	ranks    []rankRow
	cross    int // the ranks of the CPU cross-check once it started (checker.CrossCheck); 0 before
}

func newRunState(e *course.Exercise, now time.Time) runState {
	st := runState{exercise: e.ID, started: now}
	for _, name := range checker.Stages {
		st.stages = append(st.stages, stageRow{name: name})
	}
	n := 1
	if e.Launch.Launcher != "single" {
		if v, err := strconv.Atoi(e.Launch.Ranks); err == nil && v > 0 {
			n = v
		} else {
			n = 0 // "all": known when the run starts
		}
	}
	for r := 0; r < n; r++ {
		st.ranks = append(st.ranks, rankRow{rank: r, state: "building"})
	}
	return st
}

func (s *runState) stage(name string) *stageRow {
	for i := range s.stages {
		if s.stages[i].name == name {
			return &s.stages[i]
		}
	}
	s.stages = append(s.stages, stageRow{name: name})
	return &s.stages[len(s.stages)-1]
}

// apply folds one event into the state.
func (s *runState) apply(ev checker.Event, now time.Time) {
	switch ev := ev.(type) {
	case checker.StageStarted:
		st := s.stage(ev.Stage)
		st.status, st.began = "running", now
	case checker.StageDone:
		st := s.stage(ev.Stage)
		st.status, st.detail = ev.Status, ev.Detail
		st.dur += ev.Duration
	case checker.BuildLine:
		s.buildN++
		s.build = appendKeep(s.build, cleanLine(ev.Line), buildKeep)
	case checker.CrossCheckStarted:
		// The first check got past correctness; the same stages run again, on the CPU.
		s.cross = ev.Ranks
		for i := range s.stages {
			s.stages[i] = stageRow{name: s.stages[i].name}
		}
	case checker.RunStarted:
		s.run, s.runDir = ev.Run, ev.Dir
		s.ranks = s.ranks[:0]
		for r := 0; r < ev.Ranks; r++ {
			s.ranks = append(s.ranks, rankRow{rank: r, state: "running", began: now})
		}
	case checker.RankLine:
		if rr := s.rank(ev.Rank); rr != nil {
			rr.lines++
			rr.tail = appendKeep(rr.tail, cleanLine(ev.Line), tailKeep)
		}
	case checker.RankState:
		if rr := s.rank(ev.Rank); rr != nil {
			// A rank's end comes live from the launcher, then again in the run's summary: keep
			// the time it was first seen to end.
			if rr.ended.IsZero() {
				rr.ended = now
			}
			rr.state, rr.exit, rr.signal = ev.State, ev.Exit, ev.Signal
		}
	}
}

func (s *runState) rank(r int) *rankRow {
	if r < 0 || r > 4096 {
		return nil
	}
	for len(s.ranks) <= r {
		s.ranks = append(s.ranks, rankRow{rank: len(s.ranks), state: "running"})
	}
	return &s.ranks[r]
}

// clone copies the state so the UI can read it while the check goes on.
func (s *runState) clone() runState {
	c := *s
	c.stages = append([]stageRow(nil), s.stages...)
	c.build = append([]string(nil), s.build...)
	c.ranks = make([]rankRow, len(s.ranks))
	for i, r := range s.ranks {
		r.tail = append([]string(nil), r.tail...)
		c.ranks[i] = r
	}
	return c
}

func appendKeep(xs []string, x string, keep int) []string {
	xs = append(xs, x)
	if len(xs) > keep {
		// Drop the oldest quarter at once so appends stay cheap.
		drop := len(xs) - keep + keep/4
		xs = append(xs[:0], xs[drop:]...)
	}
	return xs
}

// job is one check in flight.
type job struct {
	e      *course.Exercise
	cancel context.CancelFunc
	notify chan struct{} // one slot: there is news
	done   chan struct{} // closed when the check and its bookkeeping are over
	now    func() time.Time
	// watch is set when a file save started the check.
	watch bool

	// first is the state before the check began (the goroutine may be ahead of it already).
	first runState

	mu        sync.Mutex
	st        runState
	report    *checker.Report
	progress  *workspace.Progress
	canceled  bool
	canceling bool
}

// jobUpdateMsg says the job has news; jobDoneMsg that it ended.
type jobUpdateMsg struct{ j *job }
type jobDoneMsg struct{ j *job }

// startJob checks e's workspace files in a goroutine.
func (s *session) startJob(e *course.Exercise) *job {
	ctx, cancel := context.WithCancel(s.ctx)
	j := &job{
		e: e, cancel: cancel, now: s.now,
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
		st:     newRunState(e, s.now()),
	}
	j.first = j.st.clone()
	t := checker.Target{Exercise: e, Files: s.ws.Files(e), Label: "yours", Root: s.ws.Root}
	go func() {
		defer close(j.done)
		defer cancel()
		rep := s.check(ctx, t, j.event)
		if rep == nil {
			rep = failedReport(t, "the checker returned no report")
		}
		canceled := ctx.Err() != nil
		if !canceled {
			s.record(e, rep)
			saveMeasured(s.ws, e, rep)
		}
		p, _, _ := s.ws.LoadProgress()
		j.mu.Lock()
		j.report, j.canceled, j.progress = rep, canceled, p
		j.mu.Unlock()
	}()
	return j
}

// event is the checker's Events callback: it never blocks.
func (j *job) event(ev checker.Event) {
	j.mu.Lock()
	j.st.apply(ev, j.now())
	j.mu.Unlock()
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// waitCmd waits for the job's next news or its end.
func (j *job) waitCmd() tea.Cmd {
	return func() tea.Msg {
		select {
		case <-j.notify:
			return jobUpdateMsg{j}
		case <-j.done:
			return jobDoneMsg{j}
		}
	}
}

func (j *job) snapshot() runState {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.st.clone()
}

// stop cancels the check: the checker's context kills every rank.
func (j *job) stop() {
	j.mu.Lock()
	j.canceling = true
	j.mu.Unlock()
	j.cancel()
}

func (j *job) isCanceling() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.canceling
}

// headlineValue is the measured headline figure of a report: the learner's value of the
// headline case, in the metric's unit.
func headlineValue(r *checker.Report) (float64, bool) {
	if r == nil || r.Perf == nil {
		return 0, false
	}
	for _, c := range r.Perf.Cases {
		if c.Case == r.Perf.Case {
			v := float64(c.Yours)
			if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				return 0, false
			}
			return v, true
		}
	}
	return 0, false
}

// saveMeasured puts the measured headline figure in the newest prediction still waiting for
// one.
func saveMeasured(ws *workspace.Workspace, e *course.Exercise, r *checker.Report) {
	v, ok := headlineValue(r)
	if !ok || e.Perf == nil {
		return
	}
	_ = ws.UpdateProgress(func(p *workspace.Progress) error {
		ep := p.Exercises[e.ID]
		if ep == nil {
			return nil
		}
		for i := len(ep.Predictions) - 1; i >= 0; i-- {
			pr := &ep.Predictions[i]
			if pr.Measured == 0 && (pr.Metric == r.Perf.Metric || pr.Metric == "") {
				pr.Measured = v
				return nil
			}
		}
		return nil
	})
}

// predictionLine compares the learner's newest prediction for e with what was measured.
func predictionLine(ep *workspace.ExerciseProgress, r *checker.Report) string {
	if ep == nil || len(ep.Predictions) == 0 {
		return ""
	}
	pr := ep.Predictions[len(ep.Predictions)-1]
	unit := metricUnit(pr.Metric)
	v, ok := headlineValue(r)
	if !ok {
		return fmt.Sprintf("You predicted %s %s; this check measured no timing to compare it with.", fmtNum(pr.Predicted), unit)
	}
	diff := (v - pr.Predicted) / pr.Predicted * 100
	return fmt.Sprintf("You predicted %s %s; measured %s %s (%+.0f%% from your guess).", fmtNum(pr.Predicted), unit, fmtNum(v), unit, diff)
}
