package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// The built-in course on a machine that has nothing (no GPU, no compiler, no Python): each
// module says once what it lacks, in a few words; every exercise's line fits 120 columns and
// says only "can't run".
func TestListBuiltInCourseOnBareMachine(t *testing.T) {
	app := &App{facts: &probe.Facts{}}
	c, err := app.Course()
	if err != nil {
		t.Fatal(err)
	}
	l := app.listing(context.Background(), c, &workspace.Progress{})
	var b bytes.Buffer
	if !writeListing(&b, l, 120) {
		t.Fatal("writeListing says everything runs on a machine with nothing")
	}
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for _, line := range lines {
		if w := ansi.StringWidth(line); w > 120 {
			t.Errorf("line is %d columns wide: %q", w, line)
		}
		if strings.Contains(line, "none was found") || strings.Contains(line, "fix:") {
			t.Errorf("doctor's details in the listing: %q", line)
		}
	}
	for _, m := range c.Modules {
		if n := strings.Count(out, "\n"+m.ID+"  "); n != 1 {
			t.Errorf("%s: %d headings", m.ID, n)
		}
		for _, e := range m.Exercises {
			var row string
			for _, line := range lines {
				if strings.HasPrefix(line, "  "+e.ID+" ") {
					row = line
				}
			}
			if !strings.Contains(row, " can't run ") {
				t.Errorf("%s: row %q does not say it can't run", e.ID, row)
			}
		}
	}
	if n, want := strings.Count(out, "  can't run here: needs "), len(c.Modules); n != want {
		t.Errorf("%d lines say what a module needs, want one per module (%d):\n%s", n, want, out)
	}
	if !strings.Contains(out, "can't run here: needs 2 GPUs (this machine has none), nvcc") {
		t.Errorf("module0's needs are not said in a few words:\n%s", out)
	}
}

// list --json keeps schema 1: the same keys, the long reasons in missing.
func TestListJSONSchema(t *testing.T) {
	app := &App{facts: &probe.Facts{}}
	c, err := app.Course()
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(app.listing(context.Background(), c, &workspace.Progress{}))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Modules []map[string]json.RawMessage `json:"modules"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	_ = json.Unmarshal(data, &top)
	if got := keys(top); !slices.Equal(got, []string{"course", "modules", "schema"}) {
		t.Errorf("top-level keys %v", got)
	}
	for _, m := range v.Modules {
		if got := keys(m); !slices.Equal(got, []string{"exercises", "id", "passed", "title"}) {
			t.Errorf("module keys %v", got)
		}
		var exs []map[string]json.RawMessage
		_ = json.Unmarshal(m["exercises"], &exs)
		for _, e := range exs {
			want := []string{"gpus", "id", "libs", "missing", "runnable", "status", "title"}
			if got := keys(e); !slices.Equal(got, want) {
				t.Errorf("exercise keys %v, want %v", got, want)
			}
			if !strings.Contains(string(e["missing"]), "needs") {
				t.Errorf("missing lost doctor's words: %s", e["missing"])
			}
		}
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
