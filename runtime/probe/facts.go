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

	// PeerStatus[i][j] is nvidia-smi topo -p2p r's word for the pair: "X", "OK", "NS", "CNS", "GNS",
	// "TNS", "DR", "U". Peer is derived from it.
	PeerStatus [][]string `json:"peer_status"`
	// AllGPUs is how many GPUs nvidia-smi lists before CUDA_VISIBLE_DEVICES is applied.
	AllGPUs int `json:"all_gpus"`
	// Visible says, in words, how CUDA_VISIBLE_DEVICES narrowed GPUs ("" when it is unset).
	Visible string `json:"visible"`
	// Sbatch is Slurm's sbatch, when present.
	Sbatch *Tool `json:"sbatch"`
	// FromCache is true when these facts were read from the cache file rather than probed now.
	FromCache bool `json:"from_cache"`
}

// GPU is one device as nvidia-smi reports it.
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	Compute   string `json:"compute"` // "9.0"
	UUID      string `json:"uuid"`
	// Physical is nvidia-smi's index; Index is the CUDA ordinal after CUDA_VISIBLE_DEVICES.
	Physical int `json:"physical_index"`
}

// Tool is a program found on this machine.
type Tool struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	// Source says where it was found: "path", "cuda_home", "system", "pip".
	Source string `json:"source,omitempty"`
	// Include and LibDirs are what the compiler needs besides its defaults (the pip wheel
	// layout of nvcc: include/cccl and lib for cudart).
	Include []string `json:"include,omitempty"`
	LibDirs []string `json:"lib_dirs,omitempty"`
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
	// CudaBuilt is what the MPI says about its build ("true", "false"; "" unknown): Open MPI's
	// ompi_info mpi_built_with_cuda_support, MPICH's configure line (--with-cuda).
	CudaBuilt string `json:"cuda_built"`
	// CudaRuntime is Open MPI's run-time switch (ompi_info mpi_cuda_support / opal_cuda_support).
	CudaRuntime string `json:"cuda_runtime"`
	// CudaHeader is MPIX_CUDA_AWARE_SUPPORT as mpi-ext.h defines it ("1", "0"; "" absent).
	CudaHeader string `json:"cuda_header"`
}

// Python is a Python interpreter, with torch if importable.
type Python struct {
	Path     string `json:"path"`
	Version  string `json:"version"`
	Torch    *Torch `json:"torch"`
	Torchrun string `json:"torchrun"`
	// TorchError is why `import torch` failed, when it is installed but broken ("" otherwise).
	TorchError string `json:"torch_error,omitempty"`
	// SiteDirs are the interpreter's site-packages; NvidiaDirs the nvidia namespace package's
	// folders (pip wheels of nvcc, NCCL, NVSHMEM live under them).
	SiteDirs   []string `json:"site_dirs,omitempty"`
	NvidiaDirs []string `json:"nvidia_dirs,omitempty"`
}

// Torch is what `import torch` reports.
type Torch struct {
	Version       string `json:"version"`
	CUDA          string `json:"cuda"` // torch.version.cuda, "" for CPU builds
	NCCL          string `json:"nccl"`
	CUDAAvailable bool   `json:"cuda_available"`
	DeviceCount   int    `json:"device_count"`
}
