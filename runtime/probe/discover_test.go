package probe_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

func discover(t *testing.T, opts probe.Options) *probe.Facts {
	t.Helper()
	f, err := probe.Discover(context.Background(), opts)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return f
}

func noProblems(t *testing.T, f *probe.Facts) {
	t.Helper()
	if len(f.Problems) > 0 {
		t.Errorf("unexpected problems: %q", f.Problems)
	}
}

func TestNothingInstalled(t *testing.T) {
	m := probetest.New(t)
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.GPUs != nil || f.NVCC != nil || f.CC != nil || f.NCCL != nil || f.NVSHMEM != nil || f.MPI != nil ||
		f.CudaMPI != nil || f.Python != nil || f.Slurm != nil || f.Driver != "" {
		b, _ := json.MarshalIndent(f, "", " ")
		t.Fatalf("found things on an empty machine:\n%s", b)
	}
	if f.Arch() != "sm_90" {
		t.Errorf("Arch() = %q with no GPU, want sm_90", f.Arch())
	}
	if f.Hostname == "" || f.Taken.IsZero() {
		t.Errorf("hostname %q taken %v", f.Hostname, f.Taken)
	}
}

func TestNoDriver(t *testing.T) {
	m := probetest.New(t)
	m.NoDriver()
	f := discover(t, m.Options())
	if len(f.GPUs) != 0 {
		t.Fatalf("GPUs = %v", f.GPUs)
	}
	if len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "couldn't communicate with the NVIDIA driver") {
		t.Fatalf("problems = %q, want the driver message", f.Problems)
	}
}

func TestOneGPU(t *testing.T) {
	m := probetest.New(t)
	m.NvidiaSMI([]probetest.GPU{probetest.H100}, "", "")
	f := discover(t, m.Options())
	noProblems(t, f)
	want := []probe.GPU{{Index: 0, Physical: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, Compute: "9.0", UUID: "GPU-6c0bd5e2-1f3a-4b1d-9a4e-0d6f2c1e7a00"}}
	if !reflect.DeepEqual(f.GPUs, want) {
		t.Fatalf("GPUs = %+v\nwant %+v", f.GPUs, want)
	}
	if f.Driver != probetest.Driver || f.CUDA != "13.0" || f.AllGPUs != 1 {
		t.Errorf("driver %q cuda %q all %d", f.Driver, f.CUDA, f.AllGPUs)
	}
	if !reflect.DeepEqual(f.Links, [][]string{{"X"}}) || !reflect.DeepEqual(f.Peer, [][]bool{{false}}) {
		t.Errorf("links %v peer %v", f.Links, f.Peer)
	}
	for _, c := range m.Calls() {
		if strings.Contains(c, "topo") {
			t.Errorf("asked %q about a single GPU", c)
		}
	}
}

func TestFourNVLinkGPUs(t *testing.T) {
	m := probetest.New(t)
	m.NvidiaSMI([]probetest.GPU{probetest.H200, probetest.H200, probetest.H200, probetest.H200}, "NV18", "OK")
	f := discover(t, m.Options())
	noProblems(t, f)
	if len(f.GPUs) != 4 || f.GPUs[3].Name != "NVIDIA H200" || f.GPUs[3].MemoryMiB != 143771 || f.GPUs[3].Index != 3 {
		t.Fatalf("GPUs = %+v", f.GPUs)
	}
	for i := range 4 {
		for j := range 4 {
			wantLink, wantPeer := "NV18", true
			if i == j {
				wantLink, wantPeer = "X", false
			}
			if f.Links[i][j] != wantLink || f.Peer[i][j] != wantPeer {
				t.Fatalf("pair %d,%d: link %q peer %v", i, j, f.Links[i][j], f.Peer[i][j])
			}
		}
	}
	if f.Arch() != "sm_90" {
		t.Errorf("Arch = %q", f.Arch())
	}
	t.Setenv("MGPU_LEARN_ARCH", "sm_90a")
	if f.Arch() != "sm_90a" {
		t.Errorf("Arch with MGPU_LEARN_ARCH = %q", f.Arch())
	}
}

func TestCudaVisibleDevicesNarrows(t *testing.T) {
	m := probetest.New(t)
	links := [][]string{
		{"X", "NV18", "SYS", "SYS"},
		{"NV18", "X", "SYS", "SYS"},
		{"SYS", "SYS", "X", "NV12"},
		{"SYS", "SYS", "NV12", "X"},
	}
	peers := [][]string{{"X", "OK", "NS", "NS"}, {"OK", "X", "NS", "NS"}, {"NS", "NS", "X", "OK"}, {"NS", "NS", "OK", "X"}}
	m.NvidiaSMIMatrix([]probetest.GPU{probetest.A100, probetest.A100, probetest.L4, probetest.L4}, links, peers)
	t.Setenv("CUDA_VISIBLE_DEVICES", "3,0")
	f := discover(t, m.Options())
	noProblems(t, f)
	if len(f.GPUs) != 2 || f.GPUs[0].Physical != 3 || f.GPUs[0].Index != 0 || f.GPUs[1].Physical != 0 || f.GPUs[1].Index != 1 {
		t.Fatalf("GPUs = %+v", f.GPUs)
	}
	if !reflect.DeepEqual(f.Links, [][]string{{"X", "SYS"}, {"SYS", "X"}}) || !reflect.DeepEqual(f.Peer, [][]bool{{false, false}, {false, false}}) {
		t.Errorf("links %v peer %v", f.Links, f.Peer)
	}
	if f.AllGPUs != 4 || !strings.Contains(f.Visible, "2 of 4") || f.Env["CUDA_VISIBLE_DEVICES"] != "3,0" {
		t.Errorf("all %d visible %q env %v", f.AllGPUs, f.Visible, f.Env)
	}
	if f.Arch() != "sm_89" {
		t.Errorf("Arch = %q, want GPU 0 (an L4) sm_89", f.Arch())
	}
}

func TestPCIePairWithoutPeerAccess(t *testing.T) {
	m := probetest.New(t)
	m.NvidiaSMI([]probetest.GPU{probetest.L4, probetest.L4}, "PIX", "NS")
	f := discover(t, m.Options())
	noProblems(t, f)
	if !reflect.DeepEqual(f.Links, [][]string{{"X", "PIX"}, {"PIX", "X"}}) {
		t.Errorf("links %v", f.Links)
	}
	if !reflect.DeepEqual(f.PeerStatus, [][]string{{"X", "NS"}, {"NS", "X"}}) || f.Peer[0][1] || f.Peer[1][0] {
		t.Errorf("peer %v status %v", f.Peer, f.PeerStatus)
	}
}

func TestHungToolIsTimedOut(t *testing.T) {
	m := probetest.New(t)
	m.Tool("nvidia-smi", probetest.Case{Args: "*", Hang: true})
	m.Tool("nvcc", probetest.Case{Args: "*", Hang: true})
	opts := m.Options()
	opts.Timeout = 300 * time.Millisecond
	start := time.Now()
	f := discover(t, opts)
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("Discover took %s with hung tools", took)
	}
	joined := strings.Join(f.Problems, "\n")
	if !strings.Contains(joined, "nvidia-smi --query-gpu") || !strings.Contains(joined, "nvcc --version: timed out after 300ms") {
		t.Fatalf("problems = %q", f.Problems)
	}
	if f.GPUs != nil {
		t.Errorf("GPUs from a hung nvidia-smi: %v", f.GPUs)
	}
	if f.NVCC == nil || f.NVCC.Version != "" {
		t.Errorf("nvcc that hangs: %+v (want found, version unknown)", f.NVCC)
	}
}

func TestCompilersAndLibraries(t *testing.T) {
	m := probetest.New(t)
	nvcc := m.NVCC("13.0.88")
	cc := m.CC()
	m.SystemNCCL("2.28.3")
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.NVCC == nil || f.NVCC.Path != nvcc || f.NVCC.Version != "13.0.88" || f.NVCC.Source != "path" || f.NVCC.Include != nil {
		t.Errorf("nvcc = %+v", f.NVCC)
	}
	if f.CC == nil || f.CC.Path != cc || !strings.Contains(f.CC.Version, "13.3.0") {
		t.Errorf("cc = %+v", f.CC)
	}
	wantNCCL := &probe.Library{Version: "2.28.3", Source: "system", Include: filepath.Join(m.Root, "usr/include"),
		LibDir: filepath.Join(m.Root, "usr/lib/x86_64-linux-gnu"), LinkArgs: []string{"-l:libnccl.so.2"}}
	if !reflect.DeepEqual(f.NCCL, wantNCCL) {
		t.Errorf("nccl = %+v\nwant %+v", f.NCCL, wantNCCL)
	}
	tc := f.Toolchain(false)
	if tc.NVCC != nvcc || tc.CC != cc || !strings.Contains(tc.Version, "13.0.88") || tc.Arch != "sm_90" {
		t.Errorf("toolchain %+v", tc)
	}
	if l := tc.Libs["nccl"]; !reflect.DeepEqual(l.LinkArgs, []string{"-l:libnccl.so.2"}) || l.RuntimeDirs != nil {
		t.Errorf("toolchain nccl %+v (a system library needs no LD_LIBRARY_PATH)", l)
	}
	if _, ok := tc.Libs["nvshmem"]; ok {
		t.Errorf("nvshmem entry without NVSHMEM")
	}
}

func TestPipLayouts(t *testing.T) {
	m := probetest.New(t)
	tools := filepath.Join(m.Root, "repo", ".tools")
	nvidia := filepath.Join(tools, "cuda", "nvidia")
	nvcc := m.PipNVCC(nvidia, "13.0.88")
	m.PipNCCL(nvidia, "2.28.9")
	m.PipNVSHMEM(nvidia, "3.4.5")
	t.Setenv("MGPU_LEARN_TOOLS", tools)
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.NVCC == nil || f.NVCC.Path != nvcc || f.NVCC.Source != "pip" ||
		!reflect.DeepEqual(f.NVCC.Include, []string{filepath.Join(nvidia, "cu13", "include", "cccl")}) {
		t.Fatalf("nvcc = %+v", f.NVCC)
	}
	nlib := filepath.Join(nvidia, "nccl", "lib")
	if f.NCCL == nil || f.NCCL.Source != "pip" || f.NCCL.Version != "2.28.9" || !reflect.DeepEqual(f.NCCL.LinkArgs, []string{"-l:libnccl.so.2"}) {
		t.Fatalf("nccl = %+v", f.NCCL)
	}
	slib := filepath.Join(nvidia, "nvshmem", "lib")
	wantShmem := []string{"-l:libnvshmem_host.so.3", filepath.Join(slib, "libnvshmem_device.a")}
	if f.NVSHMEM == nil || f.NVSHMEM.Version != "3.4.5" || !reflect.DeepEqual(f.NVSHMEM.LinkArgs, wantShmem) {
		t.Fatalf("nvshmem = %+v", f.NVSHMEM)
	}
	tc := f.Toolchain(false)
	if l := tc.Libs["nccl"]; !reflect.DeepEqual(l.RuntimeDirs, []string{nlib}) || !reflect.DeepEqual(l.LibDirs, []string{nlib}) {
		t.Errorf("toolchain nccl %+v", l)
	}
	if l := tc.Libs["nvshmem"]; !reflect.DeepEqual(l.RuntimeDirs, []string{slib}) || !reflect.DeepEqual(l.LinkArgs, wantShmem) {
		t.Errorf("toolchain nvshmem %+v", l)
	}
	if !reflect.DeepEqual(f.NVCC.LibDirs, []string{filepath.Join(nvidia, "cu13", "lib")}) || tc.Arch != "sm_90" {
		t.Errorf("nvcc lib dirs %v arch %q", f.NVCC.LibDirs, tc.Arch)
	}
}

func TestPythonSitePackagesWheels(t *testing.T) {
	m := probetest.New(t)
	site := filepath.Join(m.Root, "venv", "site-packages")
	nvidia := filepath.Join(site, "nvidia")
	m.PipNCCL(nvidia, "2.27.5")
	m.Tool("python3", probetest.Case{Args: "-c*", Out: `MGPU_PROBE {"version": "3.12.3", "site": ["` + site + `"], "nvidia": ["` + nvidia + `"]}` + "\n"})
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.NCCL == nil || f.NCCL.Source != "pip" || f.NCCL.Include != filepath.Join(nvidia, "nccl", "include") {
		t.Fatalf("nccl = %+v", f.NCCL)
	}
}

func TestNCCLHome(t *testing.T) {
	m := probetest.New(t)
	home := filepath.Join(m.Root, "opt", "nccl")
	m.Put(filepath.Join(home, "include", "nccl.h"), "#define NCCL_MAJOR 2\n#define NCCL_MINOR 21\n#define NCCL_PATCH 5\n")
	m.Put(filepath.Join(home, "lib", "libnccl.so"), "")
	m.Put(filepath.Join(home, "lib", "libnccl.so.2"), "")
	t.Setenv("NCCL_HOME", home)
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.NCCL == nil || f.NCCL.Source != "env" || f.NCCL.Version != "2.21.5" || !reflect.DeepEqual(f.NCCL.LinkArgs, []string{"-lnccl"}) {
		t.Fatalf("nccl = %+v", f.NCCL)
	}
	t.Setenv("NCCL_HOME", filepath.Join(m.Root, "nowhere"))
	f = discover(t, m.Options())
	if f.NCCL != nil || len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "NCCL_HOME=") {
		t.Fatalf("nccl %+v problems %q", f.NCCL, f.Problems)
	}
}

func TestMPIWithoutCUDA(t *testing.T) {
	m := probetest.New(t)
	m.OpenMPI("", "4.1.6", false)
	f := discover(t, m.Options())
	noProblems(t, f)
	mp := f.MPI
	if mp == nil || mp.Vendor != "Open MPI" || mp.Version != "4.1.6" || mp.Dialect != "openmpi" {
		t.Fatalf("mpi = %+v", mp)
	}
	if mp.CudaAware || mp.CudaBuilt != "false" || mp.CudaRuntime != "false" || mp.CudaHeader != "0" {
		t.Errorf("cuda: aware %v built %q runtime %q header %q", mp.CudaAware, mp.CudaBuilt, mp.CudaRuntime, mp.CudaHeader)
	}
	if f.CudaMPI != nil {
		t.Errorf("cuda mpi = %+v", f.CudaMPI)
	}
	lib := filepath.Join(m.Root, "openmpi-4.1.6", "lib")
	l := f.Toolchain(false).Libs["mpi"]
	if !reflect.DeepEqual(l.LinkArgs, []string{"-lpthread", "-lmpi"}) || !reflect.DeepEqual(l.LibDirs, []string{lib}) ||
		!reflect.DeepEqual(l.RuntimeDirs, []string{lib}) || len(l.Include) != 2 {
		t.Errorf("toolchain mpi %+v", l)
	}
	// Without a CUDA-aware MPI, programs that need one still build with this one (CI compiles
	// module2 with Debian's Open MPI; the checker refuses to run them).
	if l2 := f.Toolchain(true).Libs["mpi"]; !reflect.DeepEqual(l2, l) {
		t.Errorf("Toolchain(true) mpi %+v, want the PATH MPI's %+v", l2, l)
	}
}

// A CUDA build whose CUDA support is switched off at run time is not CUDA-aware.
func TestMPICudaSwitchedOff(t *testing.T) {
	m := probetest.New(t)
	m.OpenMPI("", "4.1.4", true)
	m.Tool("ompi_info", probetest.Case{Args: "--parsable --all", Out: "mca:mpi:base:param:mpi_built_with_cuda_support:value:true\n" +
		"mca:mpi:base:param:mpi_cuda_support:value:false\n"})
	f := discover(t, m.Options())
	if f.MPI == nil || f.MPI.CudaAware || f.MPI.CudaBuilt != "true" || f.MPI.CudaRuntime != "false" || f.CudaMPI != nil {
		t.Fatalf("mpi %+v cuda mpi %+v", f.MPI, f.CudaMPI)
	}
}

// A cluster's MPI named by MPI_HOME counts when it is CUDA-aware; when it is not, the doctor
// hears why; when it is the MPI on PATH, it is not probed twice.
func TestCudaMPIFromMPIHome(t *testing.T) {
	m := probetest.New(t)
	m.OpenMPI("", "4.1.6", false)
	home := filepath.Join(m.Root, "opt", "hpcx")
	m.OpenMPI(filepath.Join(home, "bin"), "4.1.7", true)
	t.Setenv("MPI_HOME", home)
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.CudaMPI == nil || f.CudaMPI.Home != home || f.CudaMPI.Version != "4.1.7" {
		t.Fatalf("cuda mpi = %+v", f.CudaMPI)
	}

	plain := filepath.Join(m.Root, "opt", "plain")
	m.OpenMPI(filepath.Join(plain, "bin"), "4.1.5", false)
	t.Setenv("MPI_HOME", plain)
	f = discover(t, m.Options())
	if f.CudaMPI != nil || len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "MPI_HOME="+plain+": Open MPI 4.1.5 is not CUDA-aware") {
		t.Errorf("cuda mpi %+v problems %q", f.CudaMPI, f.Problems)
	}

	t.Setenv("MPI_HOME", filepath.Dir(m.Bin))
	f = discover(t, m.Options())
	noProblems(t, f)
}

func TestCudaMPIElsewhere(t *testing.T) {
	m := probetest.New(t)
	m.OpenMPI("", "4.1.6", false)
	home := filepath.Join(m.Root, "tmp", "ompi-cuda")
	m.OpenMPI(filepath.Join(home, "bin"), "5.0.5", true)
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.MPI == nil || f.MPI.CudaAware {
		t.Fatalf("mpi = %+v", f.MPI)
	}
	c := f.CudaMPI
	if c == nil || !c.CudaAware || c.Version != "5.0.5" || c.Home != home || c.Mpirun != filepath.Join(home, "bin", "mpirun") {
		t.Fatalf("cuda mpi = %+v", c)
	}
	if l := f.Toolchain(true).Libs["mpi"]; !strings.Contains(strings.Join(l.Include, " "), "openmpi-5.0.5") {
		t.Errorf("Toolchain(true) mpi = %+v", l)
	}

	// MGPU_CUDA_MPI_HOME pointing at a non-aware MPI is a problem, and /tmp/ompi-cuda still counts.
	other := filepath.Join(m.Root, "opt", "plain")
	m.OpenMPI(filepath.Join(other, "bin"), "4.1.5", false)
	t.Setenv("MGPU_CUDA_MPI_HOME", other)
	f = discover(t, m.Options())
	if f.CudaMPI == nil || f.CudaMPI.Home != home {
		t.Errorf("cuda mpi = %+v", f.CudaMPI)
	}
	if len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "Open MPI 4.1.5 is not CUDA-aware") {
		t.Errorf("problems = %q", f.Problems)
	}
}

func TestCudaAwareMPIOnPath(t *testing.T) {
	m := probetest.New(t)
	m.OpenMPI("", "5.0.5", true)
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.MPI == nil || !f.MPI.CudaAware || f.CudaMPI == nil || f.CudaMPI.Mpirun != f.MPI.Mpirun {
		t.Fatalf("mpi %+v cuda mpi %+v", f.MPI, f.CudaMPI)
	}
}

func TestMPICH(t *testing.T) {
	m := probetest.New(t)
	m.Put("mpich/include/mpi.h", "")
	m.Tool("mpicc", probetest.Case{Args: "-show", Out: "gcc -I" + filepath.Join(m.Root, "mpich/include") + " -L/usr/lib/x86_64-linux-gnu -lmpich\n"})
	m.Tool("mpirun", probetest.Case{Args: "--version", Out: "HYDRA build details:\n    Version:                                 4.2.0\n    Release Date:                            Fri Feb  9 12:29:21 CST 2024\n"})
	m.Tool("mpichversion", probetest.Case{Args: "", Out: "MPICH Version:      4.2.0\nMPICH Release date: Fri Feb  9 12:29:21 CST 2024\nMPICH Device:       ch4:ofi\nMPICH configure:    --prefix=/usr --with-cuda=/usr/local/cuda\n"})
	f := discover(t, m.Options())
	noProblems(t, f)
	mp := f.MPI
	if mp == nil || mp.Vendor != "MPICH" || mp.Version != "4.2.0" || mp.Dialect != "mpich" || !mp.CudaAware || mp.CudaBuilt != "true" {
		t.Fatalf("mpi = %+v", mp)
	}
	if !reflect.DeepEqual(mp.LinkArgs, []string{"-L/usr/lib/x86_64-linux-gnu", "-lmpich"}) {
		t.Errorf("link args %q", mp.LinkArgs)
	}
	if l := f.Toolchain(false).Libs["mpi"]; l.LibDirs != nil || !reflect.DeepEqual(l.LinkArgs, []string{"-lmpich"}) {
		t.Errorf("toolchain mpi %+v (system folders stay implicit)", l)
	}
}

func TestPythonWithAndWithoutTorch(t *testing.T) {
	m := probetest.New(t)
	py := m.Python("3.12.3", nil)
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.Python == nil || f.Python.Path != py || f.Python.Version != "3.12.3" || f.Python.Torch != nil || f.Python.Torchrun != "" {
		t.Fatalf("python = %+v", f.Python)
	}

	m.Python("3.12.3", &probe.Torch{Version: "2.11.0+cu130", CUDA: "13.0", NCCL: "2.27.7", CUDAAvailable: true, DeviceCount: 4})
	run := m.Tool("torchrun", probetest.Case{Args: "*"})
	f = discover(t, m.Options())
	noProblems(t, f)
	want := &probe.Torch{Version: "2.11.0+cu130", CUDA: "13.0", NCCL: "2.27.7", CUDAAvailable: true, DeviceCount: 4}
	if f.Python == nil || !reflect.DeepEqual(f.Python.Torch, want) || f.Python.Torchrun != run {
		t.Fatalf("python = %+v torch %+v", f.Python, f.Python.Torch)
	}

	opts := m.Options()
	opts.SkipPython = true
	if f := discover(t, opts); f.Python != nil {
		t.Errorf("SkipPython probed python: %+v", f.Python)
	}
}

func TestPythonThatIsNotPython(t *testing.T) {
	m := probetest.New(t)
	m.Tool("python3", probetest.Case{Args: "*", Out: "Python 2.7.18\n"})
	f := discover(t, m.Options())
	if f.Python == nil || f.Python.Version != "" || len(f.Problems) != 1 || !strings.Contains(f.Problems[0], "MGPU_PROBE") {
		t.Fatalf("python %+v problems %q", f.Python, f.Problems)
	}
}

func TestSlurmAndEnv(t *testing.T) {
	m := probetest.New(t)
	m.Tool("srun", probetest.Case{Args: "--version", Out: "slurm 23.02.7\n"})
	m.Tool("sbatch", probetest.Case{Args: "*"})
	t.Setenv("NCCL_DEBUG", "INFO")
	t.Setenv("NVSHMEM_DISABLE_NVLS", "1")
	t.Setenv("HOME_UNRELATED_VAR", "x")
	f := discover(t, m.Options())
	noProblems(t, f)
	if f.Slurm == nil || f.Slurm.Version != "23.02.7" || f.Sbatch == nil {
		t.Errorf("slurm %+v sbatch %+v", f.Slurm, f.Sbatch)
	}
	if f.Env["NCCL_DEBUG"] != "INFO" || f.Env["NVSHMEM_DISABLE_NVLS"] != "1" || f.Env["MGPU_LEARN_TOOLS"] == "" {
		t.Errorf("env = %v", f.Env)
	}
	if _, ok := f.Env["HOME_UNRELATED_VAR"]; ok {
		t.Errorf("env holds an unrelated variable")
	}
}

func TestCache(t *testing.T) {
	m := probetest.New(t)
	m.NvidiaSMI([]probetest.GPU{probetest.H100}, "", "")
	opts := m.Options()
	opts.NoCache = false
	opts.CacheDir = filepath.Join(m.Root, "cache")
	queries := func() int {
		n := 0
		for _, c := range m.Calls() {
			if strings.Contains(c, "--query-gpu") {
				n++
			}
		}
		return n
	}

	f := discover(t, opts)
	if f.FromCache || queries() != 1 {
		t.Fatalf("first run: from cache %v, %d queries", f.FromCache, queries())
	}
	f = discover(t, opts)
	if !f.FromCache || queries() != 1 || len(f.GPUs) != 1 {
		t.Fatalf("second run: from cache %v, %d queries, %d GPUs", f.FromCache, queries(), len(f.GPUs))
	}
	// Per-run variables do not defeat the cache, but show in Env.
	t.Setenv("MGPU_RANK", "3")
	if f = discover(t, opts); !f.FromCache || f.Env["MGPU_RANK"] != "3" {
		t.Fatalf("MGPU_RANK: from cache %v env %v", f.FromCache, f.Env)
	}
	opts.Refresh = true
	if f = discover(t, opts); f.FromCache || queries() != 2 {
		t.Fatalf("Refresh: from cache %v, %d queries", f.FromCache, queries())
	}
	opts.Refresh = false
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	if f = discover(t, opts); f.FromCache || queries() != 3 {
		t.Fatalf("CUDA_VISIBLE_DEVICES changed: from cache %v, %d queries", f.FromCache, queries())
	}
	// A new tool on PATH changes the key.
	m.NVCC("13.0.88")
	if f = discover(t, opts); f.FromCache || f.NVCC == nil {
		t.Fatalf("new nvcc: from cache %v nvcc %+v", f.FromCache, f.NVCC)
	}
	if f = discover(t, opts); !f.FromCache {
		t.Fatal("not cached after the new nvcc")
	}
	// Corrupt and stale files are ignored (and replaced).
	path := filepath.Join(opts.CacheDir, "facts.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if f = discover(t, opts); f.FromCache {
		t.Fatal("corrupt cache used")
	}
	b, _ := os.ReadFile(path)
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatalf("cache not rewritten: %v", err)
	}
	raw["facts"].(map[string]any)["taken"] = time.Now().Add(-25 * time.Hour).Format(time.RFC3339Nano)
	b, _ = json.Marshal(raw)
	os.WriteFile(path, b, 0o644)
	if f = discover(t, opts); f.FromCache {
		t.Fatal("stale cache used")
	}
}

func TestCacheStampsAndTimeouts(t *testing.T) {
	m := probetest.New(t)
	m.Python("3.12.3", nil)
	opts := m.Options()
	opts.NoCache = false
	opts.CacheDir = filepath.Join(m.Root, "cache")
	site := filepath.Join(m.Root, "site-packages")
	os.MkdirAll(site, 0o755)
	discover(t, opts)
	if f := discover(t, opts); !f.FromCache {
		t.Fatal("not cached")
	}
	// pip install torch: site-packages changes.
	os.MkdirAll(filepath.Join(site, "torch"), 0o755)
	future := time.Now().Add(time.Minute)
	os.Chtimes(site, future, future)
	if f := discover(t, opts); f.FromCache {
		t.Fatal("cache used after site-packages changed")
	}

	// Facts with a timed-out probe are not cached.
	m.Tool("nvidia-smi", probetest.Case{Args: "*", Hang: true})
	opts.Timeout = 200 * time.Millisecond
	discover(t, opts)
	if f := discover(t, opts); f.FromCache {
		t.Fatal("facts with a timeout were cached")
	}
}

func TestToolsDirOption(t *testing.T) {
	m := probetest.New(t)
	tools := filepath.Join(m.Root, "elsewhere", ".tools")
	m.PipNCCL(filepath.Join(tools, "cuda", "nvidia"), "2.28.9")
	opts := m.Options()
	opts.ToolsDir = tools
	if f := discover(t, opts); f.NCCL == nil || f.NCCL.Source != "pip" {
		t.Fatalf("nccl = %+v", f.NCCL)
	}
}

// benchMachine is a machine without GPUs but with every tool, as a learner's laptop.
func benchMachine(b *testing.B) *probetest.Machine {
	m := probetest.New(b)
	m.NVCC("13.0.88")
	m.CC()
	m.OpenMPI("", "4.1.6", false)
	m.Python("3.12.3", nil)
	m.SystemNCCL("2.28.3")
	return m
}

// BenchmarkDiscoverNoGPU is a cold probe of a machine without GPUs (target: well under 1 s).
func BenchmarkDiscoverNoGPU(b *testing.B) {
	m := benchMachine(b)
	for b.Loop() {
		if _, err := probe.Discover(context.Background(), m.Options()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiscoverCached reads fresh facts from the cache file.
func BenchmarkDiscoverCached(b *testing.B) {
	m := benchMachine(b)
	opts := m.Options()
	opts.NoCache = false
	opts.CacheDir = b.TempDir()
	if _, err := probe.Discover(context.Background(), opts); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f, err := probe.Discover(context.Background(), opts)
		if err != nil || !f.FromCache {
			b.Fatalf("from cache %v, %v", f != nil && f.FromCache, err)
		}
	}
}
