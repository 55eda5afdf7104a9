// Package api is the wire contract between `mgpu-learn workshop serve` (the class server) and
// the learner's mgpu-learn (join, report posting, status). Both sides import these types; the
// HTTP paths and limits below are the whole protocol, documented for people in docs/workshop.md.
//
// Compatibility: fields may be added, never removed or changed in meaning; a reader ignores
// fields it does not know. A breaking change takes a new path prefix (/api/v2).
package api

import "time"

// Paths. Every request but Join and the dashboard's login carries
// "Authorization: Bearer <token>": a learner token for Reports and Me, the instructor token for
// ClassStatus, the dashboard and the exports.
const (
	PathJoin        = "/api/v1/join"         // POST JoinRequest → JoinResponse
	PathReports     = "/api/v1/reports"      // POST Submission → SubmitResponse (the one ingest endpoint)
	PathMe          = "/api/v1/me"           // GET → MeResponse: the learner's own submissions only
	PathClassStatus = "/api/v1/class/status" // GET → ClassStatus (instructor)
)

// Limits the server enforces and the client respects.
const (
	MaxBodyBytes     = 256 << 10 // a larger body gets 413 and changes nothing
	MaxCodeBytes     = 128 << 10 // opted-in source files, all together
	MaxNameRunes     = 64        // learner display name
	MaxFigures       = 32
	MaxTextRunes     = 4096 // headline, message and any other free-text field, each
	HeaderAuthPrefix = "Bearer "
)

// JoinRequest is what `mgpu-learn workshop join URL CODE` sends once per workspace.
type JoinRequest struct {
	Code string `json:"code"` // the class's join code, as the instructor handed it out
	Name string `json:"name"` // how the learner appears on the dashboard
}

// JoinResponse hands the learner a token that only this learner holds.
type JoinResponse struct {
	Class   string `json:"class"`   // the class's name
	Learner string `json:"learner"` // the learner's id in the class (opaque)
	Name    string `json:"name"`    // the display name, as the server stored it
	Token   string `json:"token"`   // the learner's bearer token
}

// Submission is one check's report, as the learner's mgpu-learn posts it after every check.
// It carries the verdict and the figures, never the learner's code unless Code is set (the
// learner opted in for this submission).
type Submission struct {
	// ID is chosen by the client (random, 32 hex digits) when the check ends; a resend of a
	// queued submission carries the same ID and the server stores it once.
	ID       string    `json:"id"`
	Exercise string    `json:"exercise"` // "module0/peer-copy"
	Target   string    `json:"target"`   // "yours", "solution", "starter", "variant:<name>"
	Verdict  string    `json:"verdict"`  // passed, failed, refused, error, inconclusive
	Stage    string    `json:"stage"`    // the failing stage, or the last that ran
	Fault    string    `json:"fault"`    // you, runner, machine, ""
	Headline string    `json:"headline"` // the report's one line
	Attempt  int       `json:"attempt"`  // this exercise's attempt number in the learner's workspace
	Started  time.Time `json:"started"`
	Duration float64   `json:"duration_s"`
	Perf     *Perf     `json:"perf,omitempty"`    // when performance was judged
	Figures  []Figure  `json:"figures,omitempty"` // the report's values: the learner's own numbers
	Machine  Machine   `json:"machine"`
	Code     []File    `json:"code,omitempty"` // only when the learner opted in (check --share-code)
	Version  string    `json:"version"`        // mgpu-learn's version
}

// Perf is the headline of the performance stage.
type Perf struct {
	Metric   string  `json:"metric"` // busbw, algbw, time
	Unit     string  `json:"unit"`   // GB/s, us
	Case     string  `json:"case"`
	Ratio    float64 `json:"ratio"`    // median paired ratio, above 1 is faster than the baseline
	Yours    float64 `json:"yours"`    // median of the metric, the learner's code
	Baseline float64 `json:"baseline"` // median of the metric, the baseline
}

// Figure is one value record of the report.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Machine summarizes where the check ran; nothing that identifies a person.
type Machine struct {
	GPUs   int    `json:"gpus"`
	GPU    string `json:"gpu,omitempty"`    // "NVIDIA H200"
	Driver string `json:"driver,omitempty"` // driver version
	CUDA   string `json:"cuda,omitempty"`   // nvcc version
	Slurm  bool   `json:"slurm,omitempty"`  // ran inside a Slurm allocation
}

// File is one opted-in source file.
type File struct {
	Name    string `json:"name"`
	Content string `json:"content"`
}

// SubmitResponse says whether the submission was stored now or had been stored before.
type SubmitResponse struct {
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// Error is the body of every 4xx and 5xx answer.
type Error struct {
	Error string `json:"error"`
}

// MeResponse is the learner's own view: what the server holds of them, nothing of others.
type MeResponse struct {
	Class       string        `json:"class"`
	Name        string        `json:"name"`
	Submissions []MySubmitted `json:"submissions"`
}

// MySubmitted is one stored submission of the asking learner.
type MySubmitted struct {
	ID       string    `json:"id"`
	Exercise string    `json:"exercise"`
	Verdict  string    `json:"verdict"`
	Stage    string    `json:"stage"`
	Received time.Time `json:"received"`
}

// ClassStatus is the instructor's view, the same facts as the dashboard (`workshop status`).
type ClassStatus struct {
	Class     string        `json:"class"`
	Generated time.Time     `json:"generated"`
	Exercises []string      `json:"exercises"` // columns, course order where known
	Learners  []LearnerRow  `json:"learners"`  // rows, by name
	Stuck     []StuckReport `json:"stuck"`
}

// LearnerRow is one learner's row of the grid.
type LearnerRow struct {
	Learner  string                 `json:"learner"`
	Name     string                 `json:"name"`
	LastSeen time.Time              `json:"last_seen"`
	Cells    map[string]LearnerCell `json:"cells"` // by exercise id
}

// LearnerCell is one learner × exercise cell.
type LearnerCell struct {
	State    string  `json:"state"` // passed, failing, not-started
	Attempts int     `json:"attempts"`
	Stage    string  `json:"stage,omitempty"` // the last failing stage
	Ratio    float64 `json:"ratio,omitempty"` // best judged ratio
}

// StuckReport names a learner who seems stuck and why.
type StuckReport struct {
	Learner  string `json:"learner"`
	Name     string `json:"name"`
	Exercise string `json:"exercise"`
	Reason   string `json:"reason"` // "7 failed attempts at correctness", "no progress for 25 min"
}
