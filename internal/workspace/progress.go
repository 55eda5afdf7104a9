package workspace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ProgressSchema is the version of progress.json this package writes. A file with a higher
// number was written by a newer mgpu-learn.
const ProgressSchema = 1

// MaxAttempts is how many attempts (and predictions) an exercise keeps; older ones are dropped.
const MaxAttempts = 50

// Exercise statuses.
const (
	StatusNotStarted = "not_started"
	StatusAttempted  = "attempted"
	// StatusCorrect: the learner's code passed every correctness case, but the exercise's
	// speed target was never judged (a machine without GPUs, or --no-perf). Not a pass.
	StatusCorrect = "correct"
	StatusPassed  = "passed"
)

// Attempt targets: the learner's files or the reference solution.
const (
	TargetYours    = "yours"
	TargetSolution = "solution"
)

// VerdictPassed is the verdict of a check that passed (checker.Passed).
const VerdictPassed = "passed"

// progressFile is the name of the progress record in the state folder.
const progressFile = "progress.json"

// lockTimeout bounds the wait for another process's progress update.
var lockTimeout = 10 * time.Second

// Progress is the learner's record, .mgpu-learn/progress.json.
type Progress struct {
	Schema    int                          `json:"schema"`
	Exercises map[string]*ExerciseProgress `json:"exercises"`
	// LastExercise is the id of the exercise the learner worked on last.
	LastExercise string `json:"last_exercise,omitempty"`
	// LessonPage is the page index the learner last read, by lesson id.
	LessonPage map[string]int `json:"lesson_page"`
	UpdatedAt  time.Time      `json:"updated_at"`
}

// ExerciseProgress is the record of one exercise.
type ExerciseProgress struct {
	Status string `json:"status"` // StatusNotStarted, StatusAttempted, StatusCorrect or StatusPassed
	// Attempts are the newest MaxAttempts checks, oldest first.
	Attempts   []Attempt `json:"attempts,omitempty"`
	HintsShown int       `json:"hints_shown,omitempty"`
	// Best is the best headline figure per metric of passing checks of the learner's files.
	Best           map[string]float64 `json:"best,omitempty"`
	Predictions    []Prediction       `json:"predictions,omitempty"`
	SolutionViewed bool               `json:"solution_viewed,omitempty"`
}

// Attempt is one check.
type Attempt struct {
	Time    time.Time `json:"time"`
	Target  string    `json:"target"`  // TargetYours or TargetSolution
	Verdict string    `json:"verdict"` // the checker's verdict: VerdictPassed, "failed", ...
	// Stage is where a failing check stopped ("build", "correctness"...).
	Stage      string             `json:"stage,omitempty"`
	Headline   map[string]float64 `json:"headline,omitempty"`
	DurationMS int64              `json:"duration_ms"`
	// SpeedUnjudged: a passing check of an exercise with a speed target that did not judge the
	// speed (StatusCorrect).
	SpeedUnjudged bool `json:"speed_unjudged,omitempty"`
}

// Prediction is the learner's guess of a figure before a run, and what was measured.
type Prediction struct {
	Time      time.Time `json:"time"`
	Metric    string    `json:"metric"`
	Predicted float64   `json:"predicted"`
	Measured  float64   `json:"measured"`
}

// NewProgress returns an empty record.
func NewProgress() *Progress {
	return &Progress{Schema: ProgressSchema, Exercises: map[string]*ExerciseProgress{}, LessonPage: map[string]int{}}
}

// Exercise returns the record of exercise id, creating it when there is none.
func (p *Progress) Exercise(id string) *ExerciseProgress {
	ep := p.Exercises[id]
	if ep == nil {
		ep = &ExerciseProgress{Status: StatusNotStarted}
		p.Exercises[id] = ep
	}
	return ep
}

// Status is the status of exercise id, StatusNotStarted when it has no record.
func (p *Progress) Status(id string) string {
	if ep := p.Exercises[id]; ep != nil {
		return ep.Status
	}
	return StatusNotStarted
}

// Record adds an attempt (stamped now if it has no time) and updates the status: a check of the
// learner's files makes the exercise attempted, correct when it passed without its speed being
// judged, or passed when it passed; passed stays passed, correct stays at least correct.
// Checks of the solution change no status.
func (ep *ExerciseProgress) Record(a Attempt) {
	if a.Time.IsZero() {
		a.Time = time.Now().UTC()
	}
	ep.Attempts = append(ep.Attempts, a)
	if n := len(ep.Attempts); n > MaxAttempts {
		ep.Attempts = append([]Attempt(nil), ep.Attempts[n-MaxAttempts:]...)
	}
	if a.Target != TargetYours || ep.Status == StatusPassed {
		return
	}
	switch {
	case a.Verdict == VerdictPassed && !a.SpeedUnjudged:
		ep.Status = StatusPassed
	case a.Verdict == VerdictPassed:
		ep.Status = StatusCorrect
	case ep.Status != StatusCorrect:
		ep.Status = StatusAttempted
	}
}

// Predict adds a prediction (stamped now if it has no time), keeping the newest MaxAttempts.
func (ep *ExerciseProgress) Predict(pr Prediction) {
	if pr.Time.IsZero() {
		pr.Time = time.Now().UTC()
	}
	ep.Predictions = append(ep.Predictions, pr)
	if n := len(ep.Predictions); n > MaxAttempts {
		ep.Predictions = append([]Prediction(nil), ep.Predictions[n-MaxAttempts:]...)
	}
}

// SetBest keeps v as the best figure for metric when it beats the one kept (higher or lower is
// better as higherBetter says); it reports whether it did. Values that are not finite are
// ignored.
func (ep *ExerciseProgress) SetBest(metric string, v float64, higherBetter bool) bool {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	old, ok := ep.Best[metric]
	if ok && (higherBetter && v <= old || !higherBetter && v >= old) {
		return false
	}
	if ep.Best == nil {
		ep.Best = map[string]float64{}
	}
	ep.Best[metric] = v
	return true
}

// LoadProgress reads the progress record. A missing file gives an empty record. A file that is
// not valid progress, or that a newer mgpu-learn wrote, is moved aside (progress.json.corrupt-<time>
// or progress.json.future-<time>) and an empty record returned with a warning that names both
// files; the error is only for a file that cannot be read or moved at all.
func (w *Workspace) LoadProgress() (*Progress, []string, error) {
	p, bad, err := w.readProgress()
	if err != nil || bad == nil {
		return p, nil, err
	}
	// Moving the file aside must not race with another process that is writing it.
	unlock, err := w.lock()
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	p, warnings, err := w.loadLocked()
	return p, warnings, err
}

// UpdateProgress applies fn to the current record and saves the result, holding an exclusive
// lock on .mgpu-learn/lock meanwhile so that concurrent mgpu-learn processes (and goroutines)
// lose no update. It waits up to 10 s for the lock. When fn returns an error nothing is saved
// and that error is returned. fn must not call LoadProgress or UpdateProgress. Warnings about a
// file moved aside are kept for TakeWarnings.
func (w *Workspace) UpdateProgress(fn func(*Progress) error) error {
	unlock, err := w.lock()
	if err != nil {
		return err
	}
	defer unlock()
	p, warnings, err := w.loadLocked()
	if err != nil {
		return err
	}
	for _, msg := range warnings {
		w.warn(msg)
	}
	if err := fn(p); err != nil {
		return err
	}
	return w.writeProgress(p)
}

// badProgress says why a progress file cannot be used.
type badProgress struct {
	kind   string // "corrupt" or "future"
	reason string
}

// readProgress reads and decodes progress.json without a lock; bad is set when the file is
// unusable.
func (w *Workspace) readProgress() (*Progress, *badProgress, error) {
	data, err := os.ReadFile(w.StatePath(progressFile))
	if errors.Is(err, fs.ErrNotExist) {
		return NewProgress(), nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var head struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, &badProgress{"corrupt", fmt.Sprintf("not valid JSON (%v)", err)}, nil
	}
	switch {
	case head.Schema == nil:
		return nil, &badProgress{"corrupt", "missing its schema number"}, nil
	case *head.Schema > ProgressSchema:
		return nil, &badProgress{"future", fmt.Sprintf("written by a newer mgpu-learn (schema %d; this one reads %d)", *head.Schema, ProgressSchema)}, nil
	case *head.Schema < 1:
		return nil, &badProgress{"corrupt", fmt.Sprintf("of an unknown schema %d", *head.Schema)}, nil
	}
	p := NewProgress()
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(p); err != nil {
		return nil, &badProgress{"corrupt", fmt.Sprintf("not valid progress (%v)", err)}, nil
	}
	p.normalize()
	return p, nil, nil
}

// loadLocked reads the record with the lock held, moving an unusable file aside.
func (w *Workspace) loadLocked() (*Progress, []string, error) {
	p, bad, err := w.readProgress()
	if err != nil || bad == nil {
		return p, nil, err
	}
	name := w.StatePath(progressFile)
	stamp := time.Now().UTC().Format("20060102T150405Z")
	aside := name + "." + bad.kind + "-" + stamp
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, fs.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.%s-%s-%d", name, bad.kind, stamp, i)
	}
	if err := os.Rename(name, aside); err != nil {
		return nil, nil, fmt.Errorf("%s is %s and could not be moved aside: %w", name, bad.reason, err)
	}
	syncDir(filepath.Dir(name))
	msg := fmt.Sprintf("%s was %s; moved it to %s and started with empty progress", name, bad.reason, aside)
	return NewProgress(), []string{msg}, nil
}

// normalize mends what a hand-edited file may lack.
func (p *Progress) normalize() {
	p.Schema = ProgressSchema
	if p.Exercises == nil {
		p.Exercises = map[string]*ExerciseProgress{}
	}
	if p.LessonPage == nil {
		p.LessonPage = map[string]int{}
	}
	for id, ep := range p.Exercises {
		if ep == nil {
			delete(p.Exercises, id)
			continue
		}
		switch ep.Status {
		case StatusNotStarted, StatusAttempted, StatusCorrect, StatusPassed:
		default:
			ep.Status = StatusNotStarted
			if len(ep.Attempts) > 0 {
				ep.Status = StatusAttempted
			}
		}
	}
}

// writeProgress saves p atomically: temporary file, fsync, rename, fsync of the folder.
func (w *Workspace) writeProgress(p *Progress) error {
	p.Schema = ProgressSchema
	p.UpdatedAt = time.Now().UTC()
	p.tidy()
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(w.StatePath(progressFile), append(data, '\n'), 0o644)
}

// tidy keeps the newest MaxAttempts attempts and predictions, however they were added, and
// removes values JSON cannot hold (NaN, ±Inf), which would make every later save fail.
func (p *Progress) tidy() {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, ep := range p.Exercises {
		if ep == nil {
			continue
		}
		if n := len(ep.Attempts); n > MaxAttempts {
			ep.Attempts = append([]Attempt(nil), ep.Attempts[n-MaxAttempts:]...)
		}
		if n := len(ep.Predictions); n > MaxAttempts {
			ep.Predictions = append([]Prediction(nil), ep.Predictions[n-MaxAttempts:]...)
		}
		for k, v := range ep.Best {
			if !finite(v) {
				delete(ep.Best, k)
			}
		}
		for _, a := range ep.Attempts {
			for k, v := range a.Headline {
				if !finite(v) {
					delete(a.Headline, k)
				}
			}
		}
		kept := ep.Predictions[:0]
		for _, pr := range ep.Predictions {
			if finite(pr.Predicted) && finite(pr.Measured) {
				kept = append(kept, pr)
			}
		}
		ep.Predictions = kept
	}
}

// lock takes the exclusive lock on .mgpu-learn/lock, waiting up to lockTimeout.
func (w *Workspace) lock() (unlock func(), err error) {
	name := w.StatePath("lock")
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockTimeout)
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", name, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s is held by another mgpu-learn process for over %s; try again when it is done", name, lockTimeout)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
