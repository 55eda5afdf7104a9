package server

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
)

// Exports: every report as CSV (one row per report), the grid as CSV (one row per learner and
// exercise) and the grid as JUnit XML (a suite per learner, a test case per exercise).

// cellSafe keeps a spreadsheet from reading a learner's text as a formula: a cell that starts
// with = + - @ (or a tab or carriage return) gets a leading apostrophe.
func cellSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func num(v float64, ok bool) string {
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

var fileNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// download sets the headers of an attachment named after the class.
func download(w http.ResponseWriter, c *class, suffix, ctype string) {
	name := strings.Trim(fileNameUnsafe.ReplaceAllString(c.Name, "-"), "-")
	if name == "" {
		name = "class"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s"`, name, suffix))
	w.Header().Set("Cache-Control", "no-store")
}

func (s *Server) handleReportsCSV(w http.ResponseWriter, r *http.Request, c *class) {
	rows, err := s.st.r.QueryContext(r.Context(), `SELECT l.public_id, l.name, s.received_ms, s.body
		FROM submissions s JOIN learners l ON l.id = s.learner_id WHERE l.class_id = ? ORDER BY s.received_ms, s.id`, c.ID)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "export: %v", err)
		return
	}
	defer rows.Close()
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write([]string{"learner", "name", "received", "id", "exercise", "target", "verdict", "stage", "fault", "attempt",
		"ratio", "metric", "yours", "baseline", "unit", "duration_s", "started", "gpus", "gpu", "slurm", "version", "code_shared", "headline"})
	for rows.Next() {
		var pub, name, body string
		var ms int64
		if err := rows.Scan(&pub, &name, &ms, &body); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "export: %v", err)
			return
		}
		var sub api.Submission
		if err := json.Unmarshal([]byte(body), &sub); err != nil {
			s.fail(w, r, http.StatusInternalServerError, "export: stored report: %v", err)
			return
		}
		var p api.Perf
		if sub.Perf != nil {
			p = *sub.Perf
		}
		started := ""
		if !sub.Started.IsZero() {
			started = sub.Started.UTC().Format(time.RFC3339)
		}
		cw.Write([]string{pub, cellSafe(name), fromMillis(ms).Format(time.RFC3339Nano), sub.ID, sub.Exercise, sub.Target,
			sub.Verdict, sub.Stage, sub.Fault, strconv.Itoa(sub.Attempt),
			num(p.Ratio, sub.Perf != nil), cellSafe(p.Metric), num(p.Yours, sub.Perf != nil), num(p.Baseline, sub.Perf != nil), cellSafe(p.Unit),
			num(sub.Duration, true), started, strconv.Itoa(sub.Machine.GPUs), cellSafe(sub.Machine.GPU), strconv.FormatBool(sub.Machine.Slurm),
			cellSafe(sub.Version), strconv.FormatBool(len(sub.Code) > 0), cellSafe(sub.Headline)})
	}
	if err := rows.Err(); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "export: %v", err)
		return
	}
	cw.Flush()
	download(w, c, "reports.csv", "text/csv; charset=utf-8")
	b.WriteTo(w)
}

func (s *Server) handleGridCSV(w http.ResponseWriter, r *http.Request, c *class) {
	snap, err := s.snapshot(r.Context(), c)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "export: %v", err)
		return
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	cw.Write([]string{"learner", "name", "exercise", "state", "attempts", "failing_stage", "best_ratio", "last_report"})
	for _, l := range snap.Learners {
		for _, ex := range snap.Exercises {
			cell := l.Cells[ex.ID]
			cw.Write([]string{l.Learner, cellSafe(l.Name), ex.ID, cell.State, strconv.Itoa(cell.Attempts), cell.Stage,
				num(cell.Ratio, cell.Ratio > 0), l.LastSeen.Format(time.RFC3339)})
		}
	}
	cw.Flush()
	download(w, c, "grid.csv", "text/csv; charset=utf-8")
	b.WriteTo(w)
}

// JUnit XML, the subset every CI viewer reads.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	ID        string      `xml:"id,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

func (s *Server) handleJUnit(w http.ResponseWriter, r *http.Request, c *class) {
	snap, err := s.snapshot(r.Context(), c)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "export: %v", err)
		return
	}
	out := junitSuites{Name: snap.Class}
	for _, l := range snap.Learners {
		suite := junitSuite{Name: l.Name, ID: l.Learner, Timestamp: l.LastSeen.Format("2006-01-02T15:04:05")}
		for _, ex := range snap.Exercises {
			cell := l.Cells[ex.ID]
			mod, _, _ := strings.Cut(ex.ID, "/")
			tc := junitCase{Name: ex.ID, ClassName: mod}
			switch cell.State {
			case statePassed:
				if cell.Ratio > 0 {
					tc.SystemOut = fmt.Sprintf("passed after %d attempts; best ratio %s", cell.Attempts, formatRatio(cell.Ratio))
				}
			case stateFailing:
				tc.Failure = &junitFailure{Message: fmt.Sprintf("not passed after %d attempts; last failed at %s", cell.Attempts, cell.Stage), Type: cell.Stage}
				suite.Failures++
			default:
				tc.Skipped = &junitSkipped{Message: "not started"}
				suite.Skipped++
			}
			suite.Tests++
			suite.Cases = append(suite.Cases, tc)
		}
		out.Tests += suite.Tests
		out.Failures += suite.Failures
		out.Skipped += suite.Skipped
		out.Suites = append(out.Suites, suite)
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "export: %v", err)
		return
	}
	b.WriteString("\n")
	download(w, c, "junit.xml", "application/xml; charset=utf-8")
	b.WriteTo(w)
}
