package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseNM(t *testing.T) {
	out := `                 U lib_sum
0000000000000000 T vec_sum
                 U memcpy@GLIBC_2.14
0000000000000010 W ns::helper(float const*, long)
0000000000000000 t static_fn
`
	got := parseNM([]byte(out))
	want := []string{"lib_sum", "vec_sum", "memcpy@GLIBC_2.14", "ns::helper(float const*, long)", "static_fn"}
	if len(got) != len(want) {
		t.Fatalf("got %q", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestSymbolMatches(t *testing.T) {
	cases := []struct {
		sym, forbidden string
		want           bool
	}{
		{"lib_sum", "lib_sum", true},
		{"memcpy@GLIBC_2.14", "memcpy", true},
		{"memcpy_s", "memcpy", false},
		{"my_lib_sum", "lib_sum", false},
		{"_Z7lib_sumPKfS0_Pfl", "lib_sum", true},
		{"_Z10my_lib_sumPKf", "lib_sum", false},
		{"_Z17lib_sum_somethingv", "lib_sum", false},
		{"_ZN3cub12DeviceReduce3SumIPfS2_EE9cudaErrorPvRmT_T0_i", "cub::DeviceReduce::Sum", true},
		{"_ZN3cub12DeviceReduce3MaxIPfS2_EE9cudaErrorPvRmT_T0_i", "cub::DeviceReduce::Sum", false},
		{"ncclAllReduce", "ncclAllReduce", true},
		{"ncclAllReduceX", "ncclAllReduce", false},
		// Demangled names (nm -C).
		{"lib_sum(float const*, float const*, float*, long)", "lib_sum", true},
		{"foo1::lib_sum(float const*)", "lib_sum", true},
		{"cudaError cub::DeviceReduce::Sum<float*, float*>(void*, unsigned long&, float*, float*, int)", "cub::DeviceReduce::Sum", true},
		{"my_lib_sum(float const*)", "lib_sum", false},
	}
	for _, c := range cases {
		if got := symbolMatches(c.sym, c.forbidden); got != c.want {
			t.Errorf("symbolMatches(%q, %q) = %v, want %v", c.sym, c.forbidden, got, c.want)
		}
	}
}

func TestDemangledName(t *testing.T) {
	cases := map[string]string{
		"lib_sum(float const*)":                 "lib_sum",
		"ns::f<int>(int)":                       "ns::f",
		"void ns::f<std::pair<int, int> >(int)": "ns::f",
		"std::vector<int, std::allocator<int> >::push_back(int const&)": "std::vector<int, std::allocator<int> >::push_back",
		"plain": "plain",
	}
	for in, want := range cases {
		if got := demangledName(in); got != want {
			t.Errorf("demangledName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFindInSource(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.c")
	src := "#include \"sum.h\"\n/* lib_sum is forbidden:\n   do not call lib_sum */\n// lib_sum (again)\nvoid f(void) {\n  int lib_sum_count = 0;\n  lib_sum (a, b, c, n);\n}\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := findInSource(p, "lib_sum"); got != 7 {
		t.Fatalf("line %d, want 7 (the call, not the comments)", got)
	}
	if got := findInSource(p, "ncclAllReduce"); got != 0 {
		t.Fatalf("line %d, want 0", got)
	}
}

func TestAliases(t *testing.T) {
	for sym, want := range map[string]string{
		"ncclAllReduce": "ncclAllReduce pncclAllReduce",
		"MPI_Allreduce": "MPI_Allreduce PMPI_Allreduce",
		"lib_sum":       "lib_sum",
	} {
		if got := strings.Join(aliases(sym), " "); got != want {
			t.Errorf("aliases(%q) = %q, want %q", sym, got, want)
		}
	}
}
