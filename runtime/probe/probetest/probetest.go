// Package probetest builds fake machines for tests: shell scripts named nvidia-smi, nvcc, mpicc,
// mpirun, ompi_info, python3... in a folder that becomes the whole PATH, and a fake system tree
// for probe.Options.SystemRoot. Their output follows the real tools' formats.
package probetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// Machine is a fake machine: Bin is the only folder on PATH, Root the system root.
type Machine struct {
	T    testing.TB
	Bin  string
	Root string
	// Log, when a tool's Case has Count set, receives one line per call.
	Log string
	n   int
}

// scrubbed are the variables that would let the real machine leak into a fake one.
var scrubbed = []string{
	"CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "NCCL_HOME", "NVSHMEM_HOME", "MGPU_CUDA_MPI_HOME",
	"MGPU_LEARN_PYTHON", "MGPU_LEARN_ARCH", "LD_LIBRARY_PATH", "OPAL_PREFIX",
}

// New makes an empty machine (no tools at all) and points the process environment at it for the
// rest of the test. Tests using it cannot run in parallel.
func New(t testing.TB) *Machine {
	t.Helper()
	m := &Machine{T: t, Bin: t.TempDir(), Root: t.TempDir()}
	m.Log = filepath.Join(m.Root, "calls.log")
	t.Setenv("PATH", m.Bin)
	for _, k := range scrubbed {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("MGPU_LEARN_TOOLS", filepath.Join(m.Root, "no-tools"))
	return m
}

// Options probes this machine without touching the user's cache.
func (m *Machine) Options() probe.Options {
	return probe.Options{SystemRoot: m.Root, NoCache: true, Timeout: 5 * time.Second, PythonTimeout: 5 * time.Second}
}

// Case is one way a fake tool answers: when its arguments ("$*") match the shell pattern Args,
// it prints Out, then Err on stderr, and exits with Code; Hang makes it sleep 100 s first (in a
// child process, as a stuck driver call would).
type Case struct {
	Args string
	Out  string
	Err  string
	Code int
	Hang bool
}

// Tool writes the fake program name; arguments no case matches exit 2 with a message.
func (m *Machine) Tool(name string, cases ...Case) string {
	m.T.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	fmt.Fprintf(&b, "printf '%%s\\n' %s >> %s\n", shellQuote(name+" $*"), shellQuote(m.Log))
	b.WriteString("case \"$*\" in\n")
	for _, c := range cases {
		pattern := strings.ReplaceAll(c.Args, " ", `\ `)
		if pattern == "" {
			pattern = `""`
		}
		fmt.Fprintf(&b, "%s)\n", pattern)
		if c.Hang {
			b.WriteString("  /bin/sleep 100\n")
		}
		if c.Out != "" {
			fmt.Fprintf(&b, "  /bin/cat %s\n", shellQuote(m.file(c.Out)))
		}
		if c.Err != "" {
			fmt.Fprintf(&b, "  /bin/cat %s >&2\n", shellQuote(m.file(c.Err)))
		}
		fmt.Fprintf(&b, "  exit %d;;\n", c.Code)
	}
	fmt.Fprintf(&b, "*) echo \"%s: unexpected arguments: $*\" >&2; exit 2;;\nesac\n", name)
	return m.Exec(filepath.Join(m.Bin, name), b.String())
}

// Exec writes an executable file at path.
func (m *Machine) Exec(path, script string) string {
	m.T.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		m.T.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		m.T.Fatal(err)
	}
	return path
}

// file stores a fake tool's output and returns its path.
func (m *Machine) file(content string) string {
	m.n++
	path := filepath.Join(m.Root, "outputs", fmt.Sprintf("%d.txt", m.n))
	m.Put(path, content)
	return path
}

// Put writes a file, making its folders; path is absolute, or relative to Root.
func (m *Machine) Put(path, content string) string {
	m.T.Helper()
	if !filepath.IsAbs(path) {
		path = filepath.Join(m.Root, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		m.T.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		m.T.Fatal(err)
	}
	return path
}

// Calls are the tool invocations logged so far ("nvidia-smi topo -m").
func (m *Machine) Calls() []string {
	b, _ := os.ReadFile(m.Log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func shellQuote(s string) string {
	// Keep $* live for the call log; quote everything else.
	if strings.Contains(s, "$*") {
		return `"` + strings.NewReplacer(`"`, `\"`, "`", "\\`").Replace(s) + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// GPU is one fake device.
type GPU struct {
	Name      string
	MemoryMiB int
	Compute   string
}

// H200 and friends as nvidia-smi names them.
var (
	H200 = GPU{"NVIDIA H200", 143771, "9.0"}
	H100 = GPU{"NVIDIA H100 80GB HBM3", 81559, "9.0"}
	A100 = GPU{"NVIDIA A100-SXM4-80GB", 81920, "8.0"}
	L4   = GPU{"NVIDIA L4", 23034, "8.9"}
	V100 = GPU{"Tesla V100-PCIE-16GB", 16384, "7.0"}
)

// Driver is the fake driver version; CUDAVersion what nvidia-smi says the driver supports.
const (
	Driver      = "580.159.04"
	CUDAVersion = "13.0"
)

// NvidiaSMI installs a fake nvidia-smi for gpus. link is the topo word for every pair (NV18,
// PIX, SYS...), p2p the topo -p2p r word (OK, NS, CNS...). One GPU: topo is never asked.
func (m *Machine) NvidiaSMI(gpus []GPU, link, p2p string) {
	n := len(gpus)
	links, peers := make([][]string, n), make([][]string, n)
	for i := range links {
		links[i], peers[i] = make([]string, n), make([]string, n)
		for j := range links[i] {
			links[i][j], peers[i][j] = link, p2p
			if i == j {
				links[i][j], peers[i][j] = "X", "X"
			}
		}
	}
	m.NvidiaSMIMatrix(gpus, links, peers)
}

// NvidiaSMIMatrix is NvidiaSMI with a word for each pair.
func (m *Machine) NvidiaSMIMatrix(gpus []GPU, links, peers [][]string) {
	var q strings.Builder
	for i, g := range gpus {
		fmt.Fprintf(&q, "%d, %s, %d, %s, GPU-%08x-1f3a-4b1d-9a4e-0d6f2c1e7a%02d, %s\n", i, g.Name, g.MemoryMiB, g.Compute, 0x6c0bd5e2+i, i, Driver)
	}
	m.Tool("nvidia-smi",
		Case{Args: "--query-gpu=*", Out: q.String()},
		Case{Args: "--version", Out: fmt.Sprintf("NVIDIA-SMI version  : %s\nNVML version        : 580.159\nDRIVER version      : %s\nCUDA Version        : %s\n", Driver, Driver, CUDAVersion)},
		Case{Args: "topo -m", Out: TopoText(links)},
		Case{Args: "topo -p2p r", Out: P2PText(peers)},
	)
}

// NoDriver installs an nvidia-smi that cannot reach a driver, as on a machine whose kernel
// module is not loaded.
func (m *Machine) NoDriver() {
	m.Tool("nvidia-smi", Case{Args: "*", Code: 9,
		Out: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n\n"})
}

// TopoText renders nvidia-smi topo -m's output for a GPU link matrix (tab-separated, the
// header underlined with ANSI escapes, CPU/NUMA affinity columns and the legend).
func TopoText(links [][]string) string {
	var b strings.Builder
	b.WriteString("\t\x1b[4m")
	for i := range links {
		fmt.Fprintf(&b, "GPU%d\t", i)
	}
	b.WriteString("CPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n")
	for i, row := range links {
		fmt.Fprintf(&b, "GPU%d", i)
		for _, w := range row {
			if w == "X" {
				w = " X "
			}
			b.WriteString("\t" + w)
		}
		b.WriteString("\t0-63\t0\t\tN/A\n")
	}
	b.WriteString("\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n" +
		"  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n" +
		"  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n" +
		"  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n" +
		"  PIX  = Connection traversing at most a single PCIe bridge\n" +
		"  NV#  = Connection traversing a bonded set of # NVLinks\n")
	return b.String()
}

// P2PText renders nvidia-smi topo -p2p r's output (header underlined, like driver 580's).
func P2PText(peers [][]string) string {
	var b strings.Builder
	b.WriteString(" \t\x1b[4m")
	for i := range peers {
		fmt.Fprintf(&b, "GPU%d\t", i)
	}
	b.WriteString("\x1b[0m\n")
	for i, row := range peers {
		fmt.Fprintf(&b, " GPU%d\t", i)
		for _, w := range row {
			b.WriteString(w + "\t")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n  CNS  = Chipset not supported\n  GNS  = GPU not supported\n" +
		"  TNS  = Topology not supported\n  NS   = Not supported\n  U    = Unknown\n")
	return b.String()
}

// NVCC installs a fake nvcc on PATH reporting version ("13.0.88").
func (m *Machine) NVCC(version string) string {
	release := version
	if p := strings.Split(version, "."); len(p) >= 2 {
		release = p[0] + "." + p[1]
	}
	return m.Tool("nvcc", Case{Args: "--version", Out: fmt.Sprintf(
		"nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\nBuilt on Wed_Aug_20_01:58:59_PM_PDT_2025\n"+
			"Cuda compilation tools, release %s, V%s\nBuild cuda_%s.r%s/compiler.36424714_0\n", release, version, release, release)})
}

// CC installs a fake cc.
func (m *Machine) CC() string {
	return m.Tool("cc", Case{Args: "--version", Out: "cc (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0\nCopyright (C) 2023 Free Software Foundation, Inc.\n"})
}

// OpenMPI installs fake mpicc, mpirun and ompi_info of an Open MPI in bin (m.Bin when ""), with
// its headers under Root/<prefix>/include; cudaAware sets both ompi_info's answer and
// MPIX_CUDA_AWARE_SUPPORT.
func (m *Machine) OpenMPI(bin, version string, cudaAware bool) {
	if bin == "" {
		bin = m.Bin
	}
	inc := filepath.Join(m.Root, "openmpi-"+version, "include")
	word, macro := "false", "0"
	if cudaAware {
		word, macro = "true", "1"
	}
	m.Put(filepath.Join(inc, "mpi-ext.h"), "#include \"openmpi/mpiext/mpiext_cuda_c.h\"\n")
	m.Put(filepath.Join(inc, "openmpi", "mpiext", "mpiext_cuda_c.h"), "#define MPIX_CUDA_AWARE_SUPPORT "+macro+"\nOMPI_DECLSPEC int MPIX_Query_cuda_support(void);\n")
	lib := filepath.Join(m.Root, "openmpi-"+version, "lib")
	tool := func(name string, cases ...Case) {
		saved := m.Bin
		m.Bin = bin
		m.Tool(name, cases...)
		m.Bin = saved
	}
	tool("mpicc",
		Case{Args: "--showme:version", Out: "mpicc: Open MPI " + version + " (Language: C)\n"},
		Case{Args: "--showme:compile", Out: fmt.Sprintf("-I%s -I%s/openmpi\n", inc, inc)},
		Case{Args: "--showme:link", Out: fmt.Sprintf("-pthread -Wl,-rpath -Wl,%s -Wl,--enable-new-dtags -L%s -lmpi\n", lib, lib)})
	tool("mpirun", Case{Args: "--version", Out: "mpirun (Open MPI) " + version + "\n\nReport bugs to http://www.open-mpi.org/community/help/\n"})
	tool("ompi_info", Case{Args: "--parsable --all", Out: "package:Open MPI builder\nompi:version:full:" + version + "\n" +
		"mca:opal:base:param:opal_built_with_cuda_support:value:" + word + "\n" +
		"mca:opal:base:param:opal_cuda_support:value:" + word + "\n" +
		"mca:mpi:base:param:mpi_cuda_support:value:" + word + "\n" +
		"mca:mpi:base:param:mpi_built_with_cuda_support:value:" + word + "\n" +
		"mca:mpi:base:param:mpi_built_with_cuda_support:help:Whether CUDA GPU buffer support is built into library or not\n"})
}

// Torch is what the fake python3 reports for import torch (nil: not installed).
type Torch = probe.Torch

// Python installs a fake python3 answering the probe script; torch nil means not installed.
func (m *Machine) Python(version string, torch *Torch) string {
	r := map[string]any{"version": version, "executable": filepath.Join(m.Bin, "python3"),
		"site": []string{filepath.Join(m.Root, "site-packages")}}
	if torch != nil {
		r["torch"] = map[string]any{"version": torch.Version, "cuda": torch.CUDA, "nccl": torch.NCCL,
			"cuda_available": torch.CUDAAvailable, "device_count": torch.DeviceCount}
	}
	b, _ := json.Marshal(r)
	return m.Tool("python3", Case{Args: "-c*", Out: "MGPU_PROBE " + string(b) + "\n"})
}

// SystemNCCL puts nccl.h of version ("2.28.3") in Root/usr/include and libnccl.so.2 (no
// unversioned name) in Root/usr/lib/x86_64-linux-gnu.
func (m *Machine) SystemNCCL(version string) {
	m.Put("usr/include/nccl.h", ncclHeader(version))
	m.Put("usr/lib/x86_64-linux-gnu/libnccl.so.2", "")
}

// PipNCCL lays out the nvidia-nccl wheel under root/nvidia/nccl (libnccl.so.2 only).
func (m *Machine) PipNCCL(nvidia, version string) {
	m.Put(filepath.Join(nvidia, "nccl", "include", "nccl.h"), ncclHeader(version))
	m.Put(filepath.Join(nvidia, "nccl", "lib", "libnccl.so.2"), "")
}

// PipNVSHMEM lays out the nvidia-nvshmem wheel under nvidia/nvshmem.
func (m *Machine) PipNVSHMEM(nvidia, version string) {
	v := strings.Split(version+"..", ".")
	m.Put(filepath.Join(nvidia, "nvshmem", "include", "nvshmem.h"), "#include \"host/nvshmem_api.h\"\n")
	m.Put(filepath.Join(nvidia, "nvshmem", "include", "non_abi", "nvshmem_version.h"), fmt.Sprintf(
		"#ifndef NVSHMEM_VERSION_H\n#define NVSHMEM_VERSION_H\n#define NVSHMEM_VENDOR_MAJOR_VERSION %s\n#define NVSHMEM_VENDOR_MINOR_VERSION %s\n#define NVSHMEM_VENDOR_PATCH_VERSION %s\n#endif\n", v[0], v[1], v[2]))
	m.Put(filepath.Join(nvidia, "nvshmem", "lib", "libnvshmem_host.so.3"), "")
	m.Put(filepath.Join(nvidia, "nvshmem", "lib", "libnvshmem_device.a"), "")
}

// PipNVCC lays out the nvidia-cuda-nvcc wheel under nvidia/cu13 with a fake nvcc.
func (m *Machine) PipNVCC(nvidia, version string) string {
	saved := m.Bin
	m.Bin = filepath.Join(nvidia, "cu13", "bin")
	path := m.NVCC(version)
	m.Bin = saved
	m.Put(filepath.Join(nvidia, "cu13", "include", "cccl", "cuda", "std", "version"), "")
	m.Put(filepath.Join(nvidia, "cu13", "lib", "libcudart.so.13"), "")
	return path
}

func ncclHeader(version string) string {
	v := strings.Split(version+"..", ".")
	return fmt.Sprintf("#ifndef NCCL_H_\n#define NCCL_H_\n\n#include <cuda_runtime.h>\n\n#define NCCL_MAJOR %s\n#define NCCL_MINOR %s\n#define NCCL_PATCH %s\n#define NCCL_SUFFIX \"\"\n\n#endif\n", v[0], v[1], v[2])
}
