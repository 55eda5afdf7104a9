package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// nvccCandidate is a place nvcc may be.
type nvccCandidate struct{ path, source string }

// nvcc finds the CUDA compiler: PATH, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, then
// pip wheels (the repo's .tools, or the interpreter's nvidia folders when pip is non-nil).
func (p *prober) nvcc(ctx context.Context, pip []string) *Tool {
	var cands []nvccCandidate
	if pip == nil {
		if path, err := exec.LookPath("nvcc"); err == nil {
			cands = append(cands, nvccCandidate{path, "path"})
		}
		for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
			if home := os.Getenv(env); home != "" {
				cands = append(cands, nvccCandidate{filepath.Join(home, "bin", "nvcc"), "cuda_home"})
			}
		}
		cands = append(cands, nvccCandidate{p.sys("/usr/local/cuda/bin/nvcc"), "system"})
	}
	for _, root := range p.pipRoots(pip) {
		cands = append(cands,
			nvccCandidate{filepath.Join(root, "cu13", "bin", "nvcc"), "pip"},
			nvccCandidate{filepath.Join(root, "cuda_nvcc", "bin", "nvcc"), "pip"})
	}
	for _, c := range cands {
		if !isExec(c.path) {
			continue
		}
		t := &Tool{Path: c.path, Source: c.source}
		if out, ok := p.exec(ctx, c.path, "--version"); ok {
			t.Version = parseNVCCVersion(out)
		}
		// A wheel has no targets/<arch> folder, so nvcc.profile's include and library paths
		// point nowhere: name the wheel's own folders.
		top := cudaTop(t.Path)
		if !exists(filepath.Join(top, "targets")) && exists(filepath.Join(top, "include", "cccl")) {
			t.Include = []string{filepath.Join(top, "include", "cccl")}
			t.LibDirs = []string{filepath.Join(top, "lib")}
		}
		return t
	}
	return nil
}

var (
	nvccVersionRE = regexp.MustCompile(`release ([0-9.]+), V([0-9.]+)`)
	nvccReleaseRE = regexp.MustCompile(`release ([0-9.]+)`)
)

// parseNVCCVersion reads "Cuda compilation tools, release 13.0, V13.0.88" as "13.0.88".
func parseNVCCVersion(out string) string {
	if m := nvccVersionRE.FindStringSubmatch(out); m != nil {
		return m[2]
	}
	if m := nvccReleaseRE.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return ""
}

// cc finds the host C compiler: cc, else gcc, else clang.
func (p *prober) cc(ctx context.Context) *Tool {
	for _, name := range []string{"cc", "gcc", "clang"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		t := &Tool{Path: path, Source: "path"}
		if out, ok := p.exec(ctx, path, "--version"); ok {
			t.Version = firstLine(out)
		}
		return t
	}
	return nil
}

// cudaTop is the toolkit folder of an nvcc path (the parent of its bin).
func cudaTop(nvcc string) string {
	if real, err := filepath.EvalSymlinks(nvcc); err == nil {
		nvcc = real
	}
	return filepath.Dir(filepath.Dir(nvcc))
}
