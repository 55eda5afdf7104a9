package checker

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"math"
	"strings"
	"testing"
	"time"
)

func sampleReports() []*Report {
	started := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	stages := func(failAt, status string) []StageResult {
		var out []StageResult
		reached := true
		for _, s := range Stages {
			st := StageResult{Name: s, Status: StatusSkipped}
			if reached {
				st.Status = StatusOK
				st.Duration = Seconds(12 * time.Millisecond)
			}
			if s == failAt {
				st.Status = status
				reached = false
			}
			out = append(out, st)
		}
		return out
	}
	return []*Report{
		{Exercise: "module0/sum", Module: "module0", Target: "yours", Verdict: Failed, Stage: StageCorrectness, Fault: FaultYou,
			Headline: "wrong result: case odd (n=3) on rank 1: 1 of 3 checked elements wrong (1 unwritten)",
			Message:  "Your code computed a wrong result.\n  first mismatches:\n    [2] got NaN(poison), want 4",
			Stages:   stages(StageCorrectness, StatusFailed), Started: started, Duration: Seconds(time.Second),
			Cases: []CaseResult{
				{Case: "odd", Rank: 0, OK: true, N: 3, Checked: 3},
				{Case: "odd", Rank: 1, OK: false, N: 3, Checked: 3, Unwritten: 1, MaxAbsErr: Float(math.NaN()), MaxRelErr: 0,
					First: []Mismatch{{I: 2, Got: "NaN(poison)", Want: "4"}}},
			},
			Run: &RunSummary{Launcher: "local", Runs: 1, Ranks: []RankRun{}, Dir: "/tmp/run", Seed: "42", FirstFailed: -1}},
		{Exercise: "module0/timing", Module: "module0", Target: "solution", Verdict: Passed, Stage: StagePerformance,
			Headline: "passed: yours 10 us vs baseline 10 us", Stages: stages("", ""), Started: started, Duration: Seconds(2 * time.Second),
			Perf: &PerfResult{Metric: "time", Unit: "us", Case: "main", Baseline: "the loop", Target: 0.6, Runs: 1, Samples: 20, Outcome: Passed,
				Ratio: 1, CILow: 0.98, CIHigh: Float(math.Inf(1)), BaselineCV: 0.01,
				Cases: []PerfCase{{Case: "main", Yours: 10, Baseline: 10, Ratio: 1, CILow: 0.98, CIHigh: Float(math.Inf(1)), Samples: 20}}},
			Values: []Value{{Rank: 0, Name: "gbps", Value: 1.5, Unit: "GB/s"}}},
		{Exercise: "module3/ring", Module: "module3", Target: "yours", Verdict: Errored, Stage: StageRun, Fault: FaultRunner,
			Headline: "unreadable result file: rank-0.jsonl:3: not a JSON record", Stages: stages(StageRun, StatusError), Started: started,
			Run: &RunSummary{Launcher: "local", Runs: 1, Ranks: []RankRun{}, Dir: "/tmp/run2", Seed: "7", FirstFailed: -1}},
		{Exercise: "module3/nvls", Module: "module3", Target: "yours", Verdict: Refused, Stage: StageEnvironment, Fault: FaultMachine,
			Headline: "cannot run here: 4 GPU(s)", Stages: stages(StageEnvironment, StatusFailed), Started: started},
		{Exercise: "module3/bw", Module: "module3", Target: "yours", Verdict: Inconclusive, Stage: StagePerformance,
			Headline: "inconclusive: ratio 0.8x [0.5x, 1.1x]", Stages: stages(StagePerformance, StatusInconclusive), Started: started},
	}
}

func TestWriteTextPlain(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sampleReports(), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Contains(out, "\x1b") {
		t.Fatal("escape codes in plain output")
	}
	for i, r := range out {
		if r > 127 {
			t.Fatalf("non-ASCII %q at %d in plain output", r, i)
		}
	}
	for _, want := range []string{
		"FAILED       module0/sum: wrong result: case odd",
		"correctness  failed",
		"performance  skipped",
		"[2] got NaN(poison), want 4",
		"The problem is in your code (stage: correctness).",
		"PASSED       module0/timing [solution]",
		"main  10.0 us  10.0 us   1.00x [0.98x, inf]  >= 0.60x  pass",
		"rank 0: gbps = 1.5 GB/s",
		"ERROR        module3/ring",
		"This is a bug in the runner or the course, not in your code.",
		"run directory: /tmp/run2",
		"REFUSED      module3/nvls",
		"nothing is wrong with your code",
		"INCONCLUSIVE module3/bw",
		"No verdict: the timings were too noisy to judge.",
		"5 checks: 1 passed, 1 failed, 1 refused, 1 error, 1 inconclusive",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plain text lacks %q\n%s", want, out)
		}
	}
	// The passing rows of a case are grouped: rank 0 ok appears as one row.
	if !strings.Contains(out, "odd   3  1     FAIL") {
		t.Errorf("failing row missing:\n%s", out)
	}
}

func TestWriteTextColor(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, sampleReports()[:1], TextOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ansiRed) || !strings.Contains(b.String(), ansiReset) {
		t.Fatalf("no colour:\n%q", b.String())
	}
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleReports()); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema   int              `json:"schema"`
		ExitCode int              `json:"exit_code"`
		Reports  []map[string]any `json:"reports"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if doc.Schema != 1 || len(doc.Reports) != 5 || doc.ExitCode != 4 {
		t.Fatalf("schema %d reports %d exit %d", doc.Schema, len(doc.Reports), doc.ExitCode)
	}
	r0 := doc.Reports[0]
	if r0["verdict"] != "failed" || r0["stage"] != "correctness" || r0["fault"] != "you" {
		t.Fatalf("report 0: %v", r0)
	}
	cases := r0["cases"].([]any)
	if got := cases[1].(map[string]any)["max_abs_err"]; got != "NaN" {
		t.Fatalf("NaN written as %v", got)
	}
	perf := doc.Reports[1]["perf"].(map[string]any)
	if perf["ci_high"] != "+Inf" || perf["ratio"] != 1.0 {
		t.Fatalf("perf %v", perf)
	}
	// Round trip through the Go types.
	var back struct {
		Reports []*Report `json:"reports"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(float64(back.Reports[0].Cases[1].MaxAbsErr)) || time.Duration(back.Reports[0].Duration) != time.Second {
		t.Fatalf("round trip: %+v", back.Reports[0])
	}
}

func TestWriteJUnit(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJUnit(&b, sampleReports()); err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if doc.Tests != 5 || doc.Failures != 1 || doc.Errors != 1 || doc.Skipped != 2 || len(doc.Suites) != 2 {
		t.Fatalf("counts: %+v", doc)
	}
	m0 := doc.Suites[0]
	if m0.Name != "module0" || len(m0.Cases) != 2 || m0.Failures != 1 {
		t.Fatalf("suite 0 %+v", m0)
	}
	f := m0.Cases[0].Failure
	if f == nil || f.Type != "correctness" || !strings.HasPrefix(f.Message, "correctness: wrong result") || !strings.Contains(f.Body, "NaN(poison)") {
		t.Fatalf("failure %+v", f)
	}
	if m0.Cases[1].Name != "module0/timing [solution]" || m0.Cases[1].Failure != nil {
		t.Fatalf("case 1 %+v", m0.Cases[1])
	}
	m3 := doc.Suites[1]
	if m3.Cases[0].Error == nil || m3.Cases[1].Skipped == nil || !strings.HasPrefix(m3.Cases[2].Skipped.Message, "inconclusive") {
		t.Fatalf("suite 1 %+v", m3)
	}
}

func TestCleanOutputAndLastLines(t *testing.T) {
	if got := cleanOutput("a\x1b[31mred\x07\tb\n"); got != "a?[31mred?\tb\n" {
		t.Fatalf("clean: %q", got)
	}
	if got := lastLines("1\n2\n3\n4\n", 2); got != "3\n4" {
		t.Fatalf("last lines: %q", got)
	}
	if got := lastLines("only", 5); got != "only" {
		t.Fatalf("last lines: %q", got)
	}
}
