package checker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxRecordLine bounds one record line; a longer line is a protocol error, not a reason to
// hold a runaway file in memory.
const maxRecordLine = 16 << 20

// record is one line of a rank's result file (docs/protocol.md §2). Numbers that may be NaN
// are Float: the C harness writes null for them.
type record struct {
	T    string `json:"t"`
	Rank *int   `json:"rank"`

	// start
	World     int    `json:"world"`
	LocalRank int    `json:"local_rank"`
	Device    int    `json:"device"`
	GPU       string `json:"gpu"`
	PID       int    `json:"pid"`
	Harness   string `json:"harness"`
	Exercise  string `json:"exercise"`

	// case
	Case      string     `json:"case"`
	N         int64      `json:"n"`
	OK        *bool      `json:"ok"`
	Checked   int64      `json:"checked"`
	Bad       int64      `json:"bad"`
	Unwritten int64      `json:"unwritten"`
	GuardHits int64      `json:"guard_hits"`
	MaxAbsErr Float      `json:"max_abs_err"`
	MaxRelErr Float      `json:"max_rel_err"`
	First     []Mismatch `json:"first"`
	Msg       string     `json:"msg"`

	// timing
	Who    string  `json:"who"`
	Bytes  Float   `json:"bytes"`
	Factor Float   `json:"factor"`
	Metric string  `json:"metric"`
	US     []Float `json:"us"`
	WallUS []Float `json:"wall_us"`

	// value
	Name  string `json:"name"`
	Value *Float `json:"value"`
	Unit  string `json:"unit"`

	// error
	Where string `json:"where"`
	Call  string `json:"call"`
	File  string `json:"file"`
	Line  int    `json:"line"`
	Code  int64  `json:"code"`

	// done
	Summary *doneSummary `json:"summary"`
	// NCCL's watch (ncclwatch.go): on a rank whose harness opened it.
	NCCL *ncclWatchInfo `json:"nccl"`
}

// doneSummary is what a harness says it recorded before done (docs/protocol.md §4).
type doneSummary struct {
	Records       int64 `json:"records"`
	Cases         int64 `json:"cases"`
	Checked       int64 `json:"checked"`
	TimingSamples int64 `json:"timing_samples"`
	Handed        int64 `json:"handed"` // outputs handed to or received from a verifier
}

// rankRecords is everything one rank wrote.
type rankRecords struct {
	Rank    int
	Path    string
	Missing bool // the file does not exist: the rank never started the harness
	Start   *record
	Cases   []record
	Timings []record
	Values  []record
	Notes   []string
	Errors  []record
	Done    bool
	// Truncated is set when the last line was cut off (no newline, not JSON): the rank died
	// while writing it. It is dropped.
	Truncated bool
	Unknown   []string // record types this checker does not know (ignored)
	// SummaryProblem says how the done record's summary disagrees with the records received
	// ("" when it agrees): records were lost, added or changed on the way.
	SummaryProblem string
	// Handed is how many outputs the rank handed to its verifier, or the verifier received,
	// by its done record (docs/protocol.md §4, "The verifier").
	Handed int64
	// NCCL is what NCCL's watch counted, from the done record (nil without one).
	NCCL  *ncclWatchInfo
	count int64 // records before done
}

// recordError is a result file that breaks the protocol; the runner's fault.
type recordError struct {
	Path string
	Line int
	Msg  string
}

func (e *recordError) Error() string { return fmt.Sprintf("%s:%d: %s", e.Path, e.Line, e.Msg) }

// parseRecords reads JSON lines from r. A cut-off last line is tolerated (Truncated); any other
// line that is not a valid record is an error naming path:line.
func parseRecords(r io.Reader, path string, rank int) (*rankRecords, error) {
	rr := &rankRecords{Rank: rank, Path: path}
	br := bufio.NewReaderSize(r, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			if errors.Is(err, errLongLine) {
				return rr, &recordError{path, lineNo, fmt.Sprintf("record longer than %d bytes", maxRecordLine)}
			}
			return rr, err
		}
		complete := bytes.HasSuffix(line, []byte("\n"))
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			if errors.Is(err, io.EOF) {
				break
			}
			continue
		}
		var rec record
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		perr := dec.Decode(&rec)
		if perr == nil && dec.More() {
			perr = errors.New("more than one JSON value on the line")
		}
		if perr != nil {
			if !complete {
				// The rank died in the middle of writing its last record.
				rr.Truncated = true
				break
			}
			return rr, &recordError{path, lineNo, "not a JSON record: " + shortErr(perr, trimmed)}
		}
		if rr.Done {
			return rr, &recordError{path, lineNo, fmt.Sprintf("%q record after \"done\" (done must be the last record)", rec.T)}
		}
		if err := rr.add(&rec); err != nil {
			return rr, &recordError{path, lineNo, err.Error()}
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	return rr, nil
}

var errLongLine = errors.New("line too long")

// readLine returns the next line including its newline (absent at EOF).
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxRecordLine {
			return nil, errLongLine
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

func shortErr(err error, line []byte) string {
	s := string(line)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return fmt.Sprintf("%v: %q", err, s)
}

func (rr *rankRecords) add(rec *record) error {
	if rec.T == "" {
		return errors.New(`record without "t"`)
	}
	if rec.Rank == nil {
		return fmt.Errorf("%q record without \"rank\"", rec.T)
	}
	if *rec.Rank != rr.Rank {
		return fmt.Errorf("%q record of rank %d in rank %d's file", rec.T, *rec.Rank, rr.Rank)
	}
	if rr.Start == nil && rec.T != "start" {
		return fmt.Errorf("%q record before \"start\" (start must be the first record)", rec.T)
	}
	switch rec.T {
	case "start":
		if rr.Start != nil {
			return errors.New(`second "start" record`)
		}
		rr.Start = rec
	case "case":
		if rec.Case == "" {
			return errors.New(`"case" record without a case name`)
		}
		if rec.OK == nil {
			return fmt.Errorf("case %q: record without \"ok\"", rec.Case)
		}
		rr.Cases = append(rr.Cases, *rec)
	case "timing":
		if rec.Case == "" || (rec.Who != "yours" && rec.Who != "baseline") {
			return fmt.Errorf(`"timing" record needs a case and who "yours" or "baseline" (got case %q, who %q)`, rec.Case, rec.Who)
		}
		if len(rec.US) != len(rec.WallUS) && len(rec.WallUS) != 0 {
			return fmt.Errorf("timing %q/%s: %d samples in us but %d in wall_us", rec.Case, rec.Who, len(rec.US), len(rec.WallUS))
		}
		switch rec.Metric {
		case "busbw", "algbw", "time":
		default:
			return fmt.Errorf("timing %q/%s: unknown metric %q", rec.Case, rec.Who, rec.Metric)
		}
		rr.Timings = append(rr.Timings, *rec)
	case "value":
		if rec.Value == nil {
			return fmt.Errorf("value %q without a value", rec.Name)
		}
		rr.Values = append(rr.Values, *rec)
	case "note":
		rr.Notes = append(rr.Notes, rec.Msg)
	case "drained":
		// A verifier caught up with its rank before the rank timed (docs/protocol.md §4).
	case "error":
		rr.Errors = append(rr.Errors, *rec)
	case "done":
		rr.Done = true
		rr.SummaryProblem = rr.checkSummary(rec.Summary)
		rr.NCCL = rec.NCCL
	default:
		rr.Unknown = append(rr.Unknown, rec.T)
	}
	if rec.T != "done" {
		rr.count++
	}
	return nil
}

// checkSummary compares the done record's summary with what came before it.
func (rr *rankRecords) checkSummary(s *doneSummary) string {
	if s == nil {
		return "its done record carries no summary of what the harness recorded"
	}
	var checked, samples int64
	for _, c := range rr.Cases {
		checked += c.Checked
	}
	for _, t := range rr.Timings {
		samples += int64(len(t.US))
	}
	rr.Handed = s.Handed // not countable from the records: the verifier's count must match it
	got := doneSummary{Records: rr.count, Cases: int64(len(rr.Cases)), Checked: checked, TimingSamples: samples, Handed: s.Handed}
	if got != *s {
		return fmt.Sprintf("the harness recorded %d records (%d cases, %d elements checked, %d timing samples) but %d records (%d cases, %d elements checked, %d timing samples) arrived",
			s.Records, s.Cases, s.Checked, s.TimingSamples, got.Records, got.Cases, got.Checked, got.TimingSamples)
	}
	return ""
}
