package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

func ex(id, kind string, req course.Requirements, launch course.Launch, libs ...string) *course.Exercise {
	return &course.Exercise{Manifest: course.Manifest{ID: id, Kind: kind, Requires: req, Launch: launch, Build: course.Build{Libs: libs}}}
}

// testCourse is a small course covering every kind of requirement.
func testCourse() *course.Course {
	local := course.Launch{Launcher: "local", Ranks: "all"}
	return &course.Course{Title: "test", Modules: []*course.Module{
		{ID: "fixture", Title: "CPU fixtures", Exercises: []*course.Exercise{
			ex("fixture/sum", "c", course.Requirements{}, local),
		}},
		{ID: "module0", Title: "Orientation", Exercises: []*course.Exercise{
			ex("module0/devices", "cuda", course.Requirements{GPUs: 1}, local),
			ex("module0/peer-copy", "cuda", course.Requirements{GPUs: 2, PeerAccess: true}, course.Launch{Launcher: "single"}),
		}},
		{ID: "module1", Title: "PyTorch distributed", Exercises: []*course.Exercise{
			ex("module1/gloo", "python", course.Requirements{Libs: []string{"torch"}}, course.Launch{Launcher: "torchrun", Ranks: "4"}),
			ex("module1/nccl", "python", course.Requirements{GPUs: 2, Libs: []string{"torch"}}, course.Launch{Launcher: "torchrun", Ranks: "all"}),
		}},
		{ID: "module2", Title: "CUDA-aware MPI", Exercises: []*course.Exercise{
			ex("module2/halo", "cuda", course.Requirements{GPUs: 2, Libs: []string{"cuda-aware-mpi"}}, course.Launch{Launcher: "mpirun", Ranks: "2", CudaAwareMPI: true}, "mpi"),
		}},
		{ID: "module3", Title: "NCCL", Exercises: []*course.Exercise{
			ex("module3/allreduce", "cuda", course.Requirements{GPUs: 2, Libs: []string{"nccl"}}, local, "nccl"),
			ex("module3/ring", "cuda", course.Requirements{GPUs: 4, Libs: []string{"nccl"}}, local, "nccl"),
		}},
		{ID: "module4", Title: "NVSHMEM", Exercises: []*course.Exercise{
			ex("module4/put", "cuda", course.Requirements{GPUs: 2, Libs: []string{"nvshmem"}, MinCompute: "9.0"}, local, "nvshmem"),
		}},
	}}
}

func probeFake(t *testing.T, m *probetest.Machine) *probe.Facts {
	t.Helper()
	f, err := probe.Discover(context.Background(), m.Options())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func text(t *testing.T, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(&b, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "\x1b[") {
		t.Errorf("plain text holds escape sequences")
	}
	return b.String()
}

var spaces = regexp.MustCompile(` {2,}`)

// contains checks that out holds every want, runs of spaces counting as one (columns move as
// paths change).
func contains(t *testing.T, out string, want ...string) {
	t.Helper()
	squeezed := spaces.ReplaceAllString(out, " ")
	for _, w := range want {
		if !strings.Contains(squeezed, spaces.ReplaceAllString(w, " ")) {
			t.Errorf("report lacks %q\n---\n%s", w, out)
		}
	}
}

func row(t *testing.T, r *Report, id string) ModuleRow {
	t.Helper()
	for _, m := range r.Modules {
		if m.Module == id {
			return m
		}
	}
	t.Fatalf("no row for %s", id)
	return ModuleRow{}
}

func needs(rs []Reason) string {
	var n []string
	for _, r := range rs {
		n = append(n, r.Need)
	}
	return strings.Join(n, ",")
}

// A full 4×H200 node like the course's: NVLink everywhere, NCCL, torch, Open MPI without CUDA.
func h200Node(t *testing.T, m *probetest.Machine) {
	m.NvidiaSMI([]probetest.GPU{probetest.H200, probetest.H200, probetest.H200, probetest.H200}, "NV18", "OK")
	m.NVCC("13.0.88")
	m.CC()
	m.SystemNCCL("2.28.3")
	m.OpenMPI("", "4.1.6", false)
	m.Python("3.12.3", &probe.Torch{Version: "2.11.0+cu130", CUDA: "13.0", NCCL: "2.27.7", CUDAAvailable: true, DeviceCount: 4})
	tools := filepath.Join(m.Root, "tools")
	m.PipNVSHMEM(filepath.Join(tools, "cuda", "nvidia"), "3.4.5")
	m.Put(filepath.Join(tools, "cuda", "nvidia", "nvshmem", "lib", "nvshmem_bootstrap_uid.so.3"), "")
	t.Setenv("MGPU_LEARN_TOOLS", tools)
	t.Setenv("NCCL_NVLS_ENABLE", "0")
}

func TestFourNVLinkGPUsWithoutCudaAwareMPI(t *testing.T) {
	m := probetest.New(t)
	h200Node(t, m)
	r := Build(probeFake(t, m), testCourse())
	for _, id := range []string{"fixture", "module0", "module1", "module3", "module4"} {
		if mr := row(t, r, id); !mr.Runnable || len(mr.Missing) != 0 {
			t.Errorf("%s: runnable %v missing %+v", id, mr.Runnable, mr.Missing)
		}
	}
	m2 := row(t, r, "module2")
	if m2.Runnable || m2.ExercisesRunnable != 0 || m2.ExercisesTotal != 1 || needs(m2.Missing) != NeedCudaAwareMPI {
		t.Fatalf("module2 = %+v", m2)
	}
	// The refusal names the run-time query and ompi_info's answer, and says why it matters.
	what := m2.Missing[0].What
	for _, w := range []string{"MPIX_Query_cuda_support", "mpi_built_with_cuda_support", "Open MPI 4.1.6 (" + filepath.Join(m.Bin, "mpirun") + ")",
		"built without CUDA (built_with_cuda_support false)", "device pointer passed to it would crash"} {
		if !strings.Contains(what, w) {
			t.Errorf("what = %q lacks %q", what, w)
		}
	}
	want := what
	out := text(t, r)
	contains(t, out,
		"Driver   NVIDIA 580.159.04, CUDA 13.0",
		"GPUs     4 GPUs",
		"0  NVIDIA H200  140.4 GiB  9.0",
		"GPU0  X     NV18  NV18  NV18",
		"GPU3  NV18  NV18  NV18  X",
		"GPU1  OK    X     OK    OK",
		"nvcc      13.0.88",
		"NCCL      2.28.3 (system)",
		"NVSHMEM   3.4.5 (pip wheel)",
		"MPI       Open MPI 4.1.6",
		"CUDA-aware: no (built without CUDA, mpi-ext.h MPIX_CUDA_AWARE_SUPPORT=0)",
		"torch     2.11.0+cu130  CUDA 13.0, NCCL 2.27.7, sees 4 GPUs",
		"NCCL_NVLS_ENABLE=0",
		"Modules  (8 of 9 exercises can run here)",
		"module2  no    0/1        CUDA-aware MPI",
		"    - "+want,
		"      fix: put a CUDA-aware MPI first on PATH",
		"(looked on PATH, at $MGPU_CUDA_MPI_HOME, $MPI_HOME and /tmp/ompi-cuda)",
		"module3  yes   2/2        NCCL",
	)
	if strings.Contains(out, "Problems") {
		t.Errorf("problems section on a clean machine:\n%s", out)
	}
}

func TestCudaAwareMPIMakesModule2Runnable(t *testing.T) {
	m := probetest.New(t)
	h200Node(t, m)
	m.OpenMPI(filepath.Join(m.Root, "tmp", "ompi-cuda", "bin"), "5.0.5", true)
	f := probeFake(t, m)
	r := Build(f, testCourse())
	if m2 := row(t, r, "module2"); !m2.Runnable {
		t.Fatalf("module2 = %+v", m2)
	}
	contains(t, text(t, r), "CUDA MPI  Open MPI 5.0.5", "CUDA-aware: yes (built with CUDA, mpi-ext.h MPIX_CUDA_AWARE_SUPPORT=1)",
		"    uses CUDA-aware MPI Open MPI 5.0.5 ("+filepath.Join(m.Root, "tmp", "ompi-cuda", "bin", "mpirun")+") from "+
			filepath.Join(m.Root, "tmp", "ompi-cuda")+"; ompi_info: built with CUDA")
}

// A CUDA build switched off at run time is refused with that reason.
func TestCudaMPISwitchedOffReason(t *testing.T) {
	f := &probe.Facts{MPI: &probe.MPI{Vendor: "Open MPI", Version: "4.1.4", Mpirun: "/opt/ompi/bin/mpirun", CudaBuilt: "true", CudaRuntime: "false"}}
	rs := Unmet(f, course.Requirements{Libs: []string{"mpi"}}, course.Launch{Launcher: "mpirun", CudaAwareMPI: true})
	if needs(rs) != NeedCudaAwareMPI || !strings.Contains(rs[0].What, "switched off") || !strings.Contains(rs[0].What, "OMPI_MCA_mpi_cuda_support") {
		t.Fatalf("%+v", rs)
	}
}

func TestNoGPULaptop(t *testing.T) {
	m := probetest.New(t)
	m.CC()
	tools := filepath.Join(m.Root, "repo", ".tools")
	m.PipNVCC(filepath.Join(tools, "cuda", "nvidia"), "13.0.88")
	m.PipNCCL(filepath.Join(tools, "cuda", "nvidia"), "2.28.9")
	t.Setenv("MGPU_LEARN_TOOLS", tools)
	m.Python("3.11.7", nil)
	r := Build(probeFake(t, m), testCourse())

	if fx := row(t, r, "fixture"); !fx.Runnable {
		t.Errorf("fixture = %+v", fx)
	}
	m0 := row(t, r, "module0")
	if m0.Runnable || len(m0.Missing) != 1 || m0.Missing[0].What != "needs 2 GPUs; this machine has none" {
		t.Errorf("module0 missing %+v", m0.Missing)
	}
	m1 := row(t, r, "module1")
	if needs(m1.Missing) != "gpus,torch" || !strings.Contains(m1.Missing[1].What, "python3 (Python 3.11.7) cannot import torch") {
		t.Errorf("module1 missing %+v", m1.Missing)
	}
	// nvcc is there: nothing says it is missing, although nothing can run.
	for _, mr := range r.Modules {
		if strings.Contains(needs(mr.Missing), NeedNVCC) {
			t.Errorf("%s: nvcc reported missing: %+v", mr.Module, mr.Missing)
		}
	}
	m2 := row(t, r, "module2")
	if needs(m2.Missing) != "gpus,cuda-aware-mpi" || !strings.HasSuffix(m2.Missing[1].What, "no MPI was found") {
		t.Errorf("module2 missing %+v", m2.Missing)
	}
	m4 := row(t, r, "module4")
	if needs(m4.Missing) != "gpus,min_compute,nvshmem" {
		t.Errorf("module4 missing %+v", m4.Missing)
	}
	out := text(t, r)
	contains(t, out,
		"Driver   none",
		"GPUs     none",
		"(pip wheel)",
		"NCCL      2.28.9 (pip wheel)",
		"NVSHMEM   not found",
		"MPI       not found",
		"torch     not found",
		"Modules  (1 of 9 exercises can run here)",
		"fixture  yes   1/1        CPU fixtures",
		"    - needs 4 GPUs; this machine has none", // module3: the larger of its two needs
	)
}

func TestNoCompilers(t *testing.T) {
	m := probetest.New(t)
	r := Build(probeFake(t, m), testCourse())
	fx := row(t, r, "fixture")
	if fx.Runnable || needs(fx.Missing) != NeedCC {
		t.Errorf("fixture missing %+v", fx.Missing)
	}
	m0 := row(t, r, "module0")
	if needs(m0.Missing) != "gpus,nvcc" || !strings.Contains(m0.Missing[1].What, "even on a machine without a GPU") {
		t.Errorf("module0 missing %+v", m0.Missing)
	}
	m1 := row(t, r, "module1")
	if needs(m1.Missing) != "gpus,python" {
		t.Errorf("module1 missing %+v", m1.Missing)
	}
}

func TestOneVisibleGPUOfFour(t *testing.T) {
	m := probetest.New(t)
	h200Node(t, m)
	t.Setenv("CUDA_VISIBLE_DEVICES", "0")
	r := Build(probeFake(t, m), testCourse())
	m3 := row(t, r, "module3")
	if len(m3.Missing) != 1 || m3.Missing[0].What != "needs 4 GPUs; this machine has 1 (CUDA_VISIBLE_DEVICES=0)" ||
		!strings.Contains(m3.Missing[0].Fix, "CUDA_VISIBLE_DEVICES hides 3 of its 4 GPUs") {
		t.Errorf("module3 missing %+v", m3.Missing)
	}
	if m0 := row(t, r, "module0"); m0.ExercisesRunnable != 1 || m0.Missing[0].What != "needs 2 GPUs; this machine has 1 (CUDA_VISIBLE_DEVICES=0)" {
		t.Errorf("module0 = %+v", m0)
	}
	contains(t, text(t, r), "CUDA_VISIBLE_DEVICES=0: 1 of 4 GPUs visible", "GPUs     1 GPU")
}

func TestPCIePairWithoutPeerAccess(t *testing.T) {
	m := probetest.New(t)
	m.NvidiaSMI([]probetest.GPU{probetest.L4, probetest.L4}, "PIX", "NS")
	m.NVCC("13.0.88")
	r := Build(probeFake(t, m), testCourse())
	m0 := row(t, r, "module0")
	if m0.ExercisesRunnable != 1 || needs(m0.Missing) != NeedPeerAccess {
		t.Fatalf("module0 = %+v", m0)
	}
	want := "needs peer access between every pair of its 2 GPUs; GPU 0 and GPU 1 have none (link PIX, nvidia-smi topo -p2p r says NS)"
	if m0.Missing[0].What != want {
		t.Errorf("what = %q", m0.Missing[0].What)
	}
	if b := row(t, r, "module0").Blocked; len(b) != 1 || b[0].ID != "module0/peer-copy" {
		t.Errorf("blocked = %+v", b)
	}
	// The NVSHMEM exercise does not ask for peer access in requires, but NVSHMEM needs it.
	m4 := row(t, r, "module4")
	if needs(m4.Missing) != "min_compute,peer_access,nvshmem" || m4.Missing[0].What != "needs compute capability 9.0 or newer; GPU 0 (NVIDIA L4) is 8.9" ||
		!strings.HasPrefix(m4.Missing[1].What, "NVSHMEM needs peer access between every pair of its 2 GPUs; GPU 0 and GPU 1 have none") {
		t.Errorf("module4 missing %+v", m4.Missing)
	}
	out := text(t, r)
	contains(t, out, "GPU0 X PIX", "GPU1 NS X")
	if !strings.Contains(out, "\n        GPU0  GPU1\n  GPU0  X     PIX\n  GPU1  PIX   X\n") {
		t.Errorf("topology matrix not aligned:\n%s", out)
	}
}

func TestTorchProblems(t *testing.T) {
	f := &probe.Facts{GPUs: []probe.GPU{{Index: 0}, {Index: 1}}, CUDA: "12.2",
		Python: &probe.Python{Path: "/usr/bin/python3", Version: "3.12.3"}}
	req := course.Requirements{GPUs: 2, Libs: []string{"torch"}}
	torchrun := course.Launch{Launcher: "torchrun", Ranks: "all"}

	rs := Unmet(f, req, torchrun)
	if len(rs) != 1 || rs[0].What != "needs PyTorch; /usr/bin/python3 (Python 3.12.3) cannot import torch" {
		t.Fatalf("no torch: %+v", rs)
	}
	f.Python.TorchError = "ImportError('libcudart.so.13: cannot open shared object file')"
	if rs = Unmet(f, req, torchrun); !strings.Contains(rs[0].What, "libcudart.so.13") {
		t.Errorf("broken torch: %+v", rs)
	}
	f.Python.Torch = &probe.Torch{Version: "2.5.1+cpu"}
	if rs = Unmet(f, req, torchrun); len(rs) != 1 || !strings.Contains(rs[0].What, "CPU-only") {
		t.Errorf("cpu torch: %+v", rs)
	}
	// A CPU build is fine for a gloo exercise.
	if rs = Unmet(f, course.Requirements{Libs: []string{"torch"}}, torchrun); rs != nil {
		t.Errorf("gloo with cpu torch: %+v", rs)
	}
	f.Python.Torch = &probe.Torch{Version: "2.11.0+cu130", CUDA: "13.0"}
	if rs = Unmet(f, req, torchrun); len(rs) != 1 || !strings.Contains(rs[0].What, "is_available() is False") ||
		!strings.Contains(rs[0].Fix, "driver supports CUDA 12.2") {
		t.Errorf("torch without cuda: %+v", rs)
	}
	f.Python.Torch.CUDAAvailable, f.Python.Torch.DeviceCount = true, 2
	if rs = Unmet(f, req, torchrun); rs != nil {
		t.Errorf("good torch: %+v", rs)
	}
	// The torchrun launcher needs torch even when requires.libs forgets it.
	f.Python.Torch = nil
	if rs = Unmet(f, course.Requirements{}, torchrun); needs(rs) != NeedTorch {
		t.Errorf("torchrun without torch: %+v", rs)
	}
	f.Python = nil
	if rs = Unmet(f, course.Requirements{}, torchrun); needs(rs) != NeedPython {
		t.Errorf("torchrun without python: %+v", rs)
	}
}

func TestMPILaunchAndBuild(t *testing.T) {
	mpirun := course.Launch{Launcher: "mpirun", Ranks: "2"}
	f := &probe.Facts{}
	if rs := Unmet(f, course.Requirements{Libs: []string{"mpi"}}, mpirun); needs(rs) != NeedMPI {
		t.Errorf("no mpi: %+v", rs)
	}
	if rs := Unmet(f, course.Requirements{}, mpirun); needs(rs) != NeedMPIRun || !strings.Contains(rs[0].What, "no mpirun") {
		t.Errorf("mpirun launcher without mpi: %+v", rs)
	}
	f.MPI = &probe.MPI{Vendor: "Open MPI", Version: "4.1.6", Mpirun: "/usr/bin/mpirun"}
	if rs := Unmet(f, course.Requirements{Libs: []string{"mpi"}}, mpirun); needs(rs) != NeedMPI || !strings.Contains(rs[0].What, "mpicc") {
		t.Errorf("mpi without mpicc: %+v", rs)
	}
	f.MPI.Mpicc = "/usr/bin/mpicc"
	if rs := Unmet(f, course.Requirements{Libs: []string{"mpi"}}, mpirun); rs != nil {
		t.Errorf("mpi: %+v", rs)
	}
	aware := course.Launch{Launcher: "mpirun", Ranks: "2", CudaAwareMPI: true}
	if rs := Unmet(f, course.Requirements{Libs: []string{"mpi"}}, aware); needs(rs) != NeedCudaAwareMPI {
		t.Errorf("cuda-aware launch: %+v", rs)
	}
	f.CudaMPI = &probe.MPI{Vendor: "Open MPI", Version: "5.0.5", Mpirun: "/tmp/ompi-cuda/bin/mpirun", Mpicc: "/tmp/ompi-cuda/bin/mpicc", CudaAware: true}
	if rs := Unmet(f, course.Requirements{Libs: []string{"mpi", "cuda-aware-mpi"}}, aware); rs != nil {
		t.Errorf("cuda-aware mpi present: %+v", rs)
	}
}

func TestUnknownRequirementRefuses(t *testing.T) {
	rs := Unmet(&probe.Facts{}, course.Requirements{Libs: []string{"rccl"}}, course.Launch{})
	if needs(rs) != NeedUnknown || !strings.Contains(rs[0].What, `"rccl"`) {
		t.Fatalf("%+v", rs)
	}
}

func TestHungProbeShowsInReport(t *testing.T) {
	m := probetest.New(t)
	m.Tool("nvidia-smi", probetest.Case{Args: "*", Hang: true})
	opts := m.Options()
	opts.Timeout = 200_000_000 // 200ms
	f, err := probe.Discover(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	out := text(t, Build(f, nil))
	contains(t, out, "Problems", "nvidia-smi --query-gpu=index,name,memory.total,compute_cap,uuid,driver_version --format=csv,noheader,nounits: timed out after 200ms")
	if strings.Contains(out, "Modules") {
		t.Errorf("modules section without a course")
	}
}

func TestExplain(t *testing.T) {
	rs := Unmet(&probe.Facts{}, course.Requirements{GPUs: 2, Libs: []string{"nccl"}}, course.Launch{})
	got := Explain("module3/allreduce", rs)
	want := "module3/allreduce cannot run on this machine:\n  - needs 2 GPUs; this machine has none\n    fix: "
	if !strings.HasPrefix(got, want) || strings.Count(got, "\n    fix: ") != 2 {
		t.Fatalf("Explain = %q", got)
	}
}

func TestColourText(t *testing.T) {
	m := probetest.New(t)
	h200Node(t, m)
	var b bytes.Buffer
	if err := Build(probeFake(t, m), testCourse()).WriteText(&b, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	contains(t, out, "\x1b[31mno\x1b[0m", "\x1b[32myes\x1b[0m")
	// Columns stay aligned despite the escapes.
	plain := ansiRE.ReplaceAllString(out, "")
	for _, w := range []string{"\n  module2  no    0/1        CUDA-aware MPI\n", "\n  module3  yes   2/2        NCCL\n"} {
		if !strings.Contains(plain, w) {
			t.Errorf("colour text lacks %q:\n%s", w, plain)
		}
	}
}

func TestJSONSchema(t *testing.T) {
	m := probetest.New(t)
	h200Node(t, m)
	var b bytes.Buffer
	if err := Build(probeFake(t, m), testCourse()).WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != float64(1) {
		t.Errorf("schema = %v", doc["schema"])
	}
	facts := doc["facts"].(map[string]any)
	for _, k := range []string{"taken", "hostname", "os", "kernel", "driver", "cuda", "gpus", "links", "peer", "peer_status",
		"all_gpus", "visible", "nvcc", "cc", "nccl", "nvshmem", "mpi", "cuda_mpi", "python", "slurm", "sbatch", "env",
		"problems", "from_cache"} {
		if _, ok := facts[k]; !ok {
			t.Errorf("facts lacks %q", k)
		}
	}
	gpu := facts["gpus"].([]any)[0].(map[string]any)
	for _, k := range []string{"index", "physical_index", "name", "memory_mib", "compute", "uuid"} {
		if _, ok := gpu[k]; !ok {
			t.Errorf("gpu lacks %q", k)
		}
	}
	mpi := facts["mpi"].(map[string]any)
	if mpi["cuda_aware"] != false || mpi["cuda_built"] != "false" || mpi["vendor"] != "Open MPI" {
		t.Errorf("mpi = %v", mpi)
	}
	mods := doc["modules"].([]any)
	if len(mods) != 6 {
		t.Fatalf("%d modules", len(mods))
	}
	m2 := mods[3].(map[string]any)
	for _, k := range []string{"module", "title", "runnable", "exercises_runnable", "exercises_total", "missing", "blocked"} {
		if _, ok := m2[k]; !ok {
			t.Errorf("module row lacks %q", k)
		}
	}
	reason := m2["missing"].([]any)[0].(map[string]any)
	if reason["need"] != "cuda-aware-mpi" || reason["what"] == "" || reason["fix"] == "" {
		t.Errorf("reason = %v", reason)
	}
	if blocked := m2["blocked"].([]any)[0].(map[string]any); blocked["id"] != "module2/halo" {
		t.Errorf("blocked = %v", blocked)
	}
	// A runnable module has empty lists, not null.
	if m3 := mods[4].(map[string]any); m3["missing"] == nil || m3["blocked"] == nil {
		t.Errorf("module3 = %v", m3)
	}
}
