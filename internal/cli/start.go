package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newStartCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Open the course in the terminal UI, where you left off",
		Long: `start opens the course in a terminal UI: the course map, the lessons, each exercise with
its files, hints, checks and results. It resumes where you left off. It offers to create a
workspace when none is found.`,
		Example: "  mgpu-learn start",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := app.Course()
			if err != nil {
				return err
			}
			ws, err := app.Workspace(true)
			if err != nil {
				return err
			}
			if !isTerminal(app.Out) {
				// No terminal to draw on: print the course map and where to resume.
				p := app.progressOrEmpty()
				writeListing(app.Out, app.listing(cmd.Context(), c, p), app.columns())
				if p.LastExercise != "" {
					fmt.Fprintf(app.Out, "\nYou were last working on %s in %s.\n", p.LastExercise, ws.Root)
				}
				return nil
			}
			return app.runTUI(cmd.Context(), c, ws)
		},
	}
}
