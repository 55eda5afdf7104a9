package probe

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/filelock"
)

// cacheVersion changes when the cache file's shape or the meaning of its facts changes.
const cacheVersion = 1

// cacheFile is <CacheDir>/facts.json.
type cacheFile struct {
	Version int    `json:"version"`
	Key     string `json:"key"`
	// Stamps are files and folders found while probing (the interpreter, its site-packages)
	// with their modification times: a pip install changes them.
	Stamps map[string]string `json:"stamps"`
	Facts  *Facts            `json:"facts"`
}

// cachePath is the cache file in dir, or in the user's cache folder; "" when there is none.
func cachePath(dir string) string {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(base, "mgpu-learn")
	}
	return filepath.Join(dir, "facts.json")
}

// stamp is a path's identity for the cache: modification time and size, or "-" when absent.
func stamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "-"
	}
	return fmt.Sprintf("%d:%d", st.ModTime().UnixNano(), st.Size())
}

// keyTools are the programs whose presence and identity the facts depend on.
var keyTools = []string{"nvidia-smi", "nvcc", "cc", "gcc", "clang", "mpicc", "mpirun", "mpiexec", "ompi_info",
	"mpichversion", "python3", "torchrun", "srun", "sbatch", "ldconfig"}

// cacheKey sums what the facts depend on that can be read without probing: the host, PATH,
// the behaviour-changing environment, where each tool resolves on PATH and the fixed places
// probed, with their modification times. Cheap: no program runs.
func (p *prober) cacheKey() string {
	h := sha256.New()
	host, _ := os.Hostname()
	put := func(k, v string) { fmt.Fprintf(h, "%s=%s\n", k, v) }
	put("version", fmt.Sprint(cacheVersion))
	put("host", host)
	put("PATH", os.Getenv("PATH"))
	put("tools", p.tools)
	put("root", p.opts.SystemRoot)
	put("skip-python", fmt.Sprint(p.opts.SkipPython))
	env := collectEnv()
	names := make([]string, 0, len(env))
	for k := range env {
		// Per-run variables (ranks, seeds, run folders) would defeat the cache.
		if strings.HasPrefix(k, "MGPU_") && !strings.HasPrefix(k, "MGPU_LEARN_") && k != "MGPU_CUDA_MPI_HOME" {
			continue
		}
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		put("env "+k, env[k])
	}
	for _, t := range keyTools {
		path, _ := exec.LookPath(t)
		put("tool "+t, path+" "+stamp(path))
	}
	for _, path := range p.keyFiles() {
		put("file "+path, stamp(path))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// keyFiles are the fixed places Discover looks at.
func (p *prober) keyFiles() []string {
	files := []string{
		p.sys("/usr/include/nccl.h"), p.sys("/usr/local/include/nccl.h"), p.sys("/usr/local/cuda/include/nccl.h"),
		p.sys("/usr/local/cuda/bin/nvcc"), p.sys("/usr/include/nvshmem.h"), p.sys("/tmp/ompi-cuda/bin/mpirun"),
		p.sys("/etc/os-release"),
	}
	for _, e := range []struct{ env, rel string }{
		{"CUDA_HOME", "bin/nvcc"}, {"CUDA_PATH", "bin/nvcc"}, {"NCCL_HOME", "include/nccl.h"},
		{"NVSHMEM_HOME", "include/nvshmem.h"}, {"MGPU_CUDA_MPI_HOME", "bin/mpirun"}, {"MGPU_LEARN_PYTHON", ""},
	} {
		if v := os.Getenv(e.env); v != "" {
			files = append(files, filepath.Join(v, e.rel))
		}
	}
	if p.tools != "" {
		n := filepath.Join(p.tools, "cuda", "nvidia")
		files = append(files, n, filepath.Join(n, "cu13", "bin", "nvcc"), filepath.Join(n, "nccl", "include", "nccl.h"),
			filepath.Join(n, "nvshmem", "include", "nvshmem.h"))
	}
	return files
}

// stamps are the paths found while probing whose change should invalidate the cache.
func (p *prober) stamps(f *Facts) map[string]string {
	s := map[string]string{}
	if py := f.Python; py != nil {
		for _, d := range append(append([]string{py.Path, py.Torchrun}, py.SiteDirs...), py.NvidiaDirs...) {
			if d != "" {
				s[d] = stamp(d)
			}
		}
	}
	return s
}

// loadCache returns the cached facts when the file is readable, of this version and key, no
// older than CacheTTL at now, and every stamp still holds; nil otherwise.
func loadCache(path, key string, now time.Time) *Facts {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var c cacheFile
	if err := json.Unmarshal(b, &c); err != nil || c.Version != cacheVersion || c.Key != key || c.Facts == nil {
		return nil
	}
	age := now.Sub(c.Facts.Taken)
	if age < -time.Minute || age >= CacheTTL {
		return nil
	}
	for p, s := range c.Stamps {
		if stamp(p) != s {
			return nil
		}
	}
	c.Facts.FromCache = true
	c.Facts.Env = collectEnv() // the environment is read live: per-run variables are not in the key
	return c.Facts
}

// saveCache writes the facts atomically. Facts from a probe that timed out are not kept: the
// next run should try again.
func saveCache(path, key string, stamps map[string]string, f *Facts) error {
	for _, pr := range f.Problems {
		if strings.Contains(pr, errTimeout.Error()) {
			return nil
		}
	}
	b, err := json.MarshalIndent(cacheFile{Version: cacheVersion, Key: key, Stamps: stamps, Facts: f}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "facts-*.json")
	if err != nil {
		return err
	}
	if _, err := io.Copy(tmp, strings.NewReader(string(b))); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// lockProbe takes an exclusive lock on path, waiting at most wait (or until ctx ends), and
// returns its release. A lock that cannot be taken in time, or at all (a read-only cache
// folder), is not an error: the probe then runs unlocked, as it would without a cache.
func lockProbe(ctx context.Context, path string, wait time.Duration) func() {
	unlock, ok, err := filelock.Lock(ctx, path, wait)
	if err != nil || !ok {
		return func() {}
	}
	return unlock
}
