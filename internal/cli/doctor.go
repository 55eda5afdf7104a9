package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
)

func newDoctorCmd(app *App) *cobra.Command {
	var asJSON, refresh bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report what this machine has and which modules it can run",
		Long: `doctor lists this machine's GPUs, their topology and peer access, the CUDA compiler, NCCL,
MPI (and whether it is CUDA-aware), NVSHMEM, Python and torch, and the environment variables
that change their behaviour; then, module by module, what can run here and what is missing.
Paste its output when you ask for help.`,
		Example: `  mgpu-learn doctor
  mgpu-learn doctor --json > machine.json
  mgpu-learn doctor --refresh      # probe again instead of using the cached facts`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			start := time.Now()
			facts := app.Facts(cmd.Context(), refresh)
			c, err := app.Course()
			if err != nil {
				return err
			}
			rep := doctor.Build(facts, c)
			if asJSON {
				return rep.WriteJSON(app.Out)
			}
			rep.WriteText(app.Out, app.plain())
			fmt.Fprintf(app.Err, "(doctor took %s)\n", time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (schema in docs/doctor.md)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "probe the machine again instead of using cached facts")
	return cmd
}
