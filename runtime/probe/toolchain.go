package probe

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/runtime/build"
)

// Toolchain maps the facts to what runtime/build needs: the compilers, the GPU architecture
// (Arch) and, per library name ("nccl", "mpi", "nvshmem", "cuda"), include folders, library
// folders, link arguments and the folders to put on LD_LIBRARY_PATH when running. (The pip
// wheel layout of nvcc, which needs include/cccl and lib named, is runtime/build's to handle;
// Facts.NVCC.Include and LibDirs say where they are.) LinkArgs hold
// only -l forms and archive paths, which nvcc and cc both accept; folders that compilers and the
// loader search anyway are left out. cudaAwareMPI selects CudaMPI for "mpi"; when there is none,
// the MPI on PATH builds instead (a program compiles the same against either; CUDA-awareness
// matters only when it runs, and the checker refuses to run a cuda_aware_mpi exercise without
// a CUDA-aware MPI). Libraries not found have no entry.
func (f *Facts) Toolchain(cudaAwareMPI bool) *build.Toolchain {
	tc := &build.Toolchain{Arch: f.Arch(), Libs: map[string]build.Lib{}}
	var version []string
	if f.NVCC != nil {
		tc.NVCC = f.NVCC.Path
		version = append(version, "nvcc "+f.NVCC.Version+" "+f.NVCC.Path)
	}
	if f.CC != nil {
		tc.CC = f.CC.Path
		version = append(version, "cc "+f.CC.Version+" "+f.CC.Path)
	}
	tc.Version = strings.Join(version, "; ")
	tc.Libs["cuda"] = f.driverLib()
	if f.NCCL != nil {
		tc.Libs["nccl"] = libraryLib(f.NCCL)
	}
	if f.NVSHMEM != nil {
		tc.Libs["nvshmem"] = libraryLib(f.NVSHMEM)
	}
	m := f.MPI
	if cudaAwareMPI && f.CudaMPI != nil {
		m = f.CudaMPI
	}
	if m != nil {
		tc.Libs["mpi"] = mpiLib(m)
	}
	return tc
}

// libraryLib is a found C library as a build.Lib. Libraries outside the loader's search (pip
// wheels, NCCL_HOME) get their folder in RuntimeDirs.
func libraryLib(l *Library) build.Lib {
	b := build.Lib{LinkArgs: append([]string(nil), l.LinkArgs...), Version: l.Version}
	if l.Include != "" && !systemDirs[l.Include] {
		b.Include = []string{l.Include}
	}
	if l.LibDir != "" && !systemDirs[l.LibDir] {
		b.LibDirs = []string{l.LibDir}
		if l.Source != "system" {
			b.RuntimeDirs = []string{l.LibDir}
		}
	}
	return b
}

// mpiLib turns the wrapper compiler's flags into a build.Lib: -L folders become LibDirs, rpath
// folders RuntimeDirs, -pthread -lpthread; other -Wl options are dropped (nvcc rejects them).
func mpiLib(m *MPI) build.Lib {
	var b build.Lib
	for _, dir := range m.Include {
		if !systemDirs[dir] {
			b.Include = append(b.Include, dir)
		}
	}
	args := m.LinkArgs
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "-L"):
			if dir := a[2:]; dir != "" && !systemDirs[dir] {
				b.LibDirs = append(b.LibDirs, dir)
			}
		case strings.HasPrefix(a, "-l"):
			b.LinkArgs = append(b.LinkArgs, a)
		case a == "-pthread":
			b.LinkArgs = append(b.LinkArgs, "-lpthread")
		case strings.HasPrefix(a, "-Wl,"):
			parts := strings.Split(a[len("-Wl,"):], ",")
			// "-Wl,-rpath,DIR" or "-Wl,-rpath -Wl,DIR" (Open MPI writes the latter).
			if parts[0] == "-rpath" || parts[0] == "-R" {
				if len(parts) > 1 {
					b.RuntimeDirs = append(b.RuntimeDirs, parts[1])
				} else if i+1 < len(args) && strings.HasPrefix(args[i+1], "-Wl,") {
					b.RuntimeDirs = append(b.RuntimeDirs, args[i+1][len("-Wl,"):])
					i++
				}
			} else if rp, ok := strings.CutPrefix(parts[0], "-rpath="); ok {
				b.RuntimeDirs = append(b.RuntimeDirs, rp)
			}
		}
	}
	if m.Home != "" && !systemDirs[filepath.Join(m.Home, "lib")] && m.Home != "/usr" && m.Home != "/usr/local" {
		if dir := filepath.Join(m.Home, "lib"); exists(dir) && !contains(b.RuntimeDirs, dir) {
			b.RuntimeDirs = append(b.RuntimeDirs, dir)
		}
	}
	return b
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// driverLib is the CUDA driver API library. A toolkit's stubs folder serves for linking; pip
// wheels ship no stub, so a machine without a driver cannot link -lcuda (left to the system).
func (f *Facts) driverLib() build.Lib {
	if f.NVCC != nil {
		top := cudaTop(f.NVCC.Path)
		for _, d := range []string{"lib64/stubs", "lib/stubs", "targets/x86_64-linux/lib/stubs", "targets/sbsa-linux/lib/stubs"} {
			if dir := filepath.Join(top, d); exists(filepath.Join(dir, "libcuda.so")) {
				return build.Lib{LibDirs: []string{dir}, LinkArgs: []string{"-lcuda"}}
			}
		}
	}
	return build.Lib{LinkArgs: []string{"-lcuda"}}
}

// DefaultArch is the GPU architecture built for when no GPU is visible (the course's machines
// are Hopper).
const DefaultArch = "sm_90"

// Arch is the nvcc -arch for this machine: $MGPU_LEARN_ARCH when set, else "sm_" and GPU 0's
// compute capability without the dot, else DefaultArch.
func (f *Facts) Arch() string {
	if a := strings.TrimSpace(os.Getenv("MGPU_LEARN_ARCH")); a != "" {
		return a
	}
	if f != nil && len(f.GPUs) > 0 {
		if cc := strings.ReplaceAll(f.GPUs[0].Compute, ".", ""); cc != "" {
			return "sm_" + cc
		}
	}
	return DefaultArch
}
