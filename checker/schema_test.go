package checker

import (
	"bytes"
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"
)

// TestReportSchemaDocumented checks docs/report-schema.md against what WriteJSON writes: the
// schema block parses, every field written is in it, and every required field is written.
func TestReportSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/report-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## JSON Schema")
	if !ok {
		t.Fatal("no JSON Schema section")
	}
	_, block, ok := strings.Cut(after, "```json\n")
	if !ok {
		t.Fatal("no json block")
	}
	block, _, _ = strings.Cut(block, "```")
	var schema map[string]any
	if err := json.Unmarshal([]byte(block), &schema); err != nil {
		t.Fatalf("the schema is not JSON: %v", err)
	}
	defs := schema["$defs"].(map[string]any)

	reports := sampleReports()
	full := fullReport()
	reports = append(reports, full)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, reports); err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any, s map[string]any)
	walk = func(path string, v any, s map[string]any) {
		if ref, ok := s["$ref"].(string); ok {
			s = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		if typ, ok := s["type"].(string); ok {
			okType := false
			switch typ {
			case "object":
				_, okType = v.(map[string]any)
			case "array":
				_, okType = v.([]any)
			case "string":
				_, okType = v.(string)
			case "boolean":
				_, okType = v.(bool)
			case "number":
				_, okType = v.(float64)
			case "integer":
				f, isNum := v.(float64)
				okType = isNum && f == float64(int64(f))
			}
			if !okType {
				t.Errorf("%s: %v (%T) is not of type %s", path, v, v, typ)
				return
			}
		}
		switch v := v.(type) {
		case map[string]any:
			props, _ := s["properties"].(map[string]any)
			if props == nil {
				t.Errorf("%s: an object where the schema has %v", path, s)
				return
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				ps, ok := props[k].(map[string]any)
				if !ok {
					t.Errorf("%s.%s is written but not in the schema", path, k)
					continue
				}
				walk(path+"."+k, v[k], ps)
			}
			if req, ok := s["required"].([]any); ok {
				for _, r := range req {
					if _, ok := v[r.(string)]; !ok {
						t.Errorf("%s: required %s is not written", path, r)
					}
				}
			}
		case []any:
			items, _ := s["items"].(map[string]any)
			for i, x := range v {
				if items != nil {
					walk(path+"[]", x, items)
				}
				_ = i
			}
		case string:
			if enum, ok := s["enum"].([]any); ok {
				found := false
				for _, e := range enum {
					found = found || e == v
				}
				if !found {
					t.Errorf("%s: %q is not one of %v", path, v, enum)
				}
			}
		}
	}
	walk("$", got, schema)
}

// fullReport has every optional part filled.
func fullReport() *Report {
	r := sampleReports()[0]
	r.Build = &BuildSummary{Cached: true, Binary: "/b", Log: "/l", Diagnostics: []Diagnostic{{File: "a.c", Line: 1, Severity: "error", Msg: "m", Learner: true}}}
	r.Policy = []Violation{{Symbol: "s", Found: "s", File: "a.c:1", Why: "w"}}
	r.Run = &RunSummary{Launcher: "local", Runs: 1, FirstFailed: 1, Seed: "1", Dir: "/d", Leftover: []int{5},
		Failure: &RankError{Rank: 1, Where: "learner", Call: "c", File: "f", Line: 1, Code: 2, Msg: "m"},
		Ranks:   []RankRun{{Rank: 0, State: "signaled", Exit: -1, Signal: "SIGSEGV", Done: false, Tail: "t", Dropped: 5, Records: "/r", Device: 0, GPU: "H200", PID: 3, Harness: "c/1", Problems: []string{"p"}}}}
	r.Cases[0].Missing = true
	r.Cases[0].Msg = "m"
	r.Perf = sampleReports()[1].Perf
	r.Perf.Suspect, r.Perf.SuspectWhy, r.Perf.Inconclusive, r.Perf.Outcome = true, "x", "y", "suspect"
	r.Values = []Value{{Rank: 0, Name: "v", Value: 1, Unit: "u"}}
	r.Notes = []string{"n"}
	r.Stages[0].Detail = "d"
	return r
}
