package checker

import "time"

// Event is progress reported while a check runs (for the TUI). Checker.Events receives them
// one at a time, in order, never concurrently.
type Event interface{ event() }

// StageStarted: a stage began.
type StageStarted struct {
	Exercise, Target, Stage string
}

// StageDone: a stage ended with a status (ok, failed, skipped, error).
type StageDone struct {
	Exercise, Target, Stage, Status string
	Duration                        time.Duration
	Detail                          string
}

// BuildLine is one line of compiler output.
type BuildLine struct {
	Line string
}

// CrossCheckStarted: the check passed with fewer ranks and runs again on the CPU with Ranks
// ranks (Checker.CrossCheck); the stages that follow are that second check's.
type CrossCheckStarted struct {
	Ranks int
}

// RunStarted: a program run began (a check may run the program more than once to settle
// its timings).
type RunStarted struct {
	Ranks int
	Run   int // 1-based
	Dir   string
}

// RankLine is one line a rank printed.
type RankLine struct {
	Rank int
	Line string
}

// RankState is how a rank ended (launch's state words).
type RankState struct {
	Rank   int
	State  string
	Exit   int
	Signal string
}

func (StageStarted) event()      {}
func (StageDone) event()         {}
func (BuildLine) event()         {}
func (CrossCheckStarted) event() {}
func (RunStarted) event()        {}
func (RankLine) event()          {}
func (RankState) event()         {}
