package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/checker"
)

func TestProgressPrinterSaysEachRankStateOncePerRun(t *testing.T) {
	var buf bytes.Buffer
	p := progressPrinter(&App{Err: &buf}, false)
	// Live from the launcher, then again from the run's summary.
	p(checker.RunStarted{Ranks: 2, Run: 1})
	p(checker.RankState{Rank: 1, State: "failed", Exit: 3})
	p(checker.RankState{Rank: 0, State: "killed"})
	p(checker.RankState{Rank: 0, State: "killed"})
	p(checker.RankState{Rank: 1, State: "failed", Exit: 3})
	// A second run says it again.
	p(checker.RunStarted{Ranks: 2, Run: 2})
	p(checker.RankState{Rank: 1, State: "failed", Exit: 3})
	out := buf.String()
	if n := strings.Count(out, "rank 1: failed"); n != 2 {
		t.Fatalf("rank 1's failure said %d times, want once per run:\n%s", n, out)
	}
	if strings.Contains(out, "killed") {
		t.Fatalf("killed ranks are not news without --verbose:\n%s", out)
	}
}
