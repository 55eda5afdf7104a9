package checker

import (
	"context"
	"fmt"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// CrossRanks is the rank count of the cross-check: odd, so that a rank's left and right
// neighbours differ and no rank pairs up with exactly one other. An exercise may ask for more
// (launch.cross_check_ranks).
const CrossRanks = 3

// crossRanks is the cross-check's rank count for e.
func crossRanks(e *course.Exercise) int {
	if e != nil && e.Launch.CrossCheckRanks > 0 {
		return e.Launch.CrossCheckRanks
	}
	return CrossRanks
}

// crossCheck runs an exercise that needs no GPU once more, on the CPU with CrossRanks ranks,
// when its check ran with fewer and got past correctness (Checker.CrossCheck). With two
// ranks, a rank's left and right neighbours are the same rank and every exchange is a swap: a
// ring that turns the wrong way, a schedule right only for two, or an all-to-all that
// confuses source and destination all pass there, on a 2-GPU machine as on a laptop. A
// failure of the second run is the check's verdict, with a note of the first; a second run
// that cannot judge leaves the first verdict, noted.
func (c *Checker) crossCheck(ctx context.Context, t Target, r *Report) *Report {
	e := t.Exercise
	ranks := crossRanks(e)
	if !c.CrossCheck || c.CPUOnly || e == nil || e.Kind != "python" || e.Requires.GPUs > 0 ||
		e.Launch.Launcher == launch.Single || strings.HasPrefix(t.Label, "variant:") ||
		ctx.Err() != nil || r.Run == nil || len(r.Run.Ranks) >= ranks {
		return r
	}
	past := r.Verdict == Passed ||
		(r.Stage == StagePerformance && (r.Verdict == Failed || r.Verdict == Inconclusive))
	if !past {
		return r
	}
	c2 := *c
	c2.Ranks, c2.CPUOnly, c2.Perf = ranks, true, false
	if c2.Events != nil {
		c2.Events(CrossCheckStarted{Ranks: ranks})
	}
	r2 := c2.check(ctx, t)
	switch r2.Verdict {
	case Passed:
		r.Notes = append(r.Notes, fmt.Sprintf("also correct with %d ranks on the CPU (the cross-check)", ranks))
		return r
	case Failed:
		first := fmt.Sprintf("%d ranks", len(r.Run.Ranks))
		if len(r.Run.Ranks) == 1 {
			first = "1 rank"
		}
		why := "with one or two ranks there is no third rank, and a rank's left and right neighbours are the same rank, so code that mixes up directions, sources or destinations, or communicates nothing, passes there"
		if ranks > CrossRanks {
			why = fmt.Sprintf("some mistakes show only with %d ranks or more: on fewer, a wrong schedule or an uneven split's sizes can agree with the right ones, and code that communicates nothing can be right on one rank", ranks)
		}
		r2.Notes = append([]string{fmt.Sprintf("correct with %s, wrong with %d (the cross-check, on the CPU): %s", first, ranks, why)}, r2.Notes...)
		r2.Duration += r.Duration
		return r2
	default:
		r.Notes = append(r.Notes, fmt.Sprintf("the cross-check with %d ranks on the CPU could not judge: %s", ranks, r2.Headline))
		return r
	}
}
