package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// mpis finds the MPI on PATH and a CUDA-aware one: the PATH one when it is aware (a cluster's
// environment module puts its MPI there), else $MGPU_CUDA_MPI_HOME, else $MPI_HOME, else
// /tmp/ompi-cuda (where the course's GPU machines unpack one).
func (p *prober) mpis(ctx context.Context) (mpi, cuda *MPI) {
	mpicc, _ := exec.LookPath("mpicc")
	mpirun, _ := exec.LookPath("mpirun")
	if mpirun == "" {
		mpirun, _ = exec.LookPath("mpiexec")
	}
	if mpicc != "" || mpirun != "" {
		info := ""
		if mpirun != "" {
			info = sibling(mpirun, "ompi_info")
		}
		if info == "" {
			info, _ = exec.LookPath("ompi_info")
		}
		mpi = p.mpiAt(ctx, mpicc, mpirun, info, nil)
		if mpi.CudaAware {
			return mpi, mpi
		}
	}
	type candidate struct{ home, from string } // from: the variable that named it, or ""
	var homes []candidate
	if h := os.Getenv("MGPU_CUDA_MPI_HOME"); h != "" {
		homes = append(homes, candidate{h, "MGPU_CUDA_MPI_HOME"})
	}
	if h := os.Getenv("MPI_HOME"); h != "" {
		homes = append(homes, candidate{h, "MPI_HOME"})
	}
	homes = append(homes, candidate{p.sys("/tmp/ompi-cuda"), ""})
	seen := map[string]bool{}
	if mpi != nil && mpi.Mpirun != "" {
		seen[realPath(mpi.Mpirun)] = true
	}
	for _, c := range homes {
		home := c.home
		bin := filepath.Join(home, "bin")
		run := filepath.Join(bin, "mpirun")
		if !isExec(run) {
			if c.from == "MGPU_CUDA_MPI_HOME" {
				p.problem("MGPU_CUDA_MPI_HOME=%s has no bin/mpirun", home)
			}
			continue
		}
		if seen[realPath(run)] {
			continue // the MPI on PATH, already found not to be CUDA-aware
		}
		seen[realPath(run)] = true
		cc := filepath.Join(bin, "mpicc")
		if !isExec(cc) {
			cc = ""
		}
		info := filepath.Join(bin, "ompi_info")
		if !isExec(info) {
			info = ""
		}
		env := []string{"OPAL_PREFIX=" + home, "LD_LIBRARY_PATH=" + joinPath(filepath.Join(home, "lib"), os.Getenv("LD_LIBRARY_PATH"))}
		m := p.mpiAt(ctx, cc, run, info, env)
		m.Home = home
		if m.CudaAware {
			return mpi, m
		}
		if c.from != "" {
			p.problem("%s=%s: %s %s is not CUDA-aware", c.from, home, m.Vendor, m.Version)
		} else {
			p.problem("%s: %s %s is not CUDA-aware", home, m.Vendor, m.Version)
		}
	}
	return mpi, nil
}

// realPath is path with its symbolic links resolved, or path itself.
func realPath(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}

// sibling is the program name in the folder of path, when it is there.
func sibling(path, name string) string {
	c := filepath.Join(filepath.Dir(path), name)
	if isExec(c) {
		return c
	}
	return ""
}

func joinPath(a, b string) string {
	if b == "" {
		return a
	}
	return a + string(os.PathListSeparator) + b
}

var (
	ompiVersionRE  = regexp.MustCompile(`Open MPI\)?\s+v?([0-9][0-9a-z.]*)`)
	hydraVersionRE = regexp.MustCompile(`(?m)^\s*Version:\s*(\S+)`)
	intelVersionRE = regexp.MustCompile(`Intel\(R\) MPI Library.*Version\s+(\S+)`)
	mpichVersionRE = regexp.MustCompile(`(?m)^MPICH Version:\s*(\S+)`)
	cudaAwareRE    = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+MPIX_CUDA_AWARE_SUPPORT[ \t]+(\d+)`)
)

// identify reads `mpirun --version` (or `mpicc --showme:version`): vendor, version, dialect.
func identify(out string) (vendor, version, dialect string) {
	switch {
	case strings.Contains(out, "Open MPI") || strings.Contains(out, "OpenRTE"):
		vendor, dialect = "Open MPI", "openmpi"
		if m := ompiVersionRE.FindStringSubmatch(out); m != nil {
			version = m[1]
		}
	case strings.Contains(out, "Intel(R) MPI"):
		vendor, dialect = "Intel MPI", "mpich"
		if m := intelVersionRE.FindStringSubmatch(out); m != nil {
			version = m[1]
		}
	case strings.Contains(out, "HYDRA") || strings.Contains(out, "MPICH"):
		vendor, dialect = "MPICH", "mpich"
		if m := hydraVersionRE.FindStringSubmatch(out); m != nil {
			version = m[1]
		}
	}
	return vendor, version, dialect
}

// mpiAt probes one MPI installation. Any of the paths may be "".
func (p *prober) mpiAt(ctx context.Context, mpicc, mpirun, ompiInfo string, env []string) *MPI {
	m := &MPI{Mpicc: mpicc, Mpirun: mpirun}
	execEnv := func(path string, args ...string) (string, bool) {
		return p.execWith(ctx, command{path: path, args: args, timeout: p.opts.Timeout, env: env})
	}
	if mpirun != "" {
		if out, ok := execEnv(mpirun, "--version"); ok {
			m.Vendor, m.Version, m.Dialect = identify(out)
		}
		home := mpirun
		if real, err := filepath.EvalSymlinks(mpirun); err == nil {
			home = real
		}
		m.Home = filepath.Dir(filepath.Dir(home))
	}
	if m.Dialect == "" && mpicc != "" {
		// Open MPI's wrapper answers --showme:version; MPICH's does not.
		if out, _, err := run(ctx, command{path: mpicc, args: []string{"--showme:version"}, timeout: p.opts.Timeout, env: env}); err == nil {
			m.Vendor, m.Version, m.Dialect = identify(out)
		} else {
			m.Dialect = "mpich"
			if m.Vendor == "" {
				m.Vendor = "MPICH"
			}
		}
	}
	var wg sync.WaitGroup
	do := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	switch m.Dialect {
	case "openmpi":
		if mpicc != "" {
			do(func() {
				if out, ok := execEnv(mpicc, "--showme:compile"); ok {
					m.Include = includeArgs(strings.Fields(out))
				}
			})
			do(func() {
				if out, ok := execEnv(mpicc, "--showme:link"); ok {
					m.LinkArgs = strings.Fields(out)
				}
			})
		}
		if ompiInfo != "" {
			do(func() {
				if out, ok := execEnv(ompiInfo, "--parsable", "--all"); ok {
					m.CudaBuilt, m.CudaRuntime = ompiCuda(out)
				}
			})
		}
	case "mpich":
		if mpicc != "" {
			do(func() {
				if out, ok := execEnv(mpicc, "-show"); ok {
					words := strings.Fields(out)
					if len(words) > 0 {
						words = words[1:] // the underlying compiler
					}
					m.Include = includeArgs(words)
					m.LinkArgs = linkArgs(words)
				}
			})
		}
		if v := siblingOrPath(mpicc, "mpichversion"); v != "" {
			do(func() {
				if out, ok := execEnv(v); ok {
					if mm := mpichVersionRE.FindStringSubmatch(out); mm != nil && m.Version == "" {
						m.Version = mm[1]
					}
					m.CudaBuilt = mpichCuda(out)
				}
			})
		}
	}
	wg.Wait()
	m.CudaHeader = mpiExtCuda(m.Include)
	switch {
	case m.CudaRuntime == "false":
		// Built with CUDA but switched off (mpi_cuda_support=0, e.g. through
		// OMPI_MCA_mpi_cuda_support): a device pointer would reach the host code paths.
	case m.CudaBuilt == "true":
		m.CudaAware = true
	case m.CudaBuilt == "" && m.CudaHeader == "1":
		m.CudaAware = true
	}
	return m
}

// siblingOrPath finds name next to path, else on PATH.
func siblingOrPath(path, name string) string {
	if path != "" {
		if s := sibling(path, name); s != "" {
			return s
		}
	}
	s, _ := exec.LookPath(name)
	return s
}

// includeArgs are the folders of the -I arguments among words.
func includeArgs(words []string) []string {
	var inc []string
	for i, w := range words {
		switch {
		case w == "-I" || w == "-isystem":
			if i+1 < len(words) {
				inc = append(inc, words[i+1])
			}
		case strings.HasPrefix(w, "-I"):
			inc = append(inc, w[2:])
		}
	}
	return inc
}

// linkArgs are the words among a wrapper's command line that matter to the linker.
func linkArgs(words []string) []string {
	var out []string
	for i, w := range words {
		switch {
		case w == "-L" || w == "-l":
			if i+1 < len(words) {
				out = append(out, w+words[i+1])
			}
		case strings.HasPrefix(w, "-L"), strings.HasPrefix(w, "-l"), strings.HasPrefix(w, "-Wl,"),
			w == "-pthread", w == "-Xlinker":
			out = append(out, w)
		}
	}
	return out
}

// ompiCuda reads ompi_info --parsable --all: mpi_built_with_cuda_support and mpi_cuda_support
// (Open MPI 4; opal_* in 5).
func ompiCuda(out string) (built, runtime string) {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		for _, name := range []string{"mpi_built_with_cuda_support", "opal_built_with_cuda_support"} {
			if v, ok := strings.CutPrefix(l, "mca:mpi:base:param:"+name+":value:"); ok && built == "" {
				built = v
			}
			if v, ok := strings.CutPrefix(l, "mca:opal:base:param:"+name+":value:"); ok && built == "" {
				built = v
			}
		}
		for _, name := range []string{"mpi_cuda_support", "opal_cuda_support"} {
			if v, ok := strings.CutPrefix(l, "mca:mpi:base:param:"+name+":value:"); ok && runtime == "" {
				runtime = v
			}
			if v, ok := strings.CutPrefix(l, "mca:opal:base:param:"+name+":value:"); ok && runtime == "" {
				runtime = v
			}
		}
	}
	return built, runtime
}

// mpichCuda reads mpichversion's configure line: "--with-cuda..." means built with CUDA.
func mpichCuda(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "configure") {
			continue
		}
		switch {
		case strings.Contains(l, "--without-cuda"), strings.Contains(l, "--with-cuda=no"):
			return "false"
		case strings.Contains(l, "--with-cuda"):
			return "true"
		}
		return "false"
	}
	return ""
}

// mpiExtCuda reads MPIX_CUDA_AWARE_SUPPORT from mpi-ext.h and the extension headers it pulls in
// (Open MPI puts the define in mpiext/mpiext_cuda_c.h), in the include folders given.
func mpiExtCuda(include []string) string {
	for _, dir := range include {
		if !exists(filepath.Join(dir, "mpi-ext.h")) {
			continue
		}
		files := []string{filepath.Join(dir, "mpi-ext.h")}
		for _, sub := range []string{"mpiext", "openmpi/mpiext"} {
			m, _ := filepath.Glob(filepath.Join(dir, sub, "mpiext_*_c.h"))
			files = append(files, m...)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			if m := cudaAwareRE.FindSubmatch(b); m != nil {
				return string(m[1])
			}
		}
	}
	return ""
}
