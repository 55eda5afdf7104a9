package probe

import (
	"os"
	"strings"
)

// envNames are variables that change how exercises build or run, by exact name.
var envNames = []string{
	"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "CUDA_LAUNCH_BLOCKING",
	"LD_LIBRARY_PATH", "OPAL_PREFIX", "SLURM_CONF",
}

// envPrefixes are families of such variables.
var envPrefixes = []string{"NCCL_", "NVSHMEM_", "OMPI_", "UCX_", "TORCH_", "PYTORCH_", "MGPU_"}

// collectEnv picks the behaviour-changing variables out of the environment.
func collectEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if relevantEnv(k) {
			env[k] = v
		}
	}
	return env
}

func relevantEnv(k string) bool {
	for _, n := range envNames {
		if k == n {
			return true
		}
	}
	for _, p := range envPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
