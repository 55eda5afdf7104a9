// Package doctor says what this machine can run: the requirement checks that refuse an exercise
// before anything is built (exit code 3 in `check`), and the one-screen report of the facts and
// of every module of the course.
package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// Reason is one unmet requirement: what is missing, in words that name this machine, and how to
// get it.
type Reason struct {
	// Need is the requirement's key: one of the Need* constants.
	Need string `json:"need"`
	What string `json:"what"`
	Fix  string `json:"fix"`
	// amount orders reasons of the same Need (GPUs needed, compute capability x10).
	amount int
}

// Needs, in the order reasons are listed.
const (
	NeedGPUs         = "gpus"
	NeedCompute      = "min_compute"
	NeedPeerAccess   = "peer_access"
	NeedNVCC         = "nvcc"
	NeedCC           = "cc"
	NeedPython       = "python"
	NeedTorch        = "torch"
	NeedNCCL         = "nccl"
	NeedNVSHMEM      = "nvshmem"
	NeedMPI          = "mpi"
	NeedCudaAwareMPI = "cuda-aware-mpi"
	NeedMPIRun       = "mpirun"
	NeedUnknown      = "unknown"
)

var needOrder = []string{NeedGPUs, NeedCompute, NeedPeerAccess, NeedNVCC, NeedCC, NeedPython, NeedTorch,
	NeedNCCL, NeedNVSHMEM, NeedMPI, NeedCudaAwareMPI, NeedMPIRun, NeedUnknown}

func needRank(n string) int {
	for i, x := range needOrder {
		if x == n {
			return i
		}
	}
	return len(needOrder)
}

// UnmetExercise is Unmet for an exercise's manifest, with what its kind and build add: a cuda
// exercise needs nvcc and a c one cc (to build, even on a machine without a GPU), a python one
// needs Python, and build.libs need their libraries.
func UnmetExercise(f *probe.Facts, m *course.Manifest) []Reason {
	req := m.Requires
	req.Libs = append([]string(nil), req.Libs...)
	switch m.Kind {
	case "cuda":
		req.Libs = append(req.Libs, "nvcc")
	case "c":
		req.Libs = append(req.Libs, "cc")
	}
	for _, l := range m.Build.Libs {
		switch l {
		case "nccl", "mpi", "nvshmem":
			req.Libs = append(req.Libs, l)
		}
	}
	rs := Unmet(f, req, m.Launch)
	if m.Kind == "python" && !hasNeed(rs, NeedPython) && (f == nil || f.Python == nil) {
		rs = append(rs, pythonMissing(false))
		sortReasons(rs)
	}
	return rs
}

// Unmet lists the requirements f does not meet, most basic first; nil when the exercise can run.
// The launcher adds its own needs: mpirun needs an mpirun (the CUDA-aware one when
// launch.CudaAwareMPI), torchrun needs Python with torch.
func Unmet(f *probe.Facts, req course.Requirements, launch course.Launch) []Reason {
	if f == nil {
		f = &probe.Facts{}
	}
	var rs []Reason
	add := func(r Reason) {
		if !hasNeed(rs, r.Need) {
			rs = append(rs, r)
		}
	}
	have := len(f.GPUs)
	if req.GPUs > have {
		add(gpusMissing(f, req.GPUs))
	}
	used := usedGPUs(f, req, launch)
	if req.MinCompute != "" {
		if r, ok := computeTooLow(f, req.MinCompute, used); ok {
			add(r)
		}
	}
	if req.PeerAccess {
		if r, ok := peerMissing(f, used); ok {
			add(r)
		}
	}

	cudaAware := launch.CudaAwareMPI
	libs := append([]string(nil), req.Libs...)
	if launch.Launcher == "torchrun" {
		libs = append(libs, "torch")
	}
	for _, l := range libs {
		if l == "cuda-aware-mpi" {
			cudaAware = true
		}
	}
	if cudaAware && f.CudaMPI == nil {
		add(cudaMPIMissing(f))
	}
	for _, l := range libs {
		switch l {
		case "nvcc":
			if f.NVCC == nil {
				add(wheelsUnsearched(f, Reason{Need: NeedNVCC,
					What: "needs nvcc, the CUDA compiler, to build (even on a machine without a GPU); none was found on PATH, in $CUDA_HOME, /usr/local/cuda or pip wheels",
					Fix:  "run scripts/install-cuda-tools.sh (nvcc from pip wheels into .tools/), or install the CUDA toolkit and put its bin/ on PATH or set CUDA_HOME"}))
			}
		case "cc":
			if f.CC == nil {
				add(Reason{Need: NeedCC, What: "needs a C compiler (cc, gcc or clang on PATH); none was found",
					Fix: "install gcc (Debian/Ubuntu: apt install build-essential)"})
			}
		case "torch":
			if r, ok := torchMissing(f, req.GPUs); ok {
				add(r)
			}
		case "nccl":
			if f.NCCL == nil {
				add(wheelsUnsearched(f, Reason{Need: NeedNCCL,
					What: "needs NCCL (nccl.h and libnccl); none was found system-wide, in $NCCL_HOME or in pip wheels",
					Fix:  "run scripts/install-cuda-tools.sh (NCCL from pip wheels into .tools/), or apt install libnccl-dev, or set NCCL_HOME to an NCCL prefix"}))
			}
		case "nvshmem":
			if f.NVSHMEM == nil {
				add(nvshmemMissing(f))
			} else if r, ok := nvshmemUnusable(f.NVSHMEM); ok {
				add(r)
			}
		case "mpi":
			if cudaAware {
				continue // the CUDA-aware MPI builds it; its reason says what is missing
			}
			switch {
			case f.MPI == nil:
				add(Reason{Need: NeedMPI, What: "needs MPI (mpicc and mpirun on PATH); none was found",
					Fix: "install Open MPI (Debian/Ubuntu: apt install libopenmpi-dev openmpi-bin), or load your cluster's MPI module"})
			case f.MPI.Mpicc == "":
				add(Reason{Need: NeedMPI, What: "needs MPI's compiler wrapper mpicc to build; only " + f.MPI.Mpirun + " was found",
					Fix: "install your MPI's development package (Debian/Ubuntu: apt install libopenmpi-dev)"})
			}
		case "cuda-aware-mpi":
			// handled above
		default:
			add(Reason{Need: NeedUnknown, What: fmt.Sprintf("requires %q, which this version of mgpu-learn does not know", l),
				Fix: "update mgpu-learn, or correct the exercise's requires.libs"})
		}
	}
	// NVSHMEM inside one machine reaches the other GPUs' symmetric heaps through peer
	// mappings (NVLink or PCIe peer-to-peer); without them it would need a network transport
	// between GPUs of the same host, which the course does not set up.
	if slices.Contains(libs, "nvshmem") && !req.PeerAccess && !hasNeed(rs, NeedPeerAccess) {
		if r, ok := peerMissing(f, used); ok {
			r.What = "NVSHMEM " + r.What
			r.Fix = "NVSHMEM within one machine writes into the other GPUs' memory through peer access; " + r.Fix
			add(r)
		}
	}
	if launch.Launcher == "mpirun" && !hasNeed(rs, NeedMPI) && !hasNeed(rs, NeedCudaAwareMPI) {
		m := f.MPI
		if cudaAware {
			m = f.CudaMPI
		}
		if m != nil && m.Mpirun == "" {
			add(Reason{Need: NeedMPIRun, What: "launches its ranks with mpirun; " + m.Vendor + " has no mpirun here",
				Fix: "install your MPI's launcher (Debian/Ubuntu: apt install openmpi-bin)"})
		} else if m == nil {
			add(Reason{Need: NeedMPIRun, What: "launches its ranks with mpirun; no mpirun was found on PATH",
				Fix: "install Open MPI (Debian/Ubuntu: apt install openmpi-bin libopenmpi-dev), or load your cluster's MPI module"})
		}
	}
	sortReasons(rs)
	return rs
}

func hasNeed(rs []Reason, need string) bool {
	for _, r := range rs {
		if r.Need == need {
			return true
		}
	}
	return false
}

func sortReasons(rs []Reason) {
	sort.SliceStable(rs, func(i, j int) bool { return needRank(rs[i].Need) < needRank(rs[j].Need) })
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func gpusMissing(f *probe.Facts, need int) Reason {
	have := len(f.GPUs)
	r := Reason{Need: NeedGPUs, amount: need}
	has := "none"
	if have > 0 {
		has = strconv.Itoa(have)
	}
	r.What = fmt.Sprintf("needs %s; this machine has %s", plural(need, "GPU", "GPUs"), has)
	cvd, set := f.Env["CUDA_VISIBLE_DEVICES"]
	if set {
		r.What += fmt.Sprintf(" (CUDA_VISIBLE_DEVICES=%s)", cvd)
	}
	switch {
	case set && f.AllGPUs >= need:
		r.Fix = fmt.Sprintf("CUDA_VISIBLE_DEVICES hides %d of its %d GPUs: unset it, or list at least %d", f.AllGPUs-have, f.AllGPUs, need)
	case have == 0 && f.Driver == "":
		r.Fix = fmt.Sprintf("run it on a machine with %s and the NVIDIA driver (nvidia-smi must list them); you can still read the lessons and build here", plural(need, "NVIDIA GPU", "NVIDIA GPUs"))
	default:
		r.Fix = fmt.Sprintf("run it on a machine with at least %s (a cloud instance or a cluster node)", plural(need, "NVIDIA GPU", "NVIDIA GPUs"))
	}
	return r
}

// usedGPUs is how many GPUs a run takes: every visible one for "single" and ranks "all", else
// the ranks, never fewer than required nor more than there are.
func usedGPUs(f *probe.Facts, req course.Requirements, launch course.Launch) int {
	have := len(f.GPUs)
	n := have
	if launch.Launcher != "single" {
		if r, err := strconv.Atoi(launch.Ranks); err == nil && r > 0 {
			n = r
		}
	}
	n = max(n, req.GPUs)
	return min(n, have)
}

// compute parses "9.0" as 90.
func compute(s string) (int, bool) {
	maj, minor, ok := strings.Cut(strings.TrimSpace(s), ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || b > 9 {
		return 0, false
	}
	return a*10 + b, true
}

func computeTooLow(f *probe.Facts, min string, used int) (Reason, bool) {
	want, ok := compute(min)
	if !ok {
		return Reason{}, false
	}
	r := Reason{Need: NeedCompute, amount: want,
		Fix: fmt.Sprintf("use GPUs of compute capability %s or newer (nvidia-smi --query-gpu=compute_cap --format=csv lists them); CUDA_VISIBLE_DEVICES can pick them", min)}
	if len(f.GPUs) == 0 {
		r.What = fmt.Sprintf("needs a GPU of compute capability %s or newer; this machine has none", min)
		return r, true
	}
	for _, g := range f.GPUs[:max(used, 1)] {
		got, ok := compute(g.Compute)
		if ok && got < want {
			r.What = fmt.Sprintf("needs compute capability %s or newer; GPU %d (%s) is %s", min, g.Index, g.Name, g.Compute)
			return r, true
		}
	}
	return Reason{}, false
}

func peerMissing(f *probe.Facts, used int) (Reason, bool) {
	if used < 2 || f.Peer == nil {
		return Reason{}, false // unknown: nvidia-smi topo failed (listed under problems)
	}
	for i := 0; i < used; i++ {
		for j := i + 1; j < used; j++ {
			if i < len(f.Peer) && j < len(f.Peer[i]) && f.Peer[i][j] && f.Peer[j][i] {
				continue
			}
			detail := []string{}
			if i < len(f.Links) && j < len(f.Links[i]) {
				detail = append(detail, "link "+f.Links[i][j])
			}
			if i < len(f.PeerStatus) && j < len(f.PeerStatus[i]) {
				detail = append(detail, "nvidia-smi topo -p2p r says "+f.PeerStatus[i][j])
			}
			what := fmt.Sprintf("needs peer access between every pair of its %d GPUs; GPU %d and GPU %d have none", used, i, j)
			if len(detail) > 0 {
				what += " (" + strings.Join(detail, ", ") + ")"
			}
			return Reason{Need: NeedPeerAccess, What: what,
				Fix: "peer access needs NVLink or GPUs under one PCIe switch (and, in a VM, an IOMMU set up for it); pick GPUs whose `nvidia-smi topo -p2p r` entry is OK with CUDA_VISIBLE_DEVICES, or use another machine"}, true
		}
	}
	return Reason{}, false
}

func cudaMPIMissing(f *probe.Facts) Reason {
	what := "needs a CUDA-aware MPI, one that takes device pointers (MPIX_Query_cuda_support() returns 1; ompi_info: mpi_built_with_cuda_support true); "
	if m := f.MPI; m != nil {
		what += "the MPI here, " + mpiWords(m) + ", is not: " + notAwareEvidence(m) +
			", so a device pointer passed to it would crash the program"
	} else {
		what += "no MPI was found"
	}
	return Reason{Need: NeedCudaAwareMPI, What: what,
		Fix: "put a CUDA-aware MPI first on PATH (a cluster's CUDA-aware MPI module does that), or set MGPU_CUDA_MPI_HOME (or MPI_HOME) to its prefix (bin/mpirun, bin/mpicc); /tmp/ompi-cuda is looked at too. " +
			"To build one: Open MPI's configure --with-cuda=<CUDA prefix> (UCX, if used, built with CUDA as well). Then run `mgpu-learn doctor --refresh`"}
}

// mpiWords names an MPI installation: "Open MPI 4.1.6 (/usr/bin/mpirun)".
func mpiWords(m *probe.MPI) string {
	name := strings.TrimSpace(m.Vendor + " " + m.Version)
	if name == "" {
		name = "an unknown MPI"
	}
	if m.Mpirun != "" {
		name += " (" + m.Mpirun + ")"
	}
	return name
}

// notAwareEvidence says why an MPI counts as not CUDA-aware.
func notAwareEvidence(m *probe.MPI) string {
	switch {
	case m.CudaBuilt == "true" && m.CudaRuntime == "false":
		return "it was built with CUDA, but its CUDA support is switched off (mpi_cuda_support is false: is OMPI_MCA_mpi_cuda_support=0 set?)"
	case m.CudaBuilt == "false":
		return "it was built without CUDA (built_with_cuda_support false)"
	case m.CudaHeader == "0":
		return "its mpi-ext.h defines MPIX_CUDA_AWARE_SUPPORT 0"
	}
	return "it does not say that it supports CUDA (no built_with_cuda_support, no MPIX_CUDA_AWARE_SUPPORT)"
}

// MPIFound says in words which MPI an exercise's build and run use: the CUDA-aware one when
// the exercise asks for it. "" when there is none.
func MPIFound(f *probe.Facts, cudaAware bool) string {
	m := f.MPI
	label := "MPI"
	if cudaAware {
		m, label = f.CudaMPI, "CUDA-aware MPI"
	}
	if m == nil {
		return ""
	}
	s := label + " " + mpiWords(m)
	if m.Home != "" && m.Home != "/usr" && m.Home != "/usr/local" {
		s += " from " + m.Home
	}
	switch {
	case m.CudaBuilt == "true":
		s += "; ompi_info: built with CUDA"
	case m.CudaHeader == "1":
		s += "; mpi-ext.h: MPIX_CUDA_AWARE_SUPPORT 1"
	}
	return s
}

func pythonMissing(torch bool) Reason {
	what := "needs Python 3; no python3 was found on PATH (or MGPU_LEARN_PYTHON)"
	fix := "install Python 3, or set MGPU_LEARN_PYTHON to an interpreter"
	if torch {
		what = "needs Python 3 with PyTorch; no python3 was found on PATH (or MGPU_LEARN_PYTHON)"
		fix = "install Python 3 and PyTorch (pip install torch), or set MGPU_LEARN_PYTHON to an interpreter that has it"
	}
	return Reason{Need: NeedPython, What: what, Fix: fix}
}

func torchMissing(f *probe.Facts, gpus int) (Reason, bool) {
	py := f.Python
	if py == nil {
		return pythonMissing(true), true
	}
	who := py.Path
	if py.Version != "" {
		who += " (Python " + py.Version + ")"
	}
	t := py.Torch
	if t == nil && f.PythonTimedOut() {
		// Not known to be missing: the probe was stopped before torch answered.
		return Reason{Need: NeedTorch, Fix: probeAgain,
			What: "needs PyTorch; whether " + who + " can import torch is unknown: the Python probe timed out before torch reported"}, true
	}
	if t == nil {
		what := "needs PyTorch; " + who + " cannot import torch"
		if py.TorchError != "" {
			what += ": " + py.TorchError
		}
		return Reason{Need: NeedTorch, What: what,
			Fix: "pip install torch (a CUDA build for GPU exercises) into that interpreter, or set MGPU_LEARN_PYTHON to a python that has it"}, true
	}
	if gpus == 0 {
		return Reason{}, false
	}
	if t.CUDA == "" {
		return Reason{Need: NeedTorch, What: "needs a CUDA build of PyTorch; torch " + t.Version + " in " + who + " is CPU-only",
			Fix: "install a CUDA wheel of torch that your driver supports (pip install torch --index-url https://download.pytorch.org/whl/cu130 for CUDA 13.0)"}, true
	}
	if !t.CUDAAvailable && len(f.GPUs) >= gpus {
		fix := "torch was built for CUDA " + t.CUDA
		if f.CUDA != "" {
			fix += " and the driver supports CUDA " + f.CUDA
		}
		fix += ": install a torch wheel for a CUDA version the driver supports, or update the driver"
		return Reason{Need: NeedTorch, What: "torch " + t.Version + " cannot use the GPUs (torch.cuda.is_available() is False)", Fix: fix}, true
	}
	return Reason{}, false
}

// Explain formats reasons for a refusal: the id, then one "- what" line and one "  fix: how"
// line per reason.
func Explain(id string, rs []Reason) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s cannot run on this machine:\n", id)
	for _, r := range rs {
		fmt.Fprintf(&b, "  - %s\n    fix: %s\n", r.What, r.Fix)
	}
	return b.String()
}

// nvshmemMinimum is the oldest NVSHMEM whose unique-id start-up (nvshmemx_get_uniqueid,
// nvshmemx_init_attr with NVSHMEMX_INIT_WITH_UNIQUEID) the harness's mgpu_nvshmem_init calls:
// NVSHMEM's changelog adds it in 2.11.0.
const nvshmemMinimum = "2.11"

// nvshmemUIDPlugin is the bootstrap module that NVSHMEM loads at start-up for a unique-id
// initialization (the harness's), from the host library's folder.
const nvshmemUIDPlugin = "nvshmem_bootstrap_uid.so"

func nvshmemMissing(f *probe.Facts) Reason {
	r := Reason{Need: NeedNVSHMEM,
		What: "needs NVSHMEM (nvshmem.h, libnvshmem_host and libnvshmem_device.a); none was found in $NVSHMEM_HOME, system-wide or in pip wheels",
		Fix:  "run scripts/install-cuda-tools.sh (NVSHMEM from pip wheels into .tools/), or pip install nvidia-nvshmem-cu13, or set NVSHMEM_HOME to an NVSHMEM prefix"}
	if home := f.Env["NVSHMEM_HOME"]; home != "" {
		r.What = fmt.Sprintf("needs NVSHMEM; NVSHMEM_HOME=%s holds no include/nvshmem.h with lib/libnvshmem_host.so* and lib/libnvshmem_device.a, and none was found system-wide or in pip wheels", home)
		r.Fix = "point NVSHMEM_HOME at the prefix that holds include/ and lib/ (or unset it), or run scripts/install-cuda-tools.sh"
	}
	return wheelsUnsearched(f, r)
}

// probeAgain is the fix for what a timed-out probe left unknown. Facts from such a probe are not
// cached, so the next command probes again; doctor --refresh does it at once.
const probeAgain = "the machine may have been too busy for the probe: run `mgpu-learn doctor --refresh` to probe again"

// wheelsUnsearched amends a "none was found ... in pip wheels" reason when the Python probe
// timed out before it listed its site-packages: the wheels there were never looked at, so the
// thing may well be installed, and the first fix is to probe again.
func wheelsUnsearched(f *probe.Facts, r Reason) Reason {
	if !f.PipWheelsUnsearched() {
		return r
	}
	r.What += "; but the Python probe of " + f.Python.Path + " timed out, so pip wheels in its site-packages were not searched"
	r.Fix = probeAgain + "; if it is still missing, " + r.Fix
	return r
}

// NVSHMEMFound says in words which NVSHMEM the builds use: version, where it came from (pip
// wheel, system package, $NVSHMEM_HOME) and its folders. "" when there is none.
func NVSHMEMFound(l *probe.Library) string { return libraryFound("NVSHMEM", "NVSHMEM_HOME", l) }

func libraryFound(name, homeVar string, l *probe.Library) string {
	if l == nil {
		return ""
	}
	v := l.Version
	if v == "" {
		v = "(version unknown)"
	}
	return fmt.Sprintf("%s %s from %s: headers %s, libraries %s", name, v, sourceWords(l.Source, homeVar), l.Include, l.LibDir)
}

// usesLibraries names the C libraries found here that e's build or requirements ask for.
func usesLibraries(f *probe.Facts, m *course.Manifest) []string {
	var out []string
	want := func(name string) bool {
		return slices.Contains(m.Build.Libs, name) || slices.Contains(m.Requires.Libs, name)
	}
	if f == nil {
		return nil
	}
	if want("nccl") && f.NCCL != nil {
		out = append(out, libraryFound("NCCL", "NCCL_HOME", f.NCCL))
	}
	if want("nvshmem") && f.NVSHMEM != nil {
		out = append(out, NVSHMEMFound(f.NVSHMEM))
	}
	aware := m.Launch.CudaAwareMPI || slices.Contains(m.Requires.Libs, "cuda-aware-mpi")
	if want("mpi") || aware || m.Launch.Launcher == "mpirun" {
		if s := MPIFound(f, aware); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// sourceWords names where a library was found: "the pip wheel", "the system", "$HOME_VAR".
func sourceWords(source, homeVar string) string {
	switch source {
	case "pip":
		return "a pip wheel"
	case "system":
		return "the system's packages"
	case "env":
		return "$" + homeVar
	}
	return source
}

// nvshmemUnusable finds what keeps a found NVSHMEM from running the course's programs: a
// release older than the unique-id start-up, or a library folder without the bootstrap
// module that start-up loads.
func nvshmemUnusable(l *probe.Library) (Reason, bool) {
	found := NVSHMEMFound(l)
	if l.Version != "" && versionLess(l.Version, nvshmemMinimum) {
		return Reason{Need: NeedNVSHMEM,
			What: fmt.Sprintf("needs NVSHMEM %s or newer (the harness starts NVSHMEM with a unique id); found %s", nvshmemMinimum, found),
			Fix:  "install a newer NVSHMEM (pip install nvidia-nvshmem-cu13, or scripts/install-cuda-tools.sh), or set NVSHMEM_HOME to one"}, true
	}
	if l.LibDir != "" {
		if m, _ := filepath.Glob(filepath.Join(l.LibDir, nvshmemUIDPlugin+"*")); len(m) == 0 {
			if _, err := os.Stat(l.LibDir); err == nil {
				return Reason{Need: NeedNVSHMEM,
					What: fmt.Sprintf("needs NVSHMEM's unique-id bootstrap module %s* beside its host library; found %s, whose library folder has none", nvshmemUIDPlugin, found),
					Fix:  "install NVSHMEM with its bootstrap modules (the nvidia-nvshmem-cu13 wheel and the libnvshmem3 packages ship them), or set NVSHMEM_HOME to such an installation"}, true
			}
		}
	}
	return Reason{}, false
}

// versionLess compares dotted version numbers ("2.10.1" < "2.11"); parts that are not
// numbers compare as 0.
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(pa), len(pb)); i++ {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
