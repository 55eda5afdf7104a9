package checker

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// Verdicts, the outcome of a check.
const (
	Passed       = "passed"
	Failed       = "failed"       // the learner's code is wrong (exit 1)
	Refused      = "refused"      // this machine cannot run the exercise (exit 3)
	Errored      = "error"        // the runner or the course is at fault (exit 4)
	Inconclusive = "inconclusive" // timings too noisy to judge (exit 5)
)

// Faults say whose doing a failure is.
const (
	FaultYou     = "you"
	FaultRunner  = "runner"
	FaultMachine = "machine"
)

// Stage names, in order.
const (
	StageEnvironment = "environment"
	StageBuild       = "build"
	StagePolicy      = "policy"
	StageRun         = "run"
	StageCorrectness = "correctness"
	StagePerformance = "performance"
)

// Stages lists every stage of a full check, in order.
var Stages = []string{StageEnvironment, StageBuild, StagePolicy, StageRun, StageCorrectness, StagePerformance}

// Stage statuses.
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
	StatusError   = "error"
	// StatusInconclusive: the performance stage could not decide (noisy timings).
	StatusInconclusive = "inconclusive"
)

// Report is the outcome of one check of one target. docs/report-schema.md describes its JSON.
type Report struct {
	Exercise string `json:"exercise"` // "module0/sum"
	Title    string `json:"title"`
	Module   string `json:"module"`
	Target   string `json:"target"` // "yours", "solution", "variant:<name>"
	Verdict  string `json:"verdict"`
	// Stage is the stage that failed, or the last stage that ran when the check passed.
	Stage    string `json:"stage"`
	Fault    string `json:"fault"`
	Headline string `json:"headline"`
	Message  string `json:"message,omitempty"`

	Stages []StageResult `json:"stages"`
	Build  *BuildSummary `json:"build,omitempty"`
	Policy []Violation   `json:"policy,omitempty"`
	Run    *RunSummary   `json:"run,omitempty"`
	Cases  []CaseResult  `json:"cases,omitempty"`
	Perf   *PerfResult   `json:"perf,omitempty"`
	Values []Value       `json:"values,omitempty"`
	Notes  []string      `json:"notes,omitempty"`

	Started  time.Time `json:"started"`
	Duration Seconds   `json:"duration_s"`
}

// ExitCode is the process exit status for this report: 0 passed, 1 failed (the learner's
// code), 3 refused (this machine can't run it), 4 error (the runner's fault), 5 inconclusive.
func (r *Report) ExitCode() int {
	switch r.Verdict {
	case Passed:
		return 0
	case Failed:
		return 1
	case Refused:
		return 3
	case Inconclusive:
		return 5
	default:
		return 4
	}
}

// ExitCode combines reports: the worst of them, ranked error > failed > refused >
// inconclusive > passed. No reports is 0.
func ExitCode(reports []*Report) int {
	rank := map[int]int{0: 0, 5: 1, 3: 2, 1: 3, 4: 4}
	code := 0
	for _, r := range reports {
		if c := r.ExitCode(); rank[c] > rank[code] {
			code = c
		}
	}
	return code
}

// StageResult is one stage's outcome.
type StageResult struct {
	Name     string  `json:"name"`
	Status   string  `json:"status"`
	Duration Seconds `json:"duration_s"`
	Detail   string  `json:"detail,omitempty"`
}

// BuildSummary describes the build.
type BuildSummary struct {
	Cached      bool         `json:"cached"`
	Duration    Seconds      `json:"duration_s"`
	Binary      string       `json:"binary,omitempty"`
	Log         string       `json:"log,omitempty"` // path of the full compiler output
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// Diagnostic is one compiler message, the file as the learner sees it.
type Diagnostic struct {
	File     string `json:"file"`
	Line     int    `json:"line"`
	Severity string `json:"severity"`
	Msg      string `json:"msg"`
	Learner  bool   `json:"learner"` // the file is one of the learner's
}

// Violation is a forbidden call found in the learner's code.
type Violation struct {
	Symbol string `json:"symbol"`        // as the manifest forbids it
	Found  string `json:"found"`         // the symbol as nm or the Python harness saw it
	Via    string `json:"via,omitempty"` // the library's alias of Symbol that was found (pncclAllReduce)
	File   string `json:"file"`          // the learner's file (with ":line" when known)
	Why    string `json:"why"`
	// Rule is "" for a call the manifest forbids, else the integrity rule broken: "harness"
	// (a call of the harness's recording API), "startup" (code before main), "interpose" (a
	// definition replacing a function the driver or harness uses), "driver" (a use of the
	// driver's own functions or data), "python" (mgpu_policy.py), "source" (a #line directive).
	Rule string `json:"rule,omitempty"`
}

// Name is the forbidden call as a learner should read it: the symbol the manifest names, or,
// for a pattern ("nvshmemx_*reduce*"), the name found with the pattern after it.
func (v Violation) Name() string {
	if !strings.Contains(v.Symbol, "*") || v.Found == "" {
		return v.Symbol
	}
	n := demangledName(v.Found)
	if i := strings.LastIndex(n, "::"); i >= 0 {
		n = n[i+2:]
	}
	return n + " (" + v.Symbol + ")"
}

// RunSummary is what happened to the ranks of the (last) run.
type RunSummary struct {
	Launcher    string     `json:"launcher"`
	Ranks       []RankRun  `json:"ranks"`
	Runs        int        `json:"runs"` // program runs (more than 1 when timings were re-run)
	TimedOut    bool       `json:"timed_out"`
	Timeout     Seconds    `json:"timeout_s"`
	FirstFailed int        `json:"first_failed"` // -1 when none
	Elapsed     Seconds    `json:"elapsed_s"`
	Seed        string     `json:"seed"`
	Dir         string     `json:"dir"` // the run's result directory
	Leftover    []int      `json:"leftover,omitempty"`
	Failure     *RankError `json:"failure,omitempty"` // the first error record, if any
	// Confined: the processes ran unable to write the build cache and the course's sources
	// (runtime/confine; C and CUDA exercises where the machine offers Landlock).
	Confined bool `json:"confined,omitempty"`
}

// RankRun is one rank's end.
type RankRun struct {
	Rank     int      `json:"rank"`
	State    string   `json:"state"` // launch's words: done, failed, signaled, hung, killed, unknown
	Exit     int      `json:"exit"`
	Signal   string   `json:"signal,omitempty"`
	Elapsed  Seconds  `json:"elapsed_s"`
	Done     bool     `json:"done"` // wrote its done record
	Tail     string   `json:"tail,omitempty"`
	Dropped  int64    `json:"dropped_bytes,omitempty"`
	Records  string   `json:"records"` // path of rank-<r>.jsonl
	Device   int      `json:"device"`
	GPU      string   `json:"gpu,omitempty"`
	PID      int      `json:"pid,omitempty"`
	Harness  string   `json:"harness,omitempty"`
	Problems []string `json:"problems,omitempty"` // e.g. a truncated last record
}

// RankError is an error record.
type RankError struct {
	Rank  int    `json:"rank"`
	Where string `json:"where"`
	Call  string `json:"call"`
	File  string `json:"file"`
	Line  int    `json:"line"`
	Code  int64  `json:"code"`
	Msg   string `json:"msg"`
}

// CaseResult is one correctness case on one rank.
type CaseResult struct {
	Case      string     `json:"case"`
	Rank      int        `json:"rank"`
	OK        bool       `json:"ok"`
	Missing   bool       `json:"missing,omitempty"` // expected but never recorded
	N         int64      `json:"n"`
	Checked   int64      `json:"checked"`
	Bad       int64      `json:"bad"`
	Unwritten int64      `json:"unwritten"`
	GuardHits int64      `json:"guard_hits"`
	MaxAbsErr Float      `json:"max_abs_err"`
	MaxRelErr Float      `json:"max_rel_err"`
	First     []Mismatch `json:"first,omitempty"`
	Msg       string     `json:"msg,omitempty"`
}

// Mismatch is one wrong element.
type Mismatch struct {
	I    int64  `json:"i"`
	Got  string `json:"got"`
	Want string `json:"want"`
}

// PerfResult is the performance stage's judgement.
type PerfResult struct {
	Metric   string     `json:"metric"` // busbw, algbw, time
	Unit     string     `json:"unit"`   // "GB/s" or "us"
	Case     string     `json:"case"`   // the headline case
	Baseline string     `json:"baseline"`
	Cases    []PerfCase `json:"cases"`
	// Ratio is the headline case's median paired ratio (yours relative to the baseline;
	// above 1 is faster), with its bootstrap 95 % confidence interval.
	Ratio        Float   `json:"ratio"`
	CILow        Float   `json:"ci_low"`
	CIHigh       Float   `json:"ci_high"`
	Target       float64 `json:"target"`        // min_ratio
	SuspectAbove float64 `json:"suspect_above"` // 0: none
	Runs         int     `json:"runs"`
	Samples      int     `json:"samples"` // headline pairs pooled over the runs
	BaselineCV   Float   `json:"baseline_cv"`
	// Outcome: "passed", "failed", "suspect", "unseen" (work the timer did not see),
	// "inconclusive".
	Outcome      string `json:"outcome"`
	Suspect      bool   `json:"suspect"`
	SuspectWhy   string `json:"suspect_reason,omitempty"`
	Inconclusive string `json:"inconclusive_reason,omitempty"`
}

// PerfCase is one timed case: medians over the pooled samples.
type PerfCase struct {
	Case       string `json:"case"`
	Bytes      Float  `json:"bytes"`
	Yours      Float  `json:"yours"`    // metric (GB/s or µs)
	Baseline   Float  `json:"baseline"` // metric
	YoursUS    Float  `json:"yours_us"`
	BaselineUS Float  `json:"baseline_us"`
	YoursWall  Float  `json:"yours_wall_us"`
	BaseWall   Float  `json:"baseline_wall_us"`
	Ratio      Float  `json:"ratio"`
	CILow      Float  `json:"ci_low"`
	CIHigh     Float  `json:"ci_high"`
	Samples    int    `json:"samples"`
}

// Value is a figure the learner's code produced or the driver measured.
type Value struct {
	Rank  int    `json:"rank"`
	Name  string `json:"name"`
	Value Float  `json:"value"`
	Unit  string `json:"unit"`
}

// Seconds is a duration written to JSON as seconds.
type Seconds time.Duration

// MarshalJSON writes the duration in seconds with millisecond precision.
func (s Seconds) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatFloat(math.Round(time.Duration(s).Seconds()*1000)/1000, 'f', -1, 64)), nil
}

// UnmarshalJSON reads seconds.
func (s *Seconds) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*s = Seconds(time.Duration(f * float64(time.Second)))
	return nil
}

func (s Seconds) String() string { return fmtDuration(time.Duration(s)) }

// Float is a float64 whose JSON form survives NaN and infinities: numbers as numbers, the
// others as the strings "NaN", "+Inf", "-Inf". null reads as NaN.
type Float float64

// MarshalJSON implements json.Marshaler.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return []byte(strconv.FormatFloat(v, 'g', -1, 64)), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *Float) UnmarshalJSON(b []byte) error {
	s := string(b)
	switch s {
	case "null", `"NaN"`, `"nan"`:
		*f = Float(math.NaN())
		return nil
	case `"+Inf"`, `"inf"`, `"Inf"`:
		*f = Float(math.Inf(1))
		return nil
	case `"-Inf"`, `"-inf"`:
		*f = Float(math.Inf(-1))
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}
