package doctor

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

// module4 is an NVSHMEM exercise as the course writes it: nvcc, NVSHMEM, two GPUs with peer
// access.
func module4() *course.Course {
	return &course.Course{Title: "test", Modules: []*course.Module{{ID: "module4", Title: "NVSHMEM", Exercises: []*course.Exercise{
		ex("module4/ring-hello", "cuda", course.Requirements{GPUs: 2, Libs: []string{"nvshmem", "nvcc"}, PeerAccess: true},
			course.Launch{Launcher: "local", Ranks: "all"}, "nvshmem"),
	}}}}
}

// nvshmemPrefix lays out an NVSHMEM installation under dir (include/, lib/) of version v,
// with the unique-id bootstrap module when uid.
func nvshmemPrefix(m *probetest.Machine, inc, lib, v string, uid bool) {
	p := strings.Split(v+"..", ".")
	m.Put(filepath.Join(inc, "nvshmem.h"), "#include \"host/nvshmem_api.h\"\n")
	m.Put(filepath.Join(inc, "non_abi", "nvshmem_version.h"), fmt.Sprintf(
		"#define NVSHMEM_VENDOR_MAJOR_VERSION %s\n#define NVSHMEM_VENDOR_MINOR_VERSION %s\n#define NVSHMEM_VENDOR_PATCH_VERSION %s\n", p[0], p[1], p[2]))
	m.Put(filepath.Join(lib, "libnvshmem_host.so.3"), "")
	m.Put(filepath.Join(lib, "libnvshmem_device.a"), "")
	if uid {
		m.Put(filepath.Join(lib, "nvshmem_bootstrap_uid.so.3"), "")
	}
}

func nvlinkPair(m *probetest.Machine) {
	m.NvidiaSMI([]probetest.GPU{probetest.H200, probetest.H200}, "NV18", "OK")
	m.NVCC("13.0.88")
}

func TestNVSHMEMFromEachSource(t *testing.T) {
	for _, tc := range []struct {
		name, words, tools string
		layout             func(t *testing.T, m *probetest.Machine)
	}{
		{"pip", "from a pip wheel", "NVSHMEM   3.4.5 (pip wheel)", func(t *testing.T, m *probetest.Machine) {
			tools := filepath.Join(m.Root, "tools")
			nv := filepath.Join(tools, "cuda", "nvidia", "nvshmem")
			nvshmemPrefix(m, filepath.Join(nv, "include"), filepath.Join(nv, "lib"), "3.4.5", true)
			t.Setenv("MGPU_LEARN_TOOLS", tools)
		}},
		{"system", "from the system's packages", "NVSHMEM   3.4.5 (system)", func(t *testing.T, m *probetest.Machine) {
			// Debian/Ubuntu's libnvshmem3-dev-cuda-13: versioned folders for headers and libraries.
			nvshmemPrefix(m, "usr/include/nvshmem_13", "usr/lib/x86_64-linux-gnu/nvshmem/13", "3.4.5", true)
		}},
		{"home", "from $NVSHMEM_HOME", "NVSHMEM   3.4.5 ($NVSHMEM_HOME)", func(t *testing.T, m *probetest.Machine) {
			home := filepath.Join(m.Root, "opt", "nvshmem")
			nvshmemPrefix(m, filepath.Join(home, "include"), filepath.Join(home, "lib"), "3.4.5", true)
			t.Setenv("NVSHMEM_HOME", home)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := probetest.New(t)
			nvlinkPair(m)
			tc.layout(t, m)
			f := probeFake(t, m)
			if f.NVSHMEM == nil {
				t.Fatalf("probe found no NVSHMEM (problems %q)", f.Problems)
			}
			r := Build(f, module4())
			m4 := row(t, r, "module4")
			if !m4.Runnable || len(m4.Missing) != 0 {
				t.Fatalf("module4 = %+v", m4)
			}
			if len(m4.Uses) != 1 || !strings.HasPrefix(m4.Uses[0], "NVSHMEM 3.4.5 "+tc.words+": headers ") {
				t.Errorf("uses = %q", m4.Uses)
			}
			contains(t, text(t, r), tc.tools, "module4  yes   1/1        NVSHMEM", "    uses NVSHMEM 3.4.5 "+tc.words)
		})
	}
}

func TestNVSHMEMReasons(t *testing.T) {
	t.Run("bad NVSHMEM_HOME and nothing else", func(t *testing.T) {
		m := probetest.New(t)
		nvlinkPair(m)
		t.Setenv("NVSHMEM_HOME", filepath.Join(m.Root, "nowhere"))
		m4 := row(t, Build(probeFake(t, m), module4()), "module4")
		if needs(m4.Missing) != NeedNVSHMEM || !strings.Contains(m4.Missing[0].What, "NVSHMEM_HOME="+filepath.Join(m.Root, "nowhere")+" holds no include/nvshmem.h") ||
			!strings.Contains(m4.Missing[0].Fix, "point NVSHMEM_HOME at the prefix") {
			t.Errorf("missing %+v", m4.Missing)
		}
	})
	t.Run("too old for the unique-id start-up", func(t *testing.T) {
		m := probetest.New(t)
		nvlinkPair(m)
		home := filepath.Join(m.Root, "nvshmem-2.10")
		nvshmemPrefix(m, filepath.Join(home, "include"), filepath.Join(home, "lib"), "2.10.1", true)
		t.Setenv("NVSHMEM_HOME", home)
		m4 := row(t, Build(probeFake(t, m), module4()), "module4")
		if needs(m4.Missing) != NeedNVSHMEM || !strings.HasPrefix(m4.Missing[0].What, "needs NVSHMEM 2.11 or newer (the harness starts NVSHMEM with a unique id); found NVSHMEM 2.10.1 from $NVSHMEM_HOME") {
			t.Errorf("missing %+v", m4.Missing)
		}
	})
	t.Run("no unique-id bootstrap module", func(t *testing.T) {
		m := probetest.New(t)
		nvlinkPair(m)
		tools := filepath.Join(m.Root, "tools")
		nv := filepath.Join(tools, "cuda", "nvidia", "nvshmem")
		nvshmemPrefix(m, filepath.Join(nv, "include"), filepath.Join(nv, "lib"), "3.4.5", false)
		t.Setenv("MGPU_LEARN_TOOLS", tools)
		m4 := row(t, Build(probeFake(t, m), module4()), "module4")
		if needs(m4.Missing) != NeedNVSHMEM || !strings.Contains(m4.Missing[0].What, "nvshmem_bootstrap_uid.so* beside its host library; found NVSHMEM 3.4.5 from a pip wheel") {
			t.Errorf("missing %+v", m4.Missing)
		}
	})
	t.Run("NVSHMEM but no nvcc, one GPU", func(t *testing.T) {
		m := probetest.New(t)
		m.NvidiaSMI([]probetest.GPU{probetest.H200}, "", "")
		tools := filepath.Join(m.Root, "tools")
		nv := filepath.Join(tools, "cuda", "nvidia", "nvshmem")
		nvshmemPrefix(m, filepath.Join(nv, "include"), filepath.Join(nv, "lib"), "3.4.5", true)
		t.Setenv("MGPU_LEARN_TOOLS", tools)
		r := Build(probeFake(t, m), module4())
		m4 := row(t, r, "module4")
		if needs(m4.Missing) != "gpus,nvcc" || m4.Missing[0].What != "needs 2 GPUs; this machine has 1" {
			t.Errorf("missing %+v", m4.Missing)
		}
		// What was found is still named: the learner can see that NVSHMEM is not the problem.
		contains(t, text(t, r), "    uses NVSHMEM 3.4.5 from a pip wheel", "    - needs nvcc")
	})
	t.Run("peer access from NVSHMEM alone", func(t *testing.T) {
		f := &probe.Facts{GPUs: []probe.GPU{{Index: 0, Compute: "9.0"}, {Index: 1, Compute: "9.0"}},
			Peer: [][]bool{{false, false}, {false, false}}, Links: [][]string{{"X", "SYS"}, {"SYS", "X"}},
			NVSHMEM: &probe.Library{Version: "3.4.5", Source: "pip"}}
		local := course.Launch{Launcher: "local", Ranks: "all"}
		rs := Unmet(f, course.Requirements{GPUs: 2, Libs: []string{"nvshmem"}}, local)
		if needs(rs) != NeedPeerAccess || !strings.Contains(rs[0].What, "GPU 0 and GPU 1 have none (link SYS)") {
			t.Errorf("reasons %+v", rs)
		}
		// One GPU: nothing to reach, so no peer reason (the GPU count says what is wrong).
		if rs := Unmet(f, course.Requirements{Libs: []string{"nvshmem"}}, course.Launch{Launcher: "local", Ranks: "1"}); rs != nil {
			t.Errorf("one rank: %+v", rs)
		}
	})
}

func TestVersionLess(t *testing.T) {
	for _, c := range []struct {
		a, b string
		less bool
	}{
		{"2.10.1", "2.11", true}, {"2.11.0", "2.11", false}, {"2.11", "2.11.0", false}, {"3.4.5", "2.11", false},
		{"2.9", "2.11", true}, {"10.0", "9.9", false}, {"", "2.11", true},
	} {
		if got := versionLess(c.a, c.b); got != c.less {
			t.Errorf("versionLess(%q, %q) = %v", c.a, c.b, got)
		}
	}
}
