// Package probe discovers what this machine has: GPUs and their topology, the CUDA compiler,
// NCCL, MPI, NVSHMEM, Python with torch. Missing things are findings, never errors; a probe that
// hangs is timed out. Results are cached per machine and shared by doctor, check and the TUI.
package probe

import "time"

// Facts is everything discovered. Nil pointers mean "not found".
type Facts struct {
	Taken    time.Time `json:"taken"`
	Hostname string    `json:"hostname"`
	OS       string    `json:"os"`     // "Ubuntu 24.04.1 LTS"
	Kernel   string    `json:"kernel"` // uname -r
	Driver   string    `json:"driver"` // NVIDIA driver version, "" when none
	CUDA     string    `json:"cuda"`   // driver's CUDA version from nvidia-smi

	GPUs []GPU `json:"gpus"`
	// Links[i][j] is nvidia-smi topo's word for the pair: "X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS".
	Links [][]string `json:"links"`
	// Peer[i][j]: peer access possible (nvidia-smi topo -p2p r "OK").
	Peer [][]bool `json:"peer"`

	NVCC    *Tool    `json:"nvcc"`
	CC      *Tool    `json:"cc"`
	NCCL    *Library `json:"nccl"` // the one used to build (system first, then NCCL_HOME, then pip)
	NVSHMEM *Library `json:"nvshmem"`
	MPI     *MPI     `json:"mpi"` // the default mpicc/mpirun on PATH
	// CudaMPI is a CUDA-aware MPI found elsewhere (MGPU_CUDA_MPI_HOME, or MPI itself when aware).
	CudaMPI *MPI    `json:"cuda_mpi"`
	Python  *Python `json:"python"`
	Slurm   *Tool   `json:"slurm"` // srun

	// Env holds the variables that change behaviour (CUDA_VISIBLE_DEVICES, NCCL_*, NVSHMEM_*, OMPI_*...).
	Env map[string]string `json:"env"`
	// Problems are probes that failed or timed out, in words.
	Problems []string `json:"problems"`
}

// GPU is one device as nvidia-smi reports it.
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	Compute   string `json:"compute"` // "9.0"
	UUID      string `json:"uuid"`
}

// Tool is a program found on this machine.
type Tool struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Library is a C library with its headers.
type Library struct {
	Version  string   `json:"version"`
	Source   string   `json:"source"` // "system", "env", "pip"
	Include  string   `json:"include"`
	LibDir   string   `json:"lib_dir"`
	LinkArgs []string `json:"link_args"` // e.g. ["-lnccl"] or ["-l:libnvshmem_host.so.3", ".../libnvshmem_device.a"]
}

// MPI is one MPI installation.
type MPI struct {
	Vendor   string   `json:"vendor"` // "Open MPI", "MPICH"
	Version  string   `json:"version"`
	Dialect  string   `json:"dialect"` // "openmpi", "mpich"
	Home     string   `json:"home"`
	Mpicc    string   `json:"mpicc"`
	Mpirun   string   `json:"mpirun"`
	Include  []string `json:"include"`
	LinkArgs []string `json:"link_args"`
	// CudaAware: built with CUDA support (ompi_info's built_with_cuda_support / mpi-ext.h macro).
	CudaAware bool `json:"cuda_aware"`
}

// Python is a Python interpreter, with torch if importable.
type Python struct {
	Path     string `json:"path"`
	Version  string `json:"version"`
	Torch    *Torch `json:"torch"`
	Torchrun string `json:"torchrun"`
}

// Torch is what `import torch` reports.
type Torch struct {
	Version       string `json:"version"`
	CUDA          string `json:"cuda"` // torch.version.cuda, "" for CPU builds
	NCCL          string `json:"nccl"`
	CUDAAvailable bool   `json:"cuda_available"`
	DeviceCount   int    `json:"device_count"`
}
