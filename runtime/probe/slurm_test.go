package probe_test

import (
	"testing"

	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

// The Slurm client without a cluster (Debian's slurm-client on a CI runner): srun --version
// fails before it prints anything. srun is found, its version unknown, and that is no problem.
func TestSlurmWithoutConfiguration(t *testing.T) {
	m := probetest.New(t)
	m.Tool("srun", probetest.Case{Args: "--version", Code: 1, Err: "srun: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host\n" +
		"srun: error: fetch_config: DNS SRV lookup failed\nsrun: error: _establish_config_source: failed to fetch config\n" +
		"srun: fatal: Could not establish a configuration source\n"})
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.Slurm == nil || f.Slurm.Version != "" {
		t.Errorf("slurm %+v", f.Slurm)
	}
	// Debian's package names itself slurm-wlm.
	m = probetest.New(t)
	m.Tool("srun", probetest.Case{Args: "--version", Out: "slurm-wlm 22.05.8\n"})
	if f = discover(t, m.Options()); f.Slurm == nil || f.Slurm.Version != "22.05.8" {
		t.Errorf("slurm-wlm: %+v", f.Slurm)
	}
	// Any other failure is a problem worth showing.
	m = probetest.New(t)
	m.Tool("srun", probetest.Case{Args: "--version", Code: 1, Err: "srun: error while loading shared libraries: libslurmfull.so\n"})
	f = discover(t, m.Options())
	if len(f.Problems) != 1 {
		t.Errorf("problems %q", f.Problems)
	}
}
