package server

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Cell states.
const (
	statePassed     = "passed"
	stateFailing    = "failing"
	stateNotStarted = "not-started"
)

// snapshot is everything the dashboard, the status API and the exports show of a class, computed
// from the learners' reports of target "yours" (checks of the solution, the starter or a variant
// are stored and exported but do not fill the grid).
type snapshot struct {
	api.ClassStatus
	Reports   int            // every stored report, all targets
	Exercises []exerciseView // one per column
}

// exerciseView is one exercise's column summary: who passed, the ratio histogram, the leaders.
type exerciseView struct {
	ID      string
	Tried   int
	Passed  int
	Ratios  []float64 // each learner's best measured ratio
	Hist    *histogram
	Leaders []leader // best passing ratio, highest first
}

type leader struct {
	Rank    int
	Learner string
	Name    string
	Ratio   float64
	At      time.Time
}

// cellAcc folds one learner's reports on one exercise, oldest first.
type cellAcc struct {
	attempts   int
	passed     bool
	stage      string // the last failing stage
	runStage   string // the stage of the current run of failures at one stage
	run        int
	best       float64 // best measured ratio
	hasBest    bool
	bestPass   float64 // best ratio of a passing report
	hasPass    bool
	bestPassAt time.Time
	first      time.Time
}

func (c *cellAcc) add(verdict, stage string, ratio sql.NullFloat64, at time.Time) {
	if c.attempts == 0 {
		c.first = at
	}
	c.attempts++
	if verdict == "passed" {
		c.passed = true
		c.run, c.runStage = 0, ""
	} else {
		c.stage = stage
		if c.run > 0 && stage == c.runStage {
			c.run++
		} else {
			c.run, c.runStage = 1, stage
		}
	}
	if ratio.Valid {
		if !c.hasBest || ratio.Float64 > c.best {
			c.best, c.hasBest = ratio.Float64, true
		}
		if verdict == "passed" && (!c.hasPass || ratio.Float64 > c.bestPass) {
			c.bestPass, c.hasPass, c.bestPassAt = ratio.Float64, true, at
		}
	}
}

func (c *cellAcc) cell() api.LearnerCell {
	out := api.LearnerCell{State: stateNotStarted, Attempts: c.attempts}
	switch {
	case c.passed:
		out.State = statePassed
	case c.attempts > 0:
		out.State, out.Stage = stateFailing, c.stage
	}
	if c.hasBest {
		out.Ratio = c.best
	}
	return out
}

// stuck says why a learner seems stuck on this exercise, or "".
func (c *cellAcc) stuck(cfg *Config, now time.Time) string {
	if c.passed || c.attempts == 0 {
		return ""
	}
	var why []string
	if c.attempts >= cfg.StuckAttempts {
		why = append(why, fmt.Sprintf("%d failed attempts", c.attempts))
	}
	if c.run >= cfg.StuckRepeats {
		stage := c.runStage
		if stage == "" {
			stage = "the same stage"
		}
		why = append(why, fmt.Sprintf("failed at %s %d times in a row", stage, c.run))
	}
	if d := now.Sub(c.first); d >= cfg.StuckAfter {
		why = append(why, fmt.Sprintf("no progress for %d min", int(d.Minutes())))
	}
	return strings.Join(why, "; ")
}

type learnerAcc struct {
	id       int64
	pub      string
	name     string
	lastSeen time.Time
	cells    map[string]*cellAcc
	current  string // the exercise of the latest report of their own code
}

// snapshot computes the class's state now.
func (s *Server) snapshot(ctx context.Context, c *class) (*snapshot, error) {
	now := s.cfg.Now()
	rows, err := s.st.r.QueryContext(ctx, `SELECT id, public_id, name, joined_ms FROM learners WHERE class_id = ?`, c.ID)
	if err != nil {
		return nil, err
	}
	byID := map[int64]*learnerAcc{}
	var learners []*learnerAcc
	for rows.Next() {
		l := &learnerAcc{cells: map[string]*cellAcc{}}
		var ms int64
		if err := rows.Scan(&l.id, &l.pub, &l.name, &ms); err != nil {
			rows.Close()
			return nil, err
		}
		l.lastSeen = fromMillis(ms)
		byID[l.id] = l
		learners = append(learners, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}

	rows, err = s.st.r.QueryContext(ctx, `SELECT s.learner_id, s.exercise, s.target, s.verdict, s.stage, s.ratio, s.received_ms
		FROM submissions s JOIN learners l ON l.id = s.learner_id WHERE l.class_id = ? ORDER BY s.received_ms, s.id`, c.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	snap := &snapshot{}
	columns := map[string]bool{}
	for rows.Next() {
		var lid, ms int64
		var exercise, target, verdict, stage string
		var ratio sql.NullFloat64
		if err := rows.Scan(&lid, &exercise, &target, &verdict, &stage, &ratio, &ms); err != nil {
			return nil, err
		}
		snap.Reports++
		l := byID[lid]
		at := fromMillis(ms)
		if at.After(l.lastSeen) {
			l.lastSeen = at
		}
		if target != "yours" {
			continue
		}
		columns[exercise] = true
		acc := l.cells[exercise]
		if acc == nil {
			acc = &cellAcc{}
			l.cells[exercise] = acc
		}
		acc.add(verdict, stage, ratio, at)
		l.current = exercise
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}

	slices.SortFunc(learners, func(a, b *learnerAcc) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.name), strings.ToLower(b.name)), cmp.Compare(a.name, b.name), cmp.Compare(a.pub, b.pub))
	})
	st := api.ClassStatus{Class: c.Name, Generated: now.UTC(), Exercises: s.sortExercises(columns),
		Learners: []api.LearnerRow{}, Stuck: []api.StuckReport{}}
	views := make([]exerciseView, len(st.Exercises))
	for i, ex := range st.Exercises {
		views[i].ID = ex
	}
	for _, l := range learners {
		row := api.LearnerRow{Learner: l.pub, Name: l.name, LastSeen: l.lastSeen, Cells: map[string]api.LearnerCell{}}
		for i, ex := range st.Exercises {
			acc := l.cells[ex]
			if acc == nil {
				acc = &cellAcc{}
			}
			row.Cells[ex] = acc.cell()
			v := &views[i]
			if acc.attempts > 0 {
				v.Tried++
			}
			if acc.passed {
				v.Passed++
			}
			if acc.hasBest {
				v.Ratios = append(v.Ratios, acc.best)
			}
			if acc.hasPass {
				v.Leaders = append(v.Leaders, leader{Learner: l.pub, Name: l.name, Ratio: acc.bestPass, At: acc.bestPassAt})
			}
		}
		st.Learners = append(st.Learners, row)
		if acc := l.cells[l.current]; acc != nil {
			if why := acc.stuck(&s.cfg, now); why != "" {
				st.Stuck = append(st.Stuck, api.StuckReport{Learner: l.pub, Name: l.name, Exercise: l.current, Reason: why})
			}
		}
	}
	for i := range views {
		v := &views[i]
		slices.SortStableFunc(v.Leaders, func(a, b leader) int {
			return cmp.Or(-cmp.Compare(a.Ratio, b.Ratio), a.At.Compare(b.At))
		})
		for j := range v.Leaders {
			v.Leaders[j].Rank = j + 1
		}
		v.Hist = newHistogram(v.Ratios)
	}
	snap.ClassStatus = st
	snap.Exercises = views
	return snap, nil
}

// sortExercises orders columns: course order first, then by module number and name.
func (s *Server) sortExercises(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for ex := range set {
		out = append(out, ex)
	}
	slices.SortFunc(out, func(a, b string) int {
		ia, aok := s.order[a]
		ib, bok := s.order[b]
		switch {
		case aok && bok:
			return cmp.Compare(ia, ib)
		case aok:
			return -1
		case bok:
			return 1
		}
		return cmp.Or(cmp.Compare(moduleNumber(a), moduleNumber(b)), cmp.Compare(a, b))
	})
	return out
}

func moduleNumber(ex string) int {
	mod, _, _ := strings.Cut(ex, "/")
	n, _ := strconv.Atoi(strings.TrimPrefix(mod, "module"))
	return n
}

// handleStatus is GET /api/v1/class/status: the dashboard's facts as JSON.
func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request, c *class) {
	snap, err := s.snapshot(r.Context(), c)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "status: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, snap.ClassStatus)
}
