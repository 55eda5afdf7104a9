package cli

import (
	"context"
	"os"
	"sync"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
	"github.com/mgpu-learn/mgpu-learn/internal/tui"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// runTUI opens the terminal UI on course c and workspace ws. The UI calls its dependencies
// from background goroutines; the machine is probed once, before anything else reads the
// facts, so those calls never race on the App's cache.
func (a *App) runTUI(ctx context.Context, c *course.Course, ws *workspace.Workspace) error {
	var once sync.Once
	var facts *probe.Facts
	probed := func() *probe.Facts {
		once.Do(func() { facts = a.Facts(ctx, false) })
		return facts
	}
	// The UI's checks fork their Python ranks from one pre-imported interpreter.
	ctx, closeWarm := a.withWarmRanks(ctx, false)
	defer closeWarm()
	return tui.Run(ctx, tui.Deps{
		Course:    c,
		Workspace: ws,
		Unmet: func(e *course.Exercise) tui.Lack {
			f := probed()
			rs := doctor.UnmetExercise(f, &e.Manifest)
			if len(rs) == 0 {
				return tui.Lack{}
			}
			return tui.Lack{Needs: sayNeedsBriefly(needsOf(f, &e.Manifest, rs)), Reasons: rs}
		},
		NewChecker: func(ctx context.Context) (*checker.Checker, error) {
			probed()
			ck, err := a.newChecker(ctx, true)
			if ck != nil {
				ck.CrossCheck = true
			}
			return ck, err
		},
		Record: func(e *course.Exercise, r *checker.Report) {
			a.recordAttempt(ws, e, r)
			a.queueForClass(ws, e, r, probed(), false, nil)
		},
		Editor:  os.Getenv("EDITOR"),
		NoColor: a.NoColor,
	})
}
