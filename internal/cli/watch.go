package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

func newWatchCmd(app *App) *cobra.Command {
	var poll bool
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "watch <exercise>",
		Short: "Re-check an exercise every time you save one of its files",
		Example: `  mgpu-learn watch module0/peer-copy
  mgpu-learn watch module0/peer-copy --poll   # network file systems where inotify is silent`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := app.exercise(cmd.Name(), args[0])
			if err != nil {
				return err
			}
			ws, err := app.Workspace(true)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// Every re-check forks its Python ranks from one pre-imported interpreter.
			ctx, closeWarm := app.withWarmRanks(ctx, false)
			defer closeWarm()
			changes, err := watchFiles(ctx, ws, e, poll)
			if err != nil {
				return runnerErrorf("watching %s: %v", ws.ExerciseDir(e), err)
			}
			mode := "file events"
			if poll {
				mode = "polling every second"
			}
			for {
				_ = app.runChecks(ctx, e.ID, o, false)
				fmt.Fprintf(app.Err, "\nWatching %s for changes (%s). Press ctrl+c to stop.\n", ws.ExerciseDir(e), mode)
				select {
				case <-ctx.Done():
					return nil
				case <-changes:
				}
			}
		},
	}
	cmd.Flags().BoolVar(&poll, "poll", false, "poll file times instead of using file-system events")
	cmd.Flags().BoolVar(&o.NoPerf, "no-perf", false, "skip the performance stage")
	return cmd
}

// watchFiles sends on the channel once per burst of saves to the exercise's files (editors
// write a temp file and rename it, so the directory is watched, not the files).
func watchFiles(ctx context.Context, ws *workspace.Workspace, e *course.Exercise, poll bool) (<-chan struct{}, error) {
	files := ws.Files(e)
	out := make(chan struct{}, 1)
	notify := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	if poll {
		go func() {
			last := mtimes(files)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					now := mtimes(files)
					if now != last {
						last = now
						notify()
					}
				}
			}
		}()
		return out, nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(ws.ExerciseDir(e)); err != nil {
		w.Close()
		return nil, err
	}
	names := map[string]bool{}
	for _, p := range files {
		names[filepath.Base(p)] = true
	}
	go func() {
		defer w.Close()
		var debounce <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if names[filepath.Base(ev.Name)] && ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename) != 0 {
					debounce = time.After(300 * time.Millisecond)
				}
			case <-w.Errors:
			case <-debounce:
				debounce = nil
				notify()
			}
		}
	}()
	return out, nil
}

func mtimes(files map[string]string) string {
	paths := make([]string, 0, len(files))
	for _, p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	s := ""
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%s:%d:%d;", p, st.ModTime().UnixNano(), st.Size())
		}
	}
	return s
}
