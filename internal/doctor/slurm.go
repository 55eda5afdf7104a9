package doctor

import (
	"fmt"

	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// slurmStatus says where a shell with environment env on host stands with Slurm; nil when
// there is neither srun nor an allocation.
func slurmStatus(f *probe.Facts, env []string, host string) *SlurmStatus {
	job := launch.SlurmFromEnv(env)
	if (f == nil || f.Slurm == nil) && job == nil {
		return nil
	}
	st := &SlurmStatus{Job: job, Disabled: launch.SlurmDisabled(env)}
	if f != nil && f.Slurm != nil {
		st.Found, st.Version = true, f.Slurm.Version
	}
	switch {
	case st.Disabled:
		st.Launch = "MGPU_LEARN_SLURM=off: ranks start here as child processes of mgpu-learn, Slurm or not"
	case job == nil && st.Found:
		st.Launch = "ranks start here as child processes of mgpu-learn; " +
			"'mgpu-learn check --slurm' runs a check as a Slurm job with GPUs of its own"
	case job == nil:
		st.Launch = "ranks start here as child processes of mgpu-learn"
	default:
		node, err := job.HereNode(host)
		if err != nil {
			st.Launch = "checks are refused here"
			st.Problem = err.Error()
			break
		}
		st.Launch = fmt.Sprintf("checks with more than one rank start them with srun, as a step of job %s on node %s (launcher \"srun\"); one-rank checks run here", job.JobID, node)
		if !st.Found {
			st.Problem = "inside Slurm job " + job.JobID + " but srun is not on PATH: multi-rank checks cannot start (set MGPU_LEARN_SLURM=off to start the ranks here)"
		}
	}
	return st
}
