package build

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func needCC(t testing.TB) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc on PATH")
	}
	return cc
}

// project lays out a small exercise: a learner file in a workspace, a course driver, and a
// harness directory with a header both include.
type project struct {
	root, ws, course, harness string
}

func newProject(t testing.TB) *project {
	root := t.TempDir()
	p := &project{root: root, ws: filepath.Join(root, "ws", "mod0", "sum"),
		course: filepath.Join(root, "course", "sum"), harness: filepath.Join(root, "csrc")}
	write(t, filepath.Join(p.harness, "harness.h"), "#define HARNESS_SCALE 2\nint harness_twice(int);\n")
	write(t, filepath.Join(p.harness, "harness.c"), "#include \"harness.h\"\nint harness_twice(int x) { return HARNESS_SCALE * x; }\n")
	write(t, filepath.Join(p.ws, "sum.c"), "#include \"harness.h\"\nint learner_sum(int a, int b) { return a + b; }\n")
	write(t, filepath.Join(p.course, "driver.c"), `#include <stdio.h>
#include "harness.h"
int learner_sum(int, int);
int main(void) { printf("%d\n", harness_twice(learner_sum(20, 1))); return 0; }
`)
	return p
}

func (p *project) request(tc *Toolchain) Request {
	return Request{
		Kind: "c",
		Sources: []Source{
			{Path: filepath.Join(p.ws, "sum.c"), Role: RoleLearner, Show: "mod0/sum/sum.c"},
			{Path: filepath.Join(p.course, "driver.c"), Role: RoleDriver, Show: "driver.c"},
			{Path: filepath.Join(p.harness, "harness.c"), Role: RoleHarness, Show: "csrc/harness.c"},
		},
		Headers:   []string{p.harness, p.course},
		Toolchain: tc,
	}
}

func build(t testing.TB, b *Builder, req Request) *Result {
	t.Helper()
	res, err := b.Build(context.Background(), req)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return res
}

func runBinary(t *testing.T, res *Result) string {
	t.Helper()
	if !res.OK {
		t.Fatalf("build failed:\n%s", res.Log)
	}
	out, err := exec.Command(res.Binary).CombinedOutput()
	if err != nil {
		t.Fatalf("running %s: %v\n%s", res.Binary, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestCBuildRunsAndCaches(t *testing.T) {
	cc := needCC(t)
	p := newProject(t)
	b := NewBuilder(t.TempDir())
	tc := &Toolchain{CC: cc}
	res := build(t, b, p.request(tc))
	if got := runBinary(t, res); got != "42" {
		t.Fatalf("program printed %q, want 42", got)
	}
	if res.Cached || res.Compiled != 3 {
		t.Errorf("first build: Cached=%v Compiled=%d", res.Cached, res.Compiled)
	}
	obj := res.Objects["mod0/sum/sum.c"]
	if len(res.Objects) != 1 || obj == "" {
		t.Fatalf("Objects = %v, want the learner's object only", res.Objects)
	}
	if nm, err := exec.LookPath("nm"); err == nil {
		out, _ := exec.Command(nm, obj).CombinedOutput()
		if !strings.Contains(string(out), "learner_sum") {
			t.Errorf("nm of learner object lacks learner_sum:\n%s", out)
		}
	}

	again := build(t, b, p.request(tc))
	if !again.Cached || again.Compiled != 0 || again.Binary != res.Binary || !again.OK {
		t.Errorf("second build: Cached=%v Compiled=%d binary %s vs %s", again.Cached, again.Compiled, again.Binary, res.Binary)
	}

	// Editing the learner's file recompiles that file only.
	write(t, filepath.Join(p.ws, "sum.c"), "#include \"harness.h\"\nint learner_sum(int a, int b) { return a + b + 1; }\n")
	edited := build(t, b, p.request(tc))
	if edited.Compiled != 1 || edited.Cached {
		t.Errorf("after editing the learner file: Compiled=%d Cached=%v", edited.Compiled, edited.Cached)
	}
	if got := runBinary(t, edited); got != "44" {
		t.Errorf("edited program printed %q, want 44", got)
	}

	// A header in Headers changes every object's key.
	write(t, filepath.Join(p.harness, "harness.h"), "#define HARNESS_SCALE 3\nint harness_twice(int);\n")
	hdr := build(t, b, p.request(tc))
	if hdr.Compiled != 3 {
		t.Errorf("after editing a header: Compiled=%d, want 3", hdr.Compiled)
	}
	if got := runBinary(t, hdr); got != "66" {
		t.Errorf("program printed %q after header change, want 66", got)
	}

	// Rebuild ignores the cache.
	req := p.request(tc)
	req.Rebuild = true
	if rb := build(t, b, req); rb.Compiled != 3 || rb.Cached {
		t.Errorf("Rebuild: Compiled=%d Cached=%v", rb.Compiled, rb.Cached)
	}
}

// fakeCompiler writes a shell script that records each invocation and produces an output
// file, so tests can count what the builder runs.
func fakeCompiler(t *testing.T, dir string) (bin, log string) {
	t.Helper()
	bin = filepath.Join(dir, "bin", "fakecc")
	log = filepath.Join(dir, "invocations")
	write(t, bin, fmt.Sprintf(`#!/bin/sh
echo "$*" >> %q
out=""; prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out="$a"; fi
  prev="$a"
done
printf '#!/bin/sh\necho fake\n' > "$out"
chmod +x "$out"
`, log))
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, log
}

func invocations(t *testing.T, log string) []string {
	data, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

func TestCacheHitRunsNoCompiler(t *testing.T) {
	dir := t.TempDir()
	cc, log := fakeCompiler(t, dir)
	p := newProject(t)
	b := NewBuilder(filepath.Join(dir, "cache"))
	tc := &Toolchain{CC: cc, Version: "fake 1.0"}
	first := build(t, b, p.request(tc))
	// Three compiles, the learner's source preprocessed once more (cc keeps no passes), a link.
	if !first.OK || len(invocations(t, log)) != 5 {
		t.Fatalf("first build: OK=%v invocations %q", first.OK, invocations(t, log))
	}
	second := build(t, b, p.request(tc))
	if n := len(invocations(t, log)); n != 5 || !second.Cached {
		t.Errorf("cache hit ran the compiler: %d invocations, Cached=%v", n, second.Cached)
	}

	// The same files in another place hit the same entries.
	other := newProject(t)
	if third := build(t, b, other.request(tc)); !third.Cached || len(invocations(t, log)) != 5 {
		t.Errorf("same content elsewhere missed: Cached=%v invocations %d", third.Cached, len(invocations(t, log)))
	}

	// Another compiler version, or another flag, misses.
	tc2 := &Toolchain{CC: cc, Version: "fake 2.0"}
	if r := build(t, b, p.request(tc2)); r.Cached || r.Compiled != 3 {
		t.Errorf("new compiler version: Cached=%v Compiled=%d", r.Cached, r.Compiled)
	}
	req := p.request(tc)
	req.Flags = []string{"-g"}
	if r := build(t, b, req); r.Cached || r.Compiled != 3 {
		t.Errorf("new flag: Cached=%v Compiled=%d", r.Cached, r.Compiled)
	}
	// A header the learner's directory holds is part of the learner object's key only.
	write(t, filepath.Join(p.ws, "local.h"), "#define X 1\n")
	if r := build(t, b, p.request(tc)); r.Compiled != 1 {
		t.Errorf("new header next to the learner file: Compiled=%d, want 1", r.Compiled)
	}
	// A .c file in an include directory that is not one of the sources may be #included.
	write(t, filepath.Join(p.harness, "extra.c"), "int extra;\n")
	if r := build(t, b, p.request(tc)); r.Compiled != 3 {
		t.Errorf("new includable file in Headers: Compiled=%d, want 3", r.Compiled)
	}
}

func TestCompileErrorDiagnostics(t *testing.T) {
	cc := needCC(t)
	p := newProject(t)
	write(t, filepath.Join(p.ws, "sum.c"), `#include "harness.h"
int learner_sum(int a, int b) {
  int unused_var;
  return a + b + missing_variable;
}
`)
	b := NewBuilder(t.TempDir())
	req := p.request(&Toolchain{CC: cc})
	req.Flags = []string{"-Wall"}
	res := build(t, b, req)
	if res.OK || res.Binary != "" {
		t.Fatalf("OK=%v Binary=%q for a broken source", res.OK, res.Binary)
	}
	if len(res.Diagnostics) == 0 {
		t.Fatalf("no diagnostics from:\n%s", res.Log)
	}
	d := res.Diagnostics[0]
	if d.File != "mod0/sum/sum.c" || d.Line != 4 || d.Severity != "error" || !strings.Contains(d.Msg, "missing_variable") {
		t.Errorf("first diagnostic = %+v", d)
	}
	if strings.Contains(res.Log, p.ws) {
		t.Errorf("log still names the workspace path %s:\n%s", p.ws, res.Log)
	}
	if !strings.Contains(res.Log, "mod0/sum/sum.c:4:") {
		t.Errorf("log does not use the learner's path:\n%s", res.Log)
	}
	// The failure is not cached: fixing the file builds.
	write(t, filepath.Join(p.ws, "sum.c"), "int learner_sum(int a, int b) { return a + b; }\n")
	if fixed := build(t, b, p.request(&Toolchain{CC: cc})); !fixed.OK {
		t.Errorf("fixed source failed:\n%s", fixed.Log)
	}
}

func TestLinkErrorDiagnostics(t *testing.T) {
	cc := needCC(t)
	p := newProject(t)
	write(t, filepath.Join(p.ws, "sum.c"), "int learner_sum_typo(int a, int b) { return a + b; }\n")
	res := build(t, NewBuilder(t.TempDir()), p.request(&Toolchain{CC: cc}))
	if res.OK {
		t.Fatal("link with an undefined symbol succeeded")
	}
	found := false
	for _, d := range res.Diagnostics {
		if d.Severity == "error" && strings.Contains(d.Msg, "learner_sum") {
			found = true
		}
	}
	if !found {
		t.Errorf("no diagnostic names learner_sum: %+v\n%s", res.Diagnostics, res.Log)
	}
	if strings.Contains(res.Log, "/tmp/") && strings.Contains(res.Log, "build-") {
		t.Errorf("log names the work directory:\n%s", res.Log)
	}
}

func TestParseDiagnostics(t *testing.T) {
	log := `mod0/peer/peer.cu(12): warning #177-D: variable "n" was declared but never referenced
mod0/peer/peer.cu(14): error: identifier "cudaMemcpyPeerAsyn" is undefined
mod0/peer/peer.cu(14): error: identifier "cudaMemcpyPeerAsyn" is undefined
csrc/mgpu.h:10:3: warning: unused [-Wunused]
mod0/peer/peer.cu:20:1: fatal error: nope.h: No such file or directory
/usr/bin/ld: peer.cu.o: in function ` + "`main':" + `
peer.cu:(.text+0x1d): undefined reference to ` + "`nccl_foo'" + `
/usr/bin/ld: cannot find -lnccl: No such file or directory
collect2: error: ld returned 1 exit status
`
	got := parseDiagnostics(log)
	want := []Diagnostic{
		{File: "mod0/peer/peer.cu", Line: 14, Severity: "error", Msg: `identifier "cudaMemcpyPeerAsyn" is undefined`},
		{File: "mod0/peer/peer.cu", Line: 20, Severity: "error", Msg: "nope.h: No such file or directory"},
		{File: "peer.cu", Severity: "error", Msg: "undefined reference to `nccl_foo'"},
		{Severity: "error", Msg: "cannot find -lnccl: No such file or directory"},
		{File: "mod0/peer/peer.cu", Line: 12, Severity: "warning", Msg: `variable "n" was declared but never referenced`},
		{File: "csrc/mgpu.h", Line: 10, Severity: "warning", Msg: "unused [-Wunused]"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d diagnostics: %+v", len(got), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("diagnostic %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestConcurrentBuildsShareTheCache(t *testing.T) {
	cc := needCC(t)
	p := newProject(t)
	b := NewBuilder(t.TempDir())
	other := NewBuilder(b.Dir()) // as a second process would
	var wg sync.WaitGroup
	results := make([]*Result, 6)
	errs := make([]error, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bb := b
			if i%2 == 1 {
				bb = other
			}
			results[i], errs[i] = bb.Build(context.Background(), p.request(&Toolchain{CC: cc}))
		}()
	}
	wg.Wait()
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("build %d: %v", i, errs[i])
		}
		if got := runBinary(t, r); got != "42" {
			t.Errorf("build %d printed %q", i, got)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(b.Dir(), "tmp")); len(ents) != 0 {
		t.Errorf("work directories left in the cache: %d", len(ents))
	}
}

func TestTrim(t *testing.T) {
	dir := t.TempDir()
	cc, _ := fakeCompiler(t, dir)
	cacheDir := filepath.Join(dir, "cache")
	b := NewBuilder(cacheDir)
	now := time.Now()
	b.cache.now = func() time.Time { return now }
	p := newProject(t)
	req := p.request(&Toolchain{CC: cc, Version: "v"})
	first := build(t, b, req)

	// An entry nobody used for 15 days, and one used 12 days ago.
	old := filepath.Join(cacheDir, "ab", strings.Repeat("ab", 32)+"-a")
	recent := filepath.Join(cacheDir, "cd", strings.Repeat("cd", 32)+"-a")
	write(t, old, "x")
	write(t, recent, "y")
	os.Chtimes(old, now.Add(-15*24*time.Hour), now.Add(-15*24*time.Hour))
	os.Chtimes(recent, now.Add(-12*24*time.Hour), now.Add(-12*24*time.Hour))

	// Within a day of the last trim nothing is removed.
	now = now.Add(time.Hour)
	build(t, b, req)
	if _, err := os.Stat(old); err != nil {
		t.Fatal("trimmed again within a day")
	}
	// A day later the old entry goes, the recent one and the live entries stay.
	now = now.Add(24 * time.Hour)
	second := build(t, b, req)
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Error("entry unused for 15 days survived the trim")
	}
	if _, err := os.Stat(recent); err != nil {
		t.Error("entry used 12 days ago (13 at the trim) was trimmed")
	}
	if !second.Cached || second.Binary != first.Binary {
		t.Error("live entries were trimmed")
	}
	// Used entries get a fresh time (at most hourly) so they survive later trims: ten days
	// on they are used again, ten more days on they are still there although they were
	// made twenty days before.
	now = now.Add(10 * 24 * time.Hour)
	build(t, b, req)
	now = now.Add(10 * 24 * time.Hour)
	if third := build(t, b, req); !third.Cached {
		t.Error("entry used ten days ago did not survive the trim")
	}
	if _, err := os.Stat(recent); !os.IsNotExist(err) {
		t.Error("unused entry survived")
	}
}

func TestCommandLines(t *testing.T) {
	dir := t.TempDir()
	// A fake CUDA tree in pip's layout: bin/nvcc, include/cccl, lib/libcudart_static.a.
	top := filepath.Join(dir, "cu13")
	nvcc, log := fakeCompiler(t, dir)
	fake := filepath.Join(top, "bin", "nvcc")
	write(t, fake, "")
	data, _ := os.ReadFile(nvcc)
	write(t, fake, string(data))
	os.Chmod(fake, 0o755)
	os.MkdirAll(filepath.Join(top, "include", "cccl"), 0o755)
	write(t, filepath.Join(top, "lib", "libcudart_static.a"), "")
	src := filepath.Join(dir, "ex")
	write(t, filepath.Join(src, "k.cu"), "__global__ void k() {}\n")
	write(t, filepath.Join(src, "core.c"), "int c;\n")
	tc := &Toolchain{NVCC: fake, Version: "13.0", Libs: map[string]Lib{
		"nccl":    {Include: []string{"/opt/nccl/include"}, LibDirs: []string{"/opt/nccl/lib"}, LinkArgs: []string{"-lnccl"}, RuntimeDirs: []string{"/opt/nccl/lib"}},
		"mpi":     {Include: []string{"/opt/mpi/include"}, LinkArgs: []string{"-pthread", "-Wl,-rpath", "-Wl,/opt/mpi/lib", "-L/opt/mpi/lib", "-lmpi"}},
		"nvshmem": {LibDirs: []string{"/opt/nvshmem/lib"}, LinkArgs: []string{"-l:libnvshmem_host.so.3", "/opt/nvshmem/lib/libnvshmem_device.a"}, RuntimeDirs: []string{"/opt/nvshmem/lib"}},
	}}
	t.Setenv("LD_LIBRARY_PATH", "/usr/local/lib")
	res := build(t, NewBuilder(filepath.Join(dir, "cache")), Request{
		Kind: "cuda",
		Sources: []Source{
			{Path: filepath.Join(src, "k.cu"), Role: RoleLearner, Show: "k.cu"},
			{Path: filepath.Join(src, "core.c"), Role: RoleHarness, Show: "core.c"},
		},
		Libs: []string{"nccl", "mpi", "nvshmem", "cuda", "pthread"}, RDC: true, Toolchain: tc,
		Flags: []string{"-lineinfo", "-Xlinker", "--no-as-needed"},
	})
	if !res.OK {
		t.Fatalf("build failed: %s", res.Log)
	}
	inv, pre := withoutPreprocess(invocations(t, log))
	if len(inv) != 3 || len(pre) != 1 || !strings.Contains(pre[0], "k.cu") {
		t.Fatalf("invocations: %q, preprocessing %q", inv, pre)
	}
	var cu, c, link string
	for _, l := range inv {
		switch {
		case strings.Contains(l, "k.cu"):
			cu = l
		case strings.Contains(l, "core.c"):
			c = l
		default:
			link = l
		}
	}
	for _, want := range []string{"-c ", "-std=c++17", "-arch=sm_90", "-rdc=true", "-O3", "-lineinfo",
		"-I" + filepath.Join(top, "include", "cccl"), "-I/opt/nccl/include", "-I/opt/mpi/include",
		"-DOMPI_SKIP_MPICXX=1", "-DMPICH_SKIP_MPICXX=1"} {
		if !strings.Contains(cu, want) {
			t.Errorf("cu compile %q lacks %q", cu, want)
		}
	}
	if !strings.Contains(c, "-x c ") || strings.Contains(c, "c++17") {
		t.Errorf("C source under nvcc: %q", c)
	}
	if strings.Contains(cu, "--no-as-needed") {
		t.Errorf("link flag in compile: %q", cu)
	}
	for _, want := range []string{"-arch=sm_90", "-rdc=true", "-Xlinker --no-as-needed", "-L" + filepath.Join(top, "lib"),
		"-L/opt/nccl/lib -lnccl", "-Xcompiler -pthread", "-Xlinker -rpath -Xlinker /opt/mpi/lib", "-lmpi",
		"-l:libnvshmem_host.so.3 /opt/nvshmem/lib/libnvshmem_device.a", "-lcuda", "-lpthread",
		"-Xlinker -rpath -Xlinker /opt/nccl/lib -Xlinker -rpath -Xlinker /opt/nvshmem/lib",
		"-Xlinker -z,relro,-z,now"} {
		if !strings.Contains(link, want) {
			t.Errorf("link %q lacks %q", link, want)
		}
	}
	if strings.Count(link, "-rpath -Xlinker /opt/nvshmem/lib") != 1 {
		t.Errorf("run path named more than once: %q", link)
	}
	if len(res.RuntimeEnv) != 1 || res.RuntimeEnv[0] != "LD_LIBRARY_PATH=/opt/nccl/lib:/opt/nvshmem/lib:/usr/local/lib" {
		t.Errorf("RuntimeEnv = %q", res.RuntimeEnv)
	}
	// -O and -arch in the manifest's flags replace the defaults.
	os.Remove(log)
	build(t, NewBuilder(filepath.Join(dir, "cache")), Request{Kind: "cuda", Toolchain: tc, Arch: "sm_80",
		Sources: []Source{{Path: filepath.Join(src, "k.cu"), Role: RoleLearner, Show: "k.cu"}},
		Flags:   []string{"-O0", "-gencode", "arch=compute_90,code=sm_90"}})
	for _, l := range invocations(t, log) {
		if strings.Contains(l, "-O3") || strings.Contains(l, "-arch=") || !strings.Contains(l, "-gencode arch=compute_90,code=sm_90") {
			t.Errorf("flags not overridden: %q", l)
		}
	}
}

func TestRunnerErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.c"), "int x;\n")
	b := NewBuilder(filepath.Join(dir, "cache"))
	for name, req := range map[string]Request{
		"no compiler": {Kind: "c", Sources: []Source{{Path: filepath.Join(dir, "a.c")}}, Toolchain: &Toolchain{CC: filepath.Join(dir, "nocc")}},
		"no source":   {Kind: "c", Sources: []Source{{Path: filepath.Join(dir, "missing.c")}}},
		"bad kind":    {Kind: "fortran", Sources: []Source{{Path: filepath.Join(dir, "a.c")}}},
		"no sources":  {Kind: "c"},
		"unknown lib": {Kind: "c", Sources: []Source{{Path: filepath.Join(dir, "a.c")}}, Libs: []string{"nvshmem"}},
	} {
		if _, err := b.Build(context.Background(), req); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("MGPU_LEARN_CACHE", "/somewhere")
	if d, _ := DefaultCacheDir(); d != "/somewhere/build" {
		t.Errorf("DefaultCacheDir = %s", d)
	}
	if b := NewBuilder(""); b.Dir() != "/somewhere/build" {
		t.Errorf("NewBuilder(\"\").Dir() = %s", b.Dir())
	}
}

// repoNVCC is the pip-installed nvcc of scripts/install-cuda-tools.sh, if present.
func repoNVCC(t testing.TB) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", ".tools", "cuda", "nvidia", "cu13", "bin", "nvcc"))
	if _, err := os.Stat(p); err != nil {
		t.Skip("no .tools/cuda/nvidia/cu13/bin/nvcc (run scripts/install-cuda-tools.sh)")
	}
	return p
}

func TestCUDABuild(t *testing.T) {
	nvcc := repoNVCC(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ws", "scale.cu"), `#include "api.h"
__global__ void scale_kernel(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
void scale(float *x, int n) { scale_kernel<<<(n + 255) / 256, 256>>>(x, n); }
`)
	write(t, filepath.Join(dir, "inc", "api.h"), "#pragma once\nvoid scale(float *x, int n);\nint core_value(void);\n")
	write(t, filepath.Join(dir, "core", "core.c"), "int core_value(void) { return 7; }\n")
	write(t, filepath.Join(dir, "drv", "driver.cu"), `#include <cstdio>
#include "api.h"
extern "C" int core_value(void);
int main() { printf("%d\n", core_value()); return 0; }
`)
	// core.c is C; the driver declares it extern "C", so api.h's C++ declaration is unused.
	write(t, filepath.Join(dir, "inc", "api.h"), "#pragma once\nvoid scale(float *x, int n);\n")
	req := Request{
		Kind: "cuda",
		Sources: []Source{
			{Path: filepath.Join(dir, "ws", "scale.cu"), Role: RoleLearner, Show: "scale.cu"},
			{Path: filepath.Join(dir, "drv", "driver.cu"), Role: RoleDriver, Show: "driver.cu"},
			{Path: filepath.Join(dir, "core", "core.c"), Role: RoleHarness, Show: "core.c"},
		},
		Headers:   []string{filepath.Join(dir, "inc")},
		Toolchain: &Toolchain{NVCC: nvcc, Version: "13.0"},
	}
	b := NewBuilder(filepath.Join(dir, "cache"))
	res := build(t, b, req)
	if !res.OK {
		t.Fatalf("CUDA build failed:\n%s", res.Log)
	}
	if relro, now, _ := hardened(t, res.Binary); !relro || !now {
		t.Errorf("CUDA program: relro=%v bind-now=%v, want full RELRO", relro, now)
	}
	if nm, err := exec.LookPath("nm"); err == nil {
		out, _ := exec.Command(nm, res.Objects["scale.cu"]).CombinedOutput()
		if !strings.Contains(string(out), "scale") {
			t.Errorf("learner object lacks its symbols:\n%s", out)
		}
	}
	again := build(t, b, req)
	if !again.Cached || again.Binary != res.Binary {
		t.Errorf("second CUDA build not cached: %+v", again)
	}

	// The PTX of the learner's .cu file is kept for the policy stage's ordering rule, and
	// found again with a cached build; the C and driver sources have none.
	ptx, err := os.ReadFile(res.PTX["scale.cu"])
	if err != nil || !strings.Contains(string(ptx), ".entry") || !strings.Contains(string(ptx), "scale_kernel") {
		t.Errorf("PTX of scale.cu (%v):\n%.600s", err, ptx)
	}
	if len(res.PTX) != 1 || again.PTX["scale.cu"] != res.PTX["scale.cu"] {
		t.Errorf("PTX %v, cached build's %v", res.PTX, again.PTX)
	}

	// Both of nvcc's passes are kept for the policy stage: device code (under __CUDA_ARCH__)
	// and host code, macros expanded.
	pp, err := os.ReadFile(res.Preprocessed["scale.cu"])
	if err != nil {
		t.Fatalf("preprocessed scale.cu: %v", err)
	}
	for _, want := range []string{"scale.cu:3\t", "x[i] *= 2.0f", "scale_kernel<<<"} {
		if !strings.Contains(string(pp), want) {
			t.Errorf("preprocessed scale.cu lacks %q:\n%s", want, pp)
		}
	}
	if strings.Contains(string(pp), "cudaLaunchKernel(const void") {
		t.Errorf("preprocessed scale.cu has lines of the CUDA headers:\n%.2000s", pp)
	}
	write(t, filepath.Join(dir, "ws", "scale.cu"), `#include "api.h"
#define PICK(a, b) a##b
__global__ void scale_kernel(float *x, int n) {
#ifdef __CUDA_ARCH__
  x[0] = PICK(__fmaf, _rn)(x[0], 2.0f, 0.0f);
#endif
}
void scale(float *x, int n) {
#ifndef __CUDA_ARCH__
  PICK(cudaMemset, Async)(x, 0, 4, 0);
#endif
  scale_kernel<<<1, 1>>>(x, n);
}
`)
	passes := build(t, b, req)
	if !passes.OK {
		t.Fatalf("CUDA build failed:\n%s", passes.Log)
	}
	pp, _ = os.ReadFile(passes.Preprocessed["scale.cu"])
	for _, want := range []string{"scale.cu:5\t", "__fmaf_rn(x[0]", "cudaMemsetAsync(x, 0, 4, 0)"} {
		if !strings.Contains(string(pp), want) {
			t.Errorf("preprocessed scale.cu (device and host passes) lacks %q:\n%s", want, pp)
		}
	}

	// A kernel error is reported on the learner's file.
	write(t, filepath.Join(dir, "ws", "scale.cu"), "#include \"api.h\"\n__global__ void k(float *x) { x[0] = undefined_thing; }\n")
	bad := build(t, b, req)
	if bad.OK || len(bad.Diagnostics) == 0 || bad.Diagnostics[0].File != "scale.cu" || bad.Diagnostics[0].Line != 2 {
		t.Errorf("nvcc diagnostics: OK=%v %+v\n%s", bad.OK, bad.Diagnostics, bad.Log)
	}
}

func BenchmarkWarmBuild(b *testing.B) {
	cc := needCC(b)
	p := newProject(b)
	bl := NewBuilder(b.TempDir())
	req := p.request(&Toolchain{CC: cc, Version: "bench"})
	if r := build(b, bl, req); !r.OK {
		b.Fatal(r.Log)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := bl.Build(context.Background(), req)
		if err != nil || !r.Cached {
			b.Fatalf("warm build: %v cached=%v", err, r != nil && r.Cached)
		}
	}
}

func TestHugeIncludeDirIsNeverCached(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i <= maxTreeFiles; i++ {
		write(t, filepath.Join(dir, fmt.Sprintf("h%d.h", i)), "")
	}
	a, err1 := treeDigest(dir, nil)
	b, err2 := treeDigest(dir, nil)
	if err1 != nil || err2 != nil || a == b {
		t.Errorf("digests %q %q (%v %v): a directory too big to hash must not give a stable key", a, b, err1, err2)
	}
	small := t.TempDir()
	write(t, filepath.Join(small, "x.h"), "1")
	c, _ := treeDigest(small, nil)
	d, _ := treeDigest(small, nil)
	if c != d {
		t.Error("digest of a small directory is not stable")
	}
}

// hardened reports whether a linked program has full RELRO: a PT_GNU_RELRO segment and
// binding at start-up (DF_BIND_NOW or DF_1_NOW), so the GOT is read-only once it runs.
func hardened(t *testing.T, path string) (relro, now bool, runpath string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_GNU_RELRO {
			relro = true
		}
	}
	if v, err := f.DynValue(elf.DT_FLAGS); err == nil && len(v) > 0 && v[0]&uint64(elf.DF_BIND_NOW) != 0 {
		now = true
	}
	if v, err := f.DynValue(elf.DT_FLAGS_1); err == nil && len(v) > 0 && v[0]&uint64(elf.DF_1_NOW) != 0 {
		now = true
	}
	if rp, err := f.DynString(elf.DT_RUNPATH); err == nil && len(rp) > 0 {
		runpath = rp[0]
	} else if rp, err := f.DynString(elf.DT_RPATH); err == nil && len(rp) > 0 {
		runpath = rp[0]
	}
	return relro, now, runpath
}

func TestCProgramsLinkWithFullRELRO(t *testing.T) {
	cc := needCC(t)
	p := newProject(t)
	libDir := filepath.Join(p.root, "wheel", "lib")
	os.MkdirAll(libDir, 0o755)
	tc := &Toolchain{CC: cc, Version: "test", Libs: map[string]Lib{
		"extra": {LibDirs: []string{libDir}, RuntimeDirs: []string{libDir}},
	}}
	req := p.request(tc)
	req.Libs = []string{"extra"}
	res := build(t, NewBuilder(filepath.Join(p.root, "cache")), req)
	if got := runBinary(t, res); got != "42" {
		t.Fatalf("program printed %q", got)
	}
	relro, now, runpath := hardened(t, res.Binary)
	if !relro || !now {
		t.Errorf("C program: relro=%v bind-now=%v, want full RELRO", relro, now)
	}
	if runpath != libDir {
		t.Errorf("run path = %q, want %q", runpath, libDir)
	}
}

func TestNVSHMEMForcesRelocatableDeviceCode(t *testing.T) {
	dir := t.TempDir()
	nvcc, log := fakeCompiler(t, dir)
	src := filepath.Join(dir, "k.cu")
	write(t, src, "__global__ void k() {}\n")
	tc := &Toolchain{NVCC: nvcc, Version: "13.0", Libs: map[string]Lib{
		"nvshmem": {Include: []string{"/opt/nvshmem/include"}, LibDirs: []string{"/opt/nvshmem/lib"},
			LinkArgs: []string{"-l:libnvshmem_host.so.3", "/opt/nvshmem/lib/libnvshmem_device.a"}, RuntimeDirs: []string{"/opt/nvshmem/lib"}},
	}}
	b := NewBuilder(filepath.Join(dir, "cache"))
	plain := Request{Kind: "cuda", Toolchain: tc, Sources: []Source{{Path: src, Role: RoleLearner, Show: "k.cu"}}}
	build(t, b, plain)
	for _, l := range invocations(t, log) {
		if strings.Contains(l, "-rdc=true") || strings.Contains(l, "nvshmem") {
			t.Errorf("plain CUDA build: %q", l)
		}
	}
	os.Remove(log)
	// The manifest forgot rdc: NVSHMEM turns it on, and the changed options miss the cache.
	shm := plain
	shm.Libs = []string{"nvshmem"}
	res := build(t, b, shm)
	if res.Cached || res.Compiled != 1 {
		t.Errorf("NVSHMEM build reused the plain build's object: cached=%v compiled=%d", res.Cached, res.Compiled)
	}
	inv, _ := withoutPreprocess(invocations(t, log))
	if len(inv) != 2 {
		t.Fatalf("invocations: %q", inv)
	}
	for _, want := range []string{"-c ", "-rdc=true", "-I/opt/nvshmem/include"} {
		if !strings.Contains(inv[0], want) {
			t.Errorf("compile %q lacks %q", inv[0], want)
		}
	}
	for _, want := range []string{"-rdc=true", "-L/opt/nvshmem/lib -l:libnvshmem_host.so.3 /opt/nvshmem/lib/libnvshmem_device.a",
		"-Xlinker -rpath -Xlinker /opt/nvshmem/lib", "-Xlinker -z,relro,-z,now"} {
		if !strings.Contains(inv[1], want) {
			t.Errorf("link %q lacks %q", inv[1], want)
		}
	}
	if strings.Contains(inv[1], "-lcuda") {
		t.Errorf("NVSHMEM 3 loads libcuda itself; the link must not need it: %q", inv[1])
	}
	// NVSHMEM is a CUDA library: a C build cannot use it.
	if _, err := b.Build(context.Background(), Request{Kind: "c", Toolchain: &Toolchain{CC: nvcc, Libs: tc.Libs},
		Sources: []Source{{Path: src}}, Libs: []string{"nvshmem"}}); err == nil || !strings.Contains(err.Error(), "needs kind cuda") {
		t.Errorf("c build with nvshmem: err = %v", err)
	}
}

// repoNVSHMEM is the pip wheel's NVSHMEM of scripts/install-cuda-tools.sh, if present.
func repoNVSHMEM(t testing.TB) string {
	p, _ := filepath.Abs(filepath.Join("..", "..", ".tools", "cuda", "nvidia", "nvshmem"))
	if _, err := os.Stat(filepath.Join(p, "lib", "libnvshmem_device.a")); err != nil {
		t.Skip("no .tools/cuda/nvidia/nvshmem (run scripts/install-cuda-tools.sh)")
	}
	return p
}

// An NVSHMEM program really compiles and device-links against the pip wheel's layout (no
// unversioned libnvshmem_host.so, no libcuda on a machine without a driver), and finds the
// host library at run time through its run path.
func TestNVSHMEMBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles NVSHMEM's headers (about 10 s)")
	}
	nvcc := repoNVCC(t)
	nv := repoNVSHMEM(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "ring.cu"), `#include <nvshmem.h>
#include <nvshmemx.h>
__global__ void hello(int *box) {
  int me = nvshmem_my_pe(), n = nvshmem_n_pes();
  nvshmem_int_p(box, me, (me + 1) % n);
  nvshmem_quiet();
}
int main() {
  nvshmem_init();
  int *box = (int *)nvshmem_malloc(sizeof(int));
  hello<<<1, 1>>>(box);
  nvshmemx_barrier_all_on_stream(0);
  nvshmem_free(box);
  nvshmem_finalize();
  return 0;
}
`)
	lib := filepath.Join(nv, "lib")
	tc := &Toolchain{NVCC: nvcc, Version: "13.0", Libs: map[string]Lib{"nvshmem": {
		Include: []string{filepath.Join(nv, "include")}, LibDirs: []string{lib},
		LinkArgs:    []string{"-l:libnvshmem_host.so.3", filepath.Join(lib, "libnvshmem_device.a")},
		RuntimeDirs: []string{lib},
	}}}
	res := build(t, NewBuilder(filepath.Join(dir, "cache")), Request{Kind: "cuda", Toolchain: tc, Libs: []string{"nvshmem"},
		Sources: []Source{{Path: filepath.Join(dir, "ring.cu"), Role: RoleDriver, Show: "ring.cu"}}})
	if !res.OK {
		t.Fatalf("NVSHMEM build failed:\n%s", res.Log)
	}
	relro, now, runpath := hardened(t, res.Binary)
	if !relro || !now || runpath != lib {
		t.Errorf("relro=%v bind-now=%v runpath=%q (want %q)", relro, now, runpath, lib)
	}
	if len(res.RuntimeEnv) != 1 || !strings.HasPrefix(res.RuntimeEnv[0], "LD_LIBRARY_PATH="+lib) {
		t.Errorf("RuntimeEnv = %q", res.RuntimeEnv)
	}
}

func TestPreprocessedLearnerLines(t *testing.T) {
	needCC(t)
	p := newProject(t)
	foreign := filepath.Join(t.TempDir(), "elsewhere", "mine.h")
	write(t, foreign, "static int foreign_helper(int x) { return x; }\n")
	write(t, filepath.Join(p.ws, "sum.c"), `#include "harness.h"
#include "`+foreign+`"
#define CALL(kind) helper_##kind
int helper_fast(int a, int b);
/* a comment that names helper_fast */
int learner_sum(int a, int b) { return CALL(fast)(a, b) + foreign_helper(0); }
int helper_fast(int a, int b) { return a + b; }
`)
	b := NewBuilder(filepath.Join(t.TempDir(), "cache"))
	res := build(t, b, p.request(&Toolchain{}))
	if !res.OK {
		t.Fatalf("build failed:\n%s", res.Log)
	}
	path := res.Preprocessed["mod0/sum/sum.c"]
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("preprocessed lines: %v (%v)", err, res.Preprocessed)
	}
	pp := string(data)
	for _, want := range []string{
		"sum.c:6\tint learner_sum(int a, int b) { return helper_fast(a, b) + foreign_helper(0); }",
		foreign + ":1\tstatic int foreign_helper",
	} {
		if !strings.Contains(pp, want) {
			t.Errorf("preprocessed lines lack %q:\n%s", want, pp)
		}
	}
	if strings.Contains(pp, "harness_twice") || strings.Contains(pp, "comment") {
		t.Errorf("preprocessed lines hold a course header's line or a comment:\n%s", pp)
	}
	if again := build(t, b, p.request(&Toolchain{})); !again.Cached || again.Preprocessed["mod0/sum/sum.c"] != path {
		t.Errorf("cached build: Cached=%v preprocessed %q, want %q", again.Cached, again.Preprocessed["mod0/sum/sum.c"], path)
	}
	// A cache entry without its preprocessed lines (an older cache) is compiled again.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if again := build(t, b, p.request(&Toolchain{})); again.Compiled != 1 {
		t.Errorf("object without preprocessed lines: Compiled=%d, want 1", again.Compiled)
	} else if _, err := os.Stat(again.Preprocessed["mod0/sum/sum.c"]); err != nil {
		t.Errorf("preprocessed lines not stored again: %v", err)
	}
}

func TestLearnerLinesMarkers(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "ws", "k.cu")
	ii := filepath.Join(dir, "k.ii")
	write(t, ii, `# 0 "`+main+`"
# 0 "<built-in>"
# 0 "<command-line>"
# 1 "/usr/include/stdc-predef.h" 1 3 4
int system_thing;
# 0 "<command-line>" 2
# 1 "`+main+`"
# 1 "/opt/tools/include/lib.h" 1
int library_thing(void);
# 2 "`+main+`" 2
int mine(void) { return library_thing(); }

# 1 "/opt/tools/include/lib.h"
int hidden_call(void) { return forbidden(); }
# 7 "/home/me/other.h" 1
int from_elsewhere;
`)
	got, err := learnerLines([]string{ii}, main, []string{"/opt/tools/include", "/usr/include"})
	if err != nil {
		t.Fatal(err)
	}
	want := "k.cu:2\tint mine(void) { return library_thing(); }\n" +
		"!line k.cu:4 /opt/tools/include/lib.h\n" +
		"k.cu:1\tint hidden_call(void) { return forbidden(); }\n" +
		"/home/me/other.h:7\tint from_elsewhere;\n"
	if string(got) != want {
		t.Errorf("learnerLines:\n%s\nwant:\n%s", got, want)
	}
	for _, tc := range []struct {
		in    string
		file  string
		line  int
		flags string
		ok    bool
	}{
		{`# 12 "a.c" 1 3`, "a.c", 12, "1 3", true},
		{`#line 7 "b.c"`, "b.c", 7, "", true},
		{`# 9`, "", 9, "", true},
		{`#pragma once`, "", 0, "", false},
		{`#define X 1`, "", 0, "", false},
	} {
		f, n, fl, ok := lineMarker(tc.in)
		if f != tc.file || n != tc.line || fl != tc.flags || ok != tc.ok {
			t.Errorf("lineMarker(%q) = %q %d %q %v", tc.in, f, n, fl, ok)
		}
	}
}

// withoutPreprocess splits compiler invocations into compiles and links, and the -E runs that
// preprocess a learner's source for the policy stage (a fake compiler keeps no passes).
func withoutPreprocess(inv []string) (rest, pre []string) {
	for _, l := range inv {
		if strings.HasPrefix(l, "-E ") {
			pre = append(pre, l)
		} else {
			rest = append(rest, l)
		}
	}
	return rest, pre
}

// A source with its own include directories (the harness) is keyed by those only: a change
// to another directory of the request leaves its object cached, and it is not compiled with
// that directory on its include path. A source's own flags reach its compile and key only.
func TestSourceHeadersAndFlags(t *testing.T) {
	cc := needCC(t)
	p := newProject(t)
	b := NewBuilder(t.TempDir())
	tc := &Toolchain{CC: cc}
	req := func(driverFlags ...string) Request {
		r := p.request(tc)
		r.Sources[1].Flags = driverFlags
		r.Sources[2].Headers = []string{p.harness}
		return r
	}
	if got := runBinary(t, build(t, b, req())); got != "42" {
		t.Fatalf("program printed %q, want 42", got)
	}
	// A header beside the driver changes the driver's and the learner's keys, not the harness's.
	write(t, filepath.Join(p.course, "extra.h"), "#define EXTRA 1\n")
	if r := build(t, b, req()); r.Compiled != 2 {
		t.Errorf("new header in the driver's directory: Compiled=%d, want 2 (the harness kept)", r.Compiled)
	}
	// The harness does not see the driver's directory: a header there of the harness's name
	// does not shadow the harness's own for it (quoted includes look beside the source first),
	// and an angle include of a course header fails.
	write(t, filepath.Join(p.harness, "harness.c"), "#include \"harness.h\"\n#include <extra.h>\nint harness_twice(int x) { return HARNESS_SCALE * x; }\n")
	if r := build(t, b, req()); r.OK || !strings.Contains(r.Log, "extra.h") {
		t.Errorf("the harness found a header of the driver's directory: OK=%v\n%s", r.OK, r.Log)
	}
	write(t, filepath.Join(p.harness, "harness.c"), "#include \"harness.h\"\nint harness_twice(int x) { return HARNESS_SCALE * x; }\n")
	// The driver's own -D: the driver compiles again, the others stay cached, and the macro
	// reaches it.
	write(t, filepath.Join(p.course, "driver.c"), `#include <stdio.h>
#include "harness.h"
int learner_sum(int, int);
#ifndef SCALE3
#define SCALE3 1
#endif
int main(void) { printf("%d\n", SCALE3 * harness_twice(learner_sum(20, 1))); return 0; }
`)
	if r := build(t, b, req()); r.Compiled != 1 || runBinary(t, r) != "42" {
		t.Errorf("edited driver: Compiled=%d", r.Compiled)
	}
	r := build(t, b, req("-DSCALE3=3"))
	if r.Compiled != 1 {
		t.Errorf("driver flag: Compiled=%d, want 1", r.Compiled)
	}
	if got := runBinary(t, r); got != "126" {
		t.Errorf("with the driver's -DSCALE3=3 the program printed %q, want 126", got)
	}
	// A learner source may not have flags of its own.
	bad := req()
	bad.Sources[0].Flags = []string{"-DX"}
	if _, err := b.Build(context.Background(), bad); err == nil {
		t.Error("a learner source's own flags were accepted")
	}
}
