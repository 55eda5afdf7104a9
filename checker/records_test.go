package checker

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

const startRec = `{"t":"start","rank":1,"ts":1.5,"world":2,"local_rank":1,"device":-1,"gpu":"","pid":42,"harness":"c/1","exercise":"module0/sum"}`

func TestParseRecordsComplete(t *testing.T) {
	in := strings.Join([]string{
		startRec,
		`{"t":"case","rank":1,"case":"small","n":10,"ok":false,"checked":10,"bad":1,"unwritten":2,"guard_hits":3,"max_abs_err":null,"max_rel_err":0.5,"first":[{"i":3,"got":"NaN(poison)","want":"4"}],"msg":"why"}`,
		`{"t":"timing","rank":1,"case":"main","who":"yours","bytes":8,"factor":1,"metric":"time","us":[1,2,null],"wall_us":[1,2,3]}`,
		`{"t":"value","rank":1,"name":"bw","value":12.5,"unit":"GB/s"}`,
		`{"t":"note","rank":1,"msg":"hello"}`,
		`{"t":"future","rank":1}`,
		`{"t":"done","rank":1}`,
	}, "\n") + "\n"
	rr, err := parseRecords(strings.NewReader(in), "rank-1.jsonl", 1)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Start == nil || rr.Start.PID != 42 || !rr.Done || rr.Truncated {
		t.Fatalf("start/done/truncated wrong: %+v", rr)
	}
	if len(rr.Cases) != 1 {
		t.Fatalf("cases: %d", len(rr.Cases))
	}
	c := rr.Cases[0]
	if *c.OK || c.Bad != 1 || c.Unwritten != 2 || c.GuardHits != 3 || !math.IsNaN(float64(c.MaxAbsErr)) || c.MaxRelErr != 0.5 {
		t.Errorf("case parsed wrong: %+v", c)
	}
	if len(c.First) != 1 || c.First[0].I != 3 || c.First[0].Got != "NaN(poison)" {
		t.Errorf("first: %+v", c.First)
	}
	if len(rr.Timings) != 1 || len(rr.Timings[0].US) != 3 || !math.IsNaN(float64(rr.Timings[0].US[2])) {
		t.Errorf("timings: %+v", rr.Timings)
	}
	if len(rr.Values) != 1 || len(rr.Notes) != 1 || len(rr.Unknown) != 1 {
		t.Errorf("values %d notes %d unknown %d", len(rr.Values), len(rr.Notes), len(rr.Unknown))
	}
}

func TestParseRecordsTruncatedLastLine(t *testing.T) {
	in := startRec + "\n" + `{"t":"case","rank":1,"case":"small","n":10,"ok":tr`
	rr, err := parseRecords(strings.NewReader(in), "rank-1.jsonl", 1)
	if err != nil {
		t.Fatalf("a cut-off last line must be tolerated, got %v", err)
	}
	if !rr.Truncated || rr.Done || len(rr.Cases) != 0 {
		t.Fatalf("want truncated, no done, no cases: %+v", rr)
	}
}

func TestParseRecordsLastLineWithoutNewlineButComplete(t *testing.T) {
	in := startRec + "\n" + `{"t":"done","rank":1}`
	rr, err := parseRecords(strings.NewReader(in), "rank-1.jsonl", 1)
	if err != nil || !rr.Done || rr.Truncated {
		t.Fatalf("complete last record without newline: err %v, %+v", err, rr)
	}
}

func TestParseRecordsErrorsNameFileAndLine(t *testing.T) {
	cases := []struct {
		name, in, want string
		line           int
	}{
		{"garbage", startRec + "\nthis is not json\n" + `{"t":"done","rank":1}` + "\n", "not a JSON record", 2},
		{"garbage last line with newline", startRec + "\n{oops\n", "not a JSON record", 2},
		{"wrong rank", startRec + "\n" + `{"t":"done","rank":0}` + "\n", "rank 0", 2},
		{"no type", startRec + "\n" + `{"rank":1}` + "\n", `without "t"`, 2},
		{"no rank", `{"t":"start"}` + "\n", `without "rank"`, 1},
		{"before start", `{"t":"note","rank":1,"msg":"x"}` + "\n", "before \"start\"", 1},
		{"after done", startRec + "\n" + `{"t":"done","rank":1}` + "\n" + `{"t":"note","rank":1,"msg":"x"}` + "\n", "after \"done\"", 3},
		{"case without ok", startRec + "\n" + `{"t":"case","rank":1,"case":"a","n":1}` + "\n", `without "ok"`, 2},
		{"bad who", startRec + "\n" + `{"t":"timing","rank":1,"case":"a","who":"mine","metric":"time","us":[1],"wall_us":[1]}` + "\n", "who", 2},
		{"bad metric", startRec + "\n" + `{"t":"timing","rank":1,"case":"a","who":"yours","metric":"speed","us":[1],"wall_us":[1]}` + "\n", "unknown metric", 2},
		{"sample counts", startRec + "\n" + `{"t":"timing","rank":1,"case":"a","who":"yours","metric":"time","us":[1,2],"wall_us":[1]}` + "\n", "2 samples", 2},
		{"two values", startRec + "\n" + `{"t":"done","rank":1} {"t":"done","rank":1}` + "\n", "more than one", 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRecords(strings.NewReader(tc.in), "/runs/x/rank-1.jsonl", 1)
			var re *recordError
			if !errors.As(err, &re) {
				t.Fatalf("want a recordError, got %v", err)
			}
			if re.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q (line %d), want line %d containing %q", err, re.Line, tc.line, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "/runs/x/rank-1.jsonl:") {
				t.Fatalf("error does not start with file:line: %q", err)
			}
		})
	}
}

func TestRankWithoutChannelIsMissing(t *testing.T) {
	k := &check{}
	rr := &runResult{chans: map[int]*rankChannel{}}
	recs, err := k.channelRecords(rr, launch.Spec{}, 0, filepath.Join(t.TempDir(), "rank-0.jsonl"))
	if err != nil || !recs.Missing || len(rr.forgery) != 0 {
		t.Fatalf("a rank that never connected: %v %+v %v", err, recs, rr.forgery)
	}
}

func TestParseRecordsLongLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "rank-0.jsonl")
	long := `{"t":"start","rank":0,"gpu":"` + strings.Repeat("x", maxRecordLine) + `"}` + "\n"
	_, err := parseRecords(strings.NewReader(long), p, 0)
	if err == nil || !strings.Contains(err.Error(), p+":1:") {
		t.Fatalf("want an error naming %s:1, got %v", p, err)
	}
}
