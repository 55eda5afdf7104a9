package probe

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
)

var slurmVersion = regexp.MustCompile(`\d+\.\d+(\.\d+)?`)

// slurm finds srun (with its version) and sbatch. Slurm's commands read the cluster's
// configuration before anything else, --version included: on a machine with the client
// installed but no cluster configured (a laptop, a CI runner) the version stays unknown and
// that is not a failed probe. Whether this shell is inside an allocation is not a fact of the
// machine and is not cached: launch.SlurmFromEnv reads it when it matters.
func (p *prober) slurm(ctx context.Context) (srun, sbatch *Tool) {
	if path, err := exec.LookPath("srun"); err == nil {
		srun = &Tool{Path: path, Source: "path"}
		c := command{path: path, args: []string{"--version"}, timeout: p.opts.Timeout}
		out, errOut, err := run(ctx, c)
		switch {
		case err == nil:
			// "slurm 23.02.7", Debian's "slurm-wlm 22.05.8"
			srun.Version = slurmVersion.FindString(firstLine(out))
		case unconfigured(out + errOut):
		case ctx.Err() == nil:
			p.problem("%s: %v", describe(c), err)
		}
	}
	if path, err := exec.LookPath("sbatch"); err == nil {
		sbatch = &Tool{Path: path, Source: "path"}
		if srun != nil {
			sbatch.Version = srun.Version
		}
	}
	return srun, sbatch
}

// unconfigured reports whether a Slurm command failed for want of a configuration.
func unconfigured(out string) bool {
	for _, s := range []string{"configuration source", "Unable to process configuration file", "ClusterName needs to be specified", "fetch_config"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}
