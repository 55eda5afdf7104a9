package cli

import (
	"strings"
	"testing"
)

func TestPerfSkip(t *testing.T) {
	cases := []struct {
		expect       string
		perf, noPerf bool
		want         string // a word of the reason, or "" for "runs"
	}{
		{"performance", true, false, ""},
		{"performance", false, true, "--no-perf"},
		{"performance", false, false, "no GPU"},
		{"correctness", false, true, ""},
		{"policy", false, false, ""},
		{"run", false, true, ""},
	}
	for _, c := range cases {
		got := perfSkip(c.expect, c.perf, c.noPerf)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("perfSkip(%q, perf=%v, noPerf=%v) = %q, want one with %q", c.expect, c.perf, c.noPerf, got, c.want)
		}
	}
}
