package probe

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options tune Discover. The zero value probes with the default timeouts and uses the cache.
type Options struct {
	// Refresh probes again even when the cache holds fresh facts (the result is cached anew).
	Refresh bool
	// NoCache neither reads nor writes the cache file.
	NoCache bool
	// CacheDir holds facts.json; default os.UserCacheDir()/mgpu-learn.
	CacheDir string
	// SkipPython leaves out the Python/torch probe (the slowest one: importing torch).
	SkipPython bool
	// Timeout bounds each external command (default 5s); PythonTimeout the Python/torch
	// probe (default 20s).
	Timeout       time.Duration
	PythonTimeout time.Duration
	// ToolsDir is the repository's .tools folder, whose cuda/nvidia holds pip wheels of nvcc,
	// NCCL and NVSHMEM (scripts/install-cuda-tools.sh). Default: $MGPU_LEARN_TOOLS, else the first
	// .tools/cuda/nvidia found walking up from the working directory.
	ToolsDir string
	// SystemRoot is prefixed to the fixed system locations probed (/usr/include, /usr/lib...,
	// /usr/local/cuda, /tmp/ompi-cuda, /etc/os-release); "" means "/". When it is set the
	// ldconfig cache is not consulted. Tests point it at a fake tree.
	SystemRoot string
}

// Defaults for Options.
const (
	DefaultTimeout       = 5 * time.Second
	DefaultPythonTimeout = 20 * time.Second
	// CacheTTL is how long cached facts are trusted when nothing they depend on changed.
	CacheTTL = 24 * time.Hour
)

// Discover probes this machine, or returns the cached facts when they are younger than
// CacheTTL and nothing they depend on has changed (see docs/doctor.md). Missing tools are
// nil fields; probes that fail or time out are listed in Facts.Problems. The only error is
// ctx's, when it is cancelled.
func Discover(ctx context.Context, opts Options) (*Facts, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.PythonTimeout <= 0 {
		opts.PythonTimeout = DefaultPythonTimeout
	}
	p := newProber(opts)
	cache, key := "", ""
	if !opts.NoCache {
		cache = cachePath(opts.CacheDir)
		key = p.cacheKey()
	}
	if cache != "" && !opts.Refresh {
		if f := loadCache(cache, key, time.Now()); f != nil {
			return f, nil
		}
	}
	if cache != "" {
		// One probe at a time per cache: a course author's parallel builds, or a workshop's
		// learners on one node, start many processes at once, and each would otherwise spawn
		// its own `import torch` (60 of them took past the Python probe's limit on 16 cores).
		// The ones that waited read what the first one found.
		unlock := lockProbe(ctx, cache+".lock", 2*opts.PythonTimeout+2*opts.Timeout)
		defer unlock()
		if !opts.Refresh {
			if f := loadCache(cache, key, time.Now()); f != nil {
				return f, nil
			}
		}
	}
	f := p.probe(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if cache != "" {
		// A cache that cannot be written only costs the next run some time.
		_ = saveCache(cache, key, p.stamps(f), f)
	}
	return f, nil
}

// prober holds one discovery's settings and its findings in progress.
type prober struct {
	opts  Options
	tools string // the repo-local .tools folder ("" when none)

	mu       sync.Mutex
	problems []string

	ldOnce sync.Once
	ldLibs map[string]string // library file name -> path, from ldconfig -p
}

func newProber(opts Options) *prober {
	tools := opts.ToolsDir
	if tools == "" {
		tools = toolsDir()
	}
	return &prober{opts: opts, tools: tools}
}

// sys maps a fixed system location under Options.SystemRoot.
func (p *prober) sys(path string) string {
	if p.opts.SystemRoot == "" {
		return path
	}
	return filepath.Join(p.opts.SystemRoot, path)
}

// problem records a failed probe.
func (p *prober) problem(format string, args ...any) {
	p.mu.Lock()
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// exec runs one probe command with the default timeout; a failure is recorded as a problem
// and reported as ok=false.
func (p *prober) exec(ctx context.Context, path string, args ...string) (string, bool) {
	return p.execWith(ctx, command{path: path, args: args, timeout: p.opts.Timeout})
}

func (p *prober) execWith(ctx context.Context, c command) (string, bool) {
	out, _, err := run(ctx, c)
	if err != nil {
		if ctx.Err() == nil {
			p.problem("%s: %v", describe(c), err)
		}
		return out, false
	}
	return out, true
}

// probe runs every probe, concurrently, and assembles the facts.
func (p *prober) probe(ctx context.Context) *Facts {
	f := &Facts{Taken: time.Now().UTC(), Env: collectEnv()}
	f.Hostname, _ = os.Hostname()
	var wg sync.WaitGroup
	do := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	do(func() { f.OS, f.Kernel = p.osName(), p.kernel(ctx) })
	do(func() { p.gpus(ctx, f) })
	do(func() { f.NVCC = p.nvcc(ctx, nil) })
	do(func() { f.CC = p.cc(ctx) })
	do(func() { f.NCCL = p.nccl(ctx, nil) })
	do(func() { f.NVSHMEM = p.nvshmem(nil) })
	do(func() { f.MPI, f.CudaMPI = p.mpis(ctx) })
	if !p.opts.SkipPython {
		do(func() { f.Python = p.python(ctx) })
	}
	do(func() { f.Slurm, f.Sbatch = p.slurm(ctx) })
	wg.Wait()

	// Pip wheels in the interpreter's site-packages come last: they are found only through it.
	if py := f.Python; py != nil && len(py.NvidiaDirs) > 0 {
		if f.NVCC == nil {
			f.NVCC = p.nvcc(ctx, py.NvidiaDirs)
		}
		if f.NCCL == nil {
			f.NCCL = p.nccl(ctx, py.NvidiaDirs)
		}
		if f.NVSHMEM == nil {
			f.NVSHMEM = p.nvshmem(py.NvidiaDirs)
		}
	}
	p.mu.Lock()
	f.Problems = append([]string(nil), p.problems...)
	p.mu.Unlock()
	sort.Strings(f.Problems)
	return f
}

// osName reads PRETTY_NAME from os-release.
func (p *prober) osName() string {
	for _, path := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(p.sys(path))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				return strings.Trim(strings.TrimSpace(v), `"'`)
			}
		}
	}
	return runtime.GOOS
}

// kernel is the running kernel's release.
func (p *prober) kernel(ctx context.Context) string {
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		return strings.TrimSpace(string(b))
	}
	if uname, err := exec.LookPath("uname"); err == nil {
		if out, ok := p.exec(ctx, uname, "-r"); ok {
			return strings.TrimSpace(out)
		}
	}
	return ""
}

// isExec reports whether path is an executable regular file.
func isExec(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// toolsDir is the repo-local .tools folder: $MGPU_LEARN_TOOLS when set, else the first
// .tools/cuda/nvidia found walking up from the working directory.
func toolsDir() string {
	if v, ok := os.LookupEnv("MGPU_LEARN_TOOLS"); ok {
		return v
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if exists(filepath.Join(dir, ".tools", "cuda", "nvidia")) {
			return filepath.Join(dir, ".tools")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// pipRoots are the folders holding pip's nvidia/* wheels to look in: the repo's .tools when
// extra is nil (the first pass), else extra (the interpreter's nvidia folders, looked at last).
func (p *prober) pipRoots(extra []string) []string {
	if extra != nil {
		return extra
	}
	if p.tools == "" {
		return nil
	}
	return []string{filepath.Join(p.tools, "cuda", "nvidia")}
}
