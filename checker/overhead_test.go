package checker

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCheckOverhead measures what the runner itself costs per check once the build cache
// is warm: loading the manifest's settings, materializing sources, the cache lookup, the policy
// stage's nm, setting up and tearing down the run, reading the records and judging them. It
// reports overhead-ms/op: the wall time of Check minus the launcher's elapsed time for the
// ranks (the program's own run). docs/runtime.md quotes the figure.
func BenchmarkCheckOverhead(b *testing.B) {
	c, ck := fixtureChecker(b)
	e := c.Exercise("module0/sum")
	t, err := SolutionTarget(e, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if r := ck.Check(context.Background(), t); r.Verdict != Passed { // warms the cache
		b.Fatalf("solution: %s", r.Headline)
	}
	var over, run time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r := ck.Check(context.Background(), t)
		wall := time.Since(start)
		if r.Verdict != Passed || r.Run == nil {
			b.Fatalf("solution: %s", r.Headline)
		}
		over += wall - time.Duration(r.Run.Elapsed)
		run += time.Duration(r.Run.Elapsed)
	}
	b.ReportMetric(float64(over.Microseconds())/1000/float64(b.N), "overhead-ms/op")
	b.ReportMetric(float64(run.Microseconds())/1000/float64(b.N), "program-ms/op")
}
