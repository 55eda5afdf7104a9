package probe

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

func gpusN(n int) []GPU {
	g := make([]GPU, n)
	for i := range g {
		g[i] = GPU{Index: i, Physical: i, UUID: "GPU-" + string(rune('a'+i)) + "0000000-aaaa"}
	}
	return g
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The h200x4-* files are nvidia-smi's output on the course's 4×H200 machine (driver 580.159.04).
func TestParseRealH200x4(t *testing.T) {
	gpus, driver, err := parseGPUQuery(readTestdata(t, "h200x4-query.txt"))
	if err != nil || len(gpus) != 4 || driver != "580.159.04" || gpus[3].Name != "NVIDIA H200" || gpus[3].MemoryMiB != 143771 || gpus[3].Compute != "9.0" {
		t.Fatalf("query: %+v %q %v", gpus, driver, err)
	}
	if m := cudaVersionRE.FindStringSubmatch(readTestdata(t, "h200x4-version.txt")); m == nil || m[1] != "13.0" {
		t.Fatalf("version: %v", m)
	}
	m := parseMatrix(readTestdata(t, "h200x4-topo.txt"), gpus)
	if len(m) != 4 || m[0][0] != "X" || m[0][3] != "NV18" || m[3][2] != "NV18" || m[2][2] != "X" {
		t.Fatalf("matrix = %v", m)
	}
	p := parseMatrix(readTestdata(t, "h200x4-p2p.txt"), gpus)
	if len(p) != 4 || p[1][0] != "OK" || p[1][1] != "X" || p[3][0] != "OK" {
		t.Fatalf("p2p = %v", p)
	}
}

func TestParseMatrixKeepsOnlyGPUs(t *testing.T) {
	m := parseMatrix(readTestdata(t, "topo-pix-nic.txt"), gpusN(2))
	if !reflect.DeepEqual(m, [][]string{{"X", "PIX"}, {"PIX", "X"}}) {
		t.Fatalf("matrix = %v", m)
	}
	p := parseMatrix(readTestdata(t, "p2p-ns2.txt"), gpusN(2))
	if !reflect.DeepEqual(p, [][]string{{"X", "NS"}, {"NS", "X"}}) {
		t.Fatalf("p2p = %v", p)
	}
	// Space-separated output of older drivers, with a NIC column and row.
	m = parseMatrix(readTestdata(t, "topo-spaces8.txt"), gpusN(8))
	if len(m) != 8 || m[0][1] != "PIX" || m[0][4] != "SYS" || m[7][6] != "PIX" || m[5][5] != "X" {
		t.Fatalf("matrix = %v", m)
	}
	// Fewer rows than GPUs (a truncated output) is no matrix.
	if m := parseMatrix(readTestdata(t, "topo-pix-nic.txt"), gpusN(3)); m != nil {
		t.Fatalf("matrix for 3 GPUs from a 2-GPU output: %v", m)
	}
	if m := parseMatrix("garbage\n", gpusN(2)); m != nil {
		t.Fatalf("matrix from garbage: %v", m)
	}
}

func TestParseGPUQuery(t *testing.T) {
	out := "0, NVIDIA H200, 143771, 9.0, GPU-6c0bd5e2-1f3a, 580.159.04\n1, NVIDIA RTX 6000, Ada Generation, 49140, 8.9, GPU-77, 580.159.04\n2, Old, [N/A], [N/A], GPU-88, 580.159.04\n"
	g, driver, err := parseGPUQuery(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{
		{Index: 0, Physical: 0, Name: "NVIDIA H200", MemoryMiB: 143771, Compute: "9.0", UUID: "GPU-6c0bd5e2-1f3a"},
		{Index: 1, Physical: 1, Name: "NVIDIA RTX 6000, Ada Generation", MemoryMiB: 49140, Compute: "8.9", UUID: "GPU-77"},
		{Index: 2, Physical: 2, Name: "Old", UUID: "GPU-88"},
	}
	if !reflect.DeepEqual(g, want) || driver != "580.159.04" {
		t.Fatalf("gpus %+v driver %q", g, driver)
	}
	if _, _, err := parseGPUQuery("No devices were found\n"); err == nil {
		t.Fatal("no error for a message instead of rows")
	}
}

func TestVisibleSubset(t *testing.T) {
	all := gpusN(4)
	all[2].UUID = "GPU-6c0bd5e2-1f3a"
	for _, c := range []struct {
		cvd  string
		set  bool
		keep []int
		note string
	}{
		{"", false, []int{0, 1, 2, 3}, ""},
		{"", true, nil, "0 of 4"},
		{"1", true, []int{1}, "1 of 4 GPUs visible (nvidia-smi 1)"},
		{"2,0", true, []int{2, 0}, "(nvidia-smi 2,0)"},
		{"0,7,1", true, []int{0}, "1 of 4"},   // enumeration stops at the first bad entry
		{"0,0", true, []int{0}, "1 of 4"},     // a repeat ends it too
		{"GPU-6c0b,3", true, []int{2, 3}, ""}, // UUID prefixes
		{"-1", true, nil, "0 of 4"},
		{"MIG-abc", true, []int{0, 1, 2, 3}, "MIG"},
	} {
		keep, note := visibleSubset(all, c.cvd, c.set)
		if !reflect.DeepEqual(keep, c.keep) || !strings.Contains(note, c.note) {
			t.Errorf("CUDA_VISIBLE_DEVICES=%q (set %v): keep %v note %q, want %v and %q", c.cvd, c.set, keep, note, c.keep, c.note)
		}
	}
}

func TestIdentifyMPI(t *testing.T) {
	for _, c := range []struct{ out, vendor, version, dialect string }{
		{"mpirun (Open MPI) 4.1.6\n\nReport bugs to http://www.open-mpi.org/community/help/\n", "Open MPI", "4.1.6", "openmpi"},
		{"mpirun (Open MPI) 5.0.5rc1\n", "Open MPI", "5.0.5rc1", "openmpi"},
		{"mpicc: Open MPI 4.1.4 (Language: C)\n", "Open MPI", "4.1.4", "openmpi"},
		{"HYDRA build details:\n    Version:                                 4.1.2\n    Release Date:                            Wed Jun  7 15:22:45 CDT 2023\n", "MPICH", "4.1.2", "mpich"},
		{"Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n", "Intel MPI", "2021.10", "mpich"},
		{"something else\n", "", "", ""},
	} {
		v, ver, d := identify(c.out)
		if v != c.vendor || ver != c.version || d != c.dialect {
			t.Errorf("identify(%q) = %q %q %q", c.out, v, ver, d)
		}
	}
}

func TestOmpiCuda(t *testing.T) {
	built, rt := ompiCuda(readTestdata(t, "ompi_info-nocuda.txt"))
	if built != "false" || rt != "false" {
		t.Errorf("no cuda: %q %q", built, rt)
	}
	built, rt = ompiCuda(readTestdata(t, "ompi_info-cuda.txt"))
	if built != "true" || rt != "true" {
		t.Errorf("cuda: %q %q", built, rt)
	}
	if built, rt = ompiCuda("package:x\n"); built != "" || rt != "" {
		t.Errorf("nothing: %q %q", built, rt)
	}
}

func TestMPICHCuda(t *testing.T) {
	for out, want := range map[string]string{
		"MPICH Version: 4.2.0\nMPICH configure: --prefix=/usr --with-cuda=/usr/local/cuda\n": "true",
		"MPICH Version: 4.2.0\nMPICH configure: --prefix=/usr --without-cuda\n":              "false",
		"MPICH Version: 4.2.0\nMPICH configure: --prefix=/usr\n":                             "false",
		"MPICH Version: 4.2.0\n": "",
	} {
		if got := mpichCuda(out); got != want {
			t.Errorf("mpichCuda(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestMPILibFlags(t *testing.T) {
	l := mpiLib(&MPI{
		Include:  []string{"/usr/include", "/opt/ompi/include"},
		LinkArgs: []string{"-pthread", "-Wl,-rpath,/opt/ompi/lib", "-Wl,-rpath", "-Wl,/opt/ucx/lib", "-Wl,--enable-new-dtags", "-L/opt/ompi/lib", "-L/usr/lib", "-lmpi"},
	})
	if !reflect.DeepEqual(l.Include, []string{"/opt/ompi/include"}) || !reflect.DeepEqual(l.LibDirs, []string{"/opt/ompi/lib"}) ||
		!reflect.DeepEqual(l.LinkArgs, []string{"-lpthread", "-lmpi"}) || !reflect.DeepEqual(l.RuntimeDirs, []string{"/opt/ompi/lib", "/opt/ucx/lib"}) {
		t.Fatalf("lib = %+v", l)
	}
}

func TestParseLdconfig(t *testing.T) {
	out := "1234 libs found in cache `/etc/ld.so.cache'\n" +
		"\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n" +
		"\tlibnccl.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so\n" +
		"\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n" +
		"\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
	got := parseLdconfig(out)
	if got["libnccl.so.2"] != "/usr/lib/x86_64-linux-gnu/libnccl.so.2" || got["libcuda.so.1"] != "/usr/lib/x86_64-linux-gnu/libcuda.so.1" || len(got) != 3 {
		t.Fatalf("ldconfig = %v", got)
	}
}

func TestParseNVCCVersion(t *testing.T) {
	if v := parseNVCCVersion("Cuda compilation tools, release 12.4, V12.4.131\nBuild cuda_12.4.r12.4/compiler.34097967_0\n"); v != "12.4.131" {
		t.Errorf("version %q", v)
	}
	if v := parseNVCCVersion("Cuda compilation tools, release 11.0\n"); v != "11.0" {
		t.Errorf("version %q", v)
	}
}

// The probe script must be valid Python and print its line, torch or not.
func TestPythonScriptRuns(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 here")
	}
	out, _, err := run(context.Background(), command{path: py, args: []string{"-c", pythonScript}, timeout: 60 * time.Second})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var p Python
	if err := parsePython(out, &p); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if !strings.HasPrefix(p.Version, "3.") || len(p.SiteDirs) == 0 {
		t.Fatalf("python %+v", p)
	}
}

func TestRunKillsTheWholeGroup(t *testing.T) {
	start := time.Now()
	_, _, err := run(context.Background(), command{path: "/bin/sh", args: []string{"-c", "sleep 100 & sleep 100; echo done"}, timeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("run waited for the children: %s", time.Since(start))
	}
}
