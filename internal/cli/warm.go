package cli

import (
	"context"
	"io/fs"
	"os"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/csrc"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// withWarmRanks gives the checks run under the returned context a pool of pre-imported Python
// interpreters to fork their ranks from (docs/runtime.md, "Warm Python ranks"). The commands
// that check again and again in one process (watch, the TUI, a check of several exercises)
// use it; a one-shot check of one exercise only with MGPU_LEARN_WARM=on (oneShot). The pool
// starts nothing until the first Python check; the returned function ends its interpreters.
// With MGPU_LEARN_WARM=off every rank starts cold.
func (a *App) withWarmRanks(ctx context.Context, oneShot bool) (context.Context, func()) {
	if launch.HasWarm(ctx) || !launch.WarmEnabled() || oneShot && !strings.EqualFold(strings.TrimSpace(os.Getenv("MGPU_LEARN_WARM")), "on") {
		return ctx, func() {}
	}
	script, err := fs.ReadFile(a.Harness(), "python/mgpu_zygote.py")
	if err != nil {
		// A course from disk with its own csrc/ may predate the zygote.
		if script, err = fs.ReadFile(csrc.FS, "python/mgpu_zygote.py"); err != nil {
			return ctx, func() {}
		}
	}
	pool := launch.NewWarmPool(script)
	return launch.WithWarm(ctx, pool), func() { pool.Close() }
}
