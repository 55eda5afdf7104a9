package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SharedObject compiles one C source into a shared object with the toolchain's C compiler,
// through the same content-addressed cache as programs: the key is the compiler's identity,
// the options and the source's bytes. The course uses it for plugins a library loads by path
// (csrc/mgpu_ncclwatch.c, NCCL's profiler plugin). name is how logs and errors call the
// source. A compile error is returned with the compiler's output.
func (b *Builder) SharedObject(ctx context.Context, tc *Toolchain, name string, src []byte) (string, error) {
	if tc == nil || tc.CC == "" {
		return "", errors.New("build: no C compiler in the toolchain for " + name)
	}
	args := []string{"-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,-z,relro,-z,now"}
	h := newHasher("shared object")
	h.add("tool", tc.CC, tc.Version)
	h.add("args", args...)
	h.add("source", string(src), filepath.Base(name))
	k := h.sum()
	if path, _, ok := b.cache.get(k, ".so"); ok {
		return path, nil
	}
	if err := os.MkdirAll(b.cache.dir, 0o755); err != nil {
		return "", fmt.Errorf("build: cache: %w", err)
	}
	work, err := b.cache.workDir()
	if err != nil {
		return "", fmt.Errorf("build: cache: %w", err)
	}
	defer os.RemoveAll(work)
	in := filepath.Join(work, filepath.Base(name))
	if err := os.WriteFile(in, src, 0o644); err != nil {
		return "", fmt.Errorf("build: %w", err)
	}
	out := filepath.Join(work, strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))+".so")
	output, failed, err := run(ctx, tc.CC, append(append([]string{}, args...), "-o", out, in))
	if err != nil {
		return "", fmt.Errorf("build: compiling %s: %w", name, err)
	}
	if failed {
		return "", fmt.Errorf("build: %s does not compile:\n%s", name, strings.ReplaceAll(output, in, name))
	}
	path, err := b.cache.put(k, ".so", out, output)
	if err != nil {
		return "", fmt.Errorf("build: cache: %w", err)
	}
	return path, nil
}
