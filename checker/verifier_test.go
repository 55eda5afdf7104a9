package checker

import (
	"testing"

	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// The checker's side of a split exercise (docs/protocol.md §4, "The verifier"), with the fake
// builder (whose programs are /bin/true) and launcher of pipeline_test.go.

const splitManifest = baseManifest + "verifier: true\n"

// A verifier that ends without a word (here /bin/true) fails the check as the course's fault,
// never as a pass, even when the ranks finished well.
func TestSplitVerifierThatNeverReportsIsTheCourses(t *testing.T) {
	st := newSetup(t, splitManifest, func(t *testing.T, _ int, s launch.Spec) *launch.Result {
		newRank(t, s, 0).done().write()
		newRank(t, s, 1).done().write()
		return result(launch.RankResult{}, launch.RankResult{})
	})
	r := st.check(t)
	expect(t, r, Errored, StageRun, FaultRunner, "verifier did not finish")
	if st.b.calls != 2 {
		t.Fatalf("builds %d: want the rank program and the verifier", st.b.calls)
	}
	drivers := 0
	for _, src := range st.b.req.Sources {
		switch {
		case src.Role == "learner":
			t.Fatalf("the verifier was built with the learner's %s", src.Show)
		case src.Role == "driver":
			drivers++
			if !contains(src.Flags, "-DMGPU_VERIFIER") {
				t.Errorf("the verifier's driver source %s has flags %v, without -DMGPU_VERIFIER", src.Show, src.Flags)
			}
		case contains(src.Flags, "-DMGPU_VERIFIER"):
			t.Errorf("the harness source %s was built with -DMGPU_VERIFIER: its object is the rank program's", src.Show)
		}
	}
	if drivers == 0 {
		t.Error("the verifier was built without the driver")
	}
}

// A split rank's own case records are a forgery: only its verifier records cases.
func TestSplitRankCaseRecordsAreForged(t *testing.T) {
	st := newSetup(t, splitManifest, func(t *testing.T, _ int, s launch.Spec) *launch.Result {
		goodRun(t, s)
		return result(launch.RankResult{}, launch.RankResult{})
	})
	r := st.check(t)
	expect(t, r, Failed, StageRun, FaultYou, "records not written by the harness", "only its verifier")
}
