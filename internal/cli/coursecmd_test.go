package cli

import (
	"strings"
	"testing"
)

func TestPerfSkip(t *testing.T) {
	cases := []struct {
		expect              string
		timed, perf, noPerf bool
		want                string // a word of the reason, or "" for "runs"
	}{
		{"performance", false, true, false, ""},
		{"performance", false, false, true, "--no-perf"},
		{"performance", false, false, false, "no GPU"},
		{"correctness", false, false, true, ""},
		{"policy", false, false, false, ""},
		{"run", false, false, true, ""},
		// A mistake only the check after timing finds: skipped where nothing is timed.
		{"correctness", true, false, true, "times it, which --no-perf"},
		{"correctness", true, false, false, "no GPU"},
		{"correctness", true, true, false, ""},
	}
	for _, c := range cases {
		got := perfSkip(c.expect, c.timed, c.perf, c.noPerf)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("perfSkip(%q, timed=%v, perf=%v, noPerf=%v) = %q, want one with %q", c.expect, c.timed, c.perf, c.noPerf, got, c.want)
		}
	}
}
