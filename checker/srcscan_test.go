package checker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

func TestIdentifiers(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`x = lib_sum(a, 1.5e3f, 0x1Fu);`, []string{"x", "lib_sum", "a"}},
		{`printf("cudaMemcpyPeer %d\n", n); c = 'x';`, []string{"printf", "n", "c"}},
		{`s = "a \"quoted cudaMemcpy\" b"; t2 = u;`, []string{"s", "t2", "u"}},
		{`asm volatile("call.uni forbidden_fn, (%0);" :: "l"(p));`, []string{"asm", "volatile", "call", "uni", "forbidden_fn", "l", "p"}},
		{`__asm__("mov.u32 %0, %%smid;" : "=r"(id));`, []string{"__asm__", "mov", "u32", "smid", "r", "id"}},
		{`int basm = 1; f("not_an_ident_here");`, []string{"int", "basm", "f"}},
		// Inside inline assembly the assembler sees adjacent literals as one string, escapes
		// decoded: the name is whole there.
		{`asm("call lib_" "sum;");`, []string{"asm", "call", "lib_sum"}},
		{`asm("call lib\x5fsum;");`, []string{"asm", "call", "lib_sum"}},
		{`asm("call lib\137sum;\n\tret");`, []string{"asm", "call", "lib_sum", "ret"}},
		{`asm("nop"); f("lib_sum");`, []string{"asm", "nop", "f"}},
	} {
		if got := identifiers(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("identifiers(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// An asm statement over several lines: its strings are the assembler's on every line, and
// literals split across lines are joined.
func TestPPScanAsmOverLines(t *testing.T) {
	pp := filepath.Join(t.TempDir(), "a.pp")
	lines := "a.cu:3\t__device__ void f(float *p) {\n" +
		"a.cu:4\t  asm volatile(\n" +
		"a.cu:5\t      \"call.uni nvshmem\"\n" +
		"a.cu:6\t      \"x_float_sum_reduce_block, (%0);\" :: \"l\"(p));\n" +
		"a.cu:7\t  g(\"nvshmem_quiet\");\n" +
		"a.cu:8\t}\n"
	if err := os.WriteFile(pp, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	idents, _, err := ppScan(pp)
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := idents["nvshmemx_float_sum_reduce_block"]; !ok || at.line != 6 {
		t.Errorf("the call split over lines 5-6: %+v, %v", at, ok)
	}
	if _, ok := idents["nvshmem_quiet"]; ok {
		t.Error("a string after the asm statement was read as code")
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"nvshmemx_*reduce*", "nvshmemx_float_sum_reduce_block", true},
		{"nvshmemx_*reduce*", "nvshmemx_float_sum_reduce", true},
		{"nvshmemx_*reduce*", "nvshmemi_float_sum_reduce", false},
		{"nvshmemx_*_collect*", "nvshmemx_collective_launch", false},
		{"nvshmemx_*_collect*", "nvshmemx_float_collect_block", true},
		{"nvshmemx_*fcollect*", "nvshmemx_float_fcollect_block", true},
		{"nvshmemx_collectmem*", "nvshmemx_collectmem_warp", true},
		{"ncclAllReduce", "ncclAllReduce", true},
		{"ab*ab", "ab", false},
		{"ab*ab", "abab", true},
		{"*_reduce", "x_reduce", true},
		{"*_reduce", "x_reduce_y", false},
	} {
		if got := globMatch(tc.pattern, tc.name); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
	if !symbolMatches("_Z31nvshmemx_float_sum_reduce_blockiPfPKfm", "nvshmemx_*reduce*") {
		t.Error("a C++ symbol's unqualified name does not match the pattern")
	}
	if !symbolMatches("nvshmemx_float_sum_reduce_on_stream@@NVSHMEM_3", "nvshmemx_*reduce*") {
		t.Error("a versioned symbol does not match the pattern")
	}
}

func TestSourceViolations(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "k.cu")
	if err := os.WriteFile(src, []byte("#include \"x.h\"\n\n#line 40 \"/usr/include/stdio.h\"\nint y;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pp := filepath.Join(dir, "k.pp")
	lines := "k.cu:9\t__global__ void k() { nvshmemx_float_sum_reduce_block(t, d, s, n); }\n" +
		"k.cu:12\tvoid h() { printf(\"ncclAllReduce\"); pncclAllGather(a); }\n" +
		"/home/me/x.h:3\tvoid g() { cudaMemcpyPeer(a, 0, b, 1, 4); }\n" +
		"k.cu:20\tlong r() { long v; asm volatile(\"syscall\" : \"=a\"(v) : \"a\"(39)); return v; }\n" +
		"!line k.cu:2 /usr/include/stdio.h\n"
	if err := os.WriteFile(pp, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	lf := learnerFile{Name: "k.cu", Path: src, Show: "module4/x/k.cu"}
	vs, err := sourceViolations(lf, pp, []course.Forbidden{
		{Symbol: "nvshmemx_*reduce*", Why: "w1"},
		{Symbol: "ncclAllReduce", Why: "w2"},
		{Symbol: "ncclAllGather", Why: "w3"},
		{Symbol: "cudaMemcpyPeer", Why: "w4"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range vs {
		got = append(got, v.Rule+"|"+v.Name()+"|"+v.Via+"|"+v.File)
	}
	want := []string{
		"source|#line||module4/x/k.cu:3",
		"side|syscall||module4/x/k.cu:20",
		"|nvshmemx_float_sum_reduce_block (nvshmemx_*reduce*)||module4/x/k.cu:9",
		"|ncclAllGather|pncclAllGather|module4/x/k.cu:12",
		"|cudaMemcpyPeer||/home/me/x.h:3 (a header your module4/x/k.cu includes)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLegacySyscallInAsm(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`long r() { long v; asm volatile("int $0x80" : "=a"(v) : "a"(20)); return v; }`, true},
		{`void r() { __asm__("mov $1, %eax\n\t" "int $" "0x80"); }`, true},
		{`int x = 128; int y = 0x80;`, false},                   // not inline assembly
		{`void r() { asm volatile("int3"); }`, false},           // a breakpoint, not a system call
		{`void r() { asm volatile("add $128, %rax"); }`, false}, // 128 without int
	} {
		var ls lineScanner
		got := slices.Contains(ls.scan(tc.line, true), "int $0x80")
		if got != tc.want {
			t.Errorf("%s: found int $0x80 = %v, want %v", tc.line, got, tc.want)
		}
	}
}
