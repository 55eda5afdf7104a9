package checker

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// SchemaVersion is the "schema" of the JSON report (docs/report-schema.md).
const SchemaVersion = 1

// jsonDoc is the top level of `--json`.
type jsonDoc struct {
	Schema   int       `json:"schema"`
	ExitCode int       `json:"exit_code"`
	Reports  []*Report `json:"reports"`
}

// WriteJSON writes the reports as one JSON document (docs/report-schema.md).
func WriteJSON(w io.Writer, reports []*Report) error {
	if reports == nil {
		reports = []*Report{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(jsonDoc{Schema: SchemaVersion, ExitCode: ExitCode(reports), Reports: reports})
}

// JUnit XML, the dialect CI systems and autograders read: a testsuite per module, a testcase
// per check.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Skipped   int         `xml:"skipped,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes the reports as JUnit XML: failed checks as <failure>, runner errors as
// <error>, refused and inconclusive checks as <skipped>, each naming the stage and headline.
func WriteJUnit(w io.Writer, reports []*Report) error {
	doc := junitSuites{Name: "mgpu-learn"}
	index := map[string]int{}
	var total time.Duration
	suiteTime := map[string]time.Duration{}
	for _, r := range reports {
		mod := r.Module
		if mod == "" {
			mod, _, _ = strings.Cut(r.Exercise, "/")
		}
		i, ok := index[mod]
		if !ok {
			i = len(doc.Suites)
			index[mod] = i
			doc.Suites = append(doc.Suites, junitSuite{Name: mod, Timestamp: r.Started.UTC().Format("2006-01-02T15:04:05")})
		}
		s := &doc.Suites[i]
		d := time.Duration(r.Duration)
		total += d
		suiteTime[mod] += d
		name := r.Exercise
		if r.Target != "" && r.Target != "yours" {
			name += " [" + r.Target + "]"
		}
		tc := junitCase{Classname: mod, Name: name, Time: secs(d)}
		problem := &junitProblem{Message: fmt.Sprintf("%s: %s", r.Stage, oneLine(r.Headline)), Type: r.Stage, Body: junitBody(r)}
		switch r.Verdict {
		case Passed:
			tc.SystemOut = oneLine(r.Headline)
		case Failed:
			tc.Failure = problem
			s.Failures++
			doc.Failures++
		case Refused, Inconclusive:
			problem.Message = r.Verdict + ": " + problem.Message
			tc.Skipped = problem
			s.Skipped++
			doc.Skipped++
		default:
			tc.Error = problem
			s.Errors++
			doc.Errors++
		}
		s.Tests++
		doc.Tests++
		s.Cases = append(s.Cases, tc)
	}
	for i := range doc.Suites {
		doc.Suites[i].Time = secs(suiteTime[doc.Suites[i].Name])
	}
	doc.Time = secs(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func junitBody(r *Report) string {
	var b strings.Builder
	b.WriteString(r.Headline + "\n")
	if r.Message != "" {
		b.WriteString("\n" + r.Message + "\n")
	}
	if s := faultSentence(r); s != "" {
		b.WriteString("\n" + s + "\n")
	}
	return xmlSafe(b.String())
}

// xmlSafe drops characters XML 1.0 cannot carry.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r != 0xFFFE && r != 0xFFFF {
			return r
		}
		return -1
	}, s)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
