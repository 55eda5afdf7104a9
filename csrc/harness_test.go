package csrc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cpuDriver is testdata/cpu_driver.c linked with mgpu_core.c by the host C compiler, built once.
var cpuDriver struct {
	once sync.Once
	path string
	err  error
}

func buildCPUDriver(t *testing.T) string {
	t.Helper()
	cpuDriver.once.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			cpuDriver.err = err
			return
		}
		dir, err := os.MkdirTemp("", "mgpu-harness-test-")
		if err != nil {
			cpuDriver.err = err
			return
		}
		cpuDriver.path = filepath.Join(dir, "cpu_driver")
		// -Werror on the harness: it must compile cleanly as strict C99 and C11.
		for _, std := range []string{"-std=c99", "-std=c11"} {
			for _, src := range []string{"mgpu_core.c", "mgpu_chan.c"} {
				cmd := exec.Command(cc, std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-pthread",
					"-I.", "-c", src, "-o", filepath.Join(dir, strings.TrimSuffix(src, ".c")+".o"))
				if out, err := cmd.CombinedOutput(); err != nil {
					cpuDriver.err = fmt.Errorf("%s: %v\n%s", cmd, err, out)
					return
				}
			}
		}
		cmd := exec.Command(cc, "-std=c11", "-Wall", "-O1", "-pthread", "-I.",
			"testdata/cpu_driver.c", filepath.Join(dir, "mgpu_core.o"), filepath.Join(dir, "mgpu_chan.o"), "-lm", "-o", cpuDriver.path)
		if out, err := cmd.CombinedOutput(); err != nil {
			cpuDriver.err = fmt.Errorf("%s: %v\n%s", cmd, err, out)
		}
	})
	if cpuDriver.err != nil {
		t.Fatalf("building the CPU driver: %v", cpuDriver.err)
	}
	return cpuDriver.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cpuDriver.path != "" {
		os.RemoveAll(filepath.Dir(cpuDriver.path))
	}
	if fdDriver.path != "" {
		os.RemoveAll(filepath.Dir(fdDriver.path))
	}
	os.Exit(code)
}

// baseEnv is the test process's environment without anything a launcher would set.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "MGPU_"), strings.HasPrefix(name, "OMPI_"),
			strings.HasPrefix(name, "PMI_"), strings.HasPrefix(name, "PMIX_"),
			name == "RANK", name == "WORLD_SIZE", name == "LOCAL_RANK", name == "LOCAL_WORLD_SIZE",
			name == "TORCHELASTIC_RUN_ID", name == "MPI_LOCALRANKID", name == "MPI_LOCALNRANKS":
			continue
		}
		env = append(env, kv)
	}
	return env
}

type rankRun struct {
	code   int
	stderr string
}

// runRanks starts the given ranks of a world together and waits for all of them.
// env maps rank to extra variables; dir is the working directory.
func runRanks(t *testing.T, bin, dir string, ranks []int, env func(rank int) []string, args ...string) []rankRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := make([]rankRun, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		cmd.Env = append(baseEnv(), env(r)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int, cmd *exec.Cmd, stderr *bytes.Buffer) {
			defer wg.Done()
			err := cmd.Wait()
			res[i].stderr = stderr.String()
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee):
				res[i].code = ee.ExitCode()
			default:
				res[i].code = -1
			}
		}(i, cmd, &stderr)
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("ranks did not finish within 20 s")
	}
	return res
}

type record map[string]any

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s:%d: not JSON: %v: %q", path, line, err, sc.Text())
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func (r record) str(k string) string { s, _ := r[k].(string); return s }
func (r record) num(k string) float64 {
	v, ok := r[k].(float64)
	if !ok {
		return math.NaN()
	}
	return v
}

func notes(recs []record) []string {
	var out []string
	for _, r := range recs {
		if r.str("t") == "note" {
			out = append(out, r.str("msg"))
		}
	}
	return out
}

func find(recs []record, t, key, val string) record {
	for _, r := range recs {
		if r.str("t") == t && (key == "" || r.str(key) == val) {
			return r
		}
	}
	return nil
}

// mix64 and the key derivations restate docs/harness.md ("Exact data"); the Python twin
// implements the same formulas.
func mix64(x uint64) uint64 {
	z := x + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// oneway64 is docs/harness.md's one-way function: the first 8 bytes, little-endian, of
// SHA-256(tag || le64(a) || le64(b)).
func oneway64(tag string, a, b uint64) uint64 {
	buf := append([]byte(tag), make([]byte, 16)...)
	binary.LittleEndian.PutUint64(buf[len(tag):], a)
	binary.LittleEndian.PutUint64(buf[len(tag)+8:], b)
	sum := sha256.Sum256(buf)
	return binary.LittleEndian.Uint64(sum[:8])
}

func exactValue(seed uint64, rank, iter int, i int64) float32 {
	key := mix64(oneway64("mgpu exact rank", seed, uint64(uint32(int32(rank)))) ^ uint64(uint32(int32(iter))))
	h := mix64(key ^ uint64(i))
	return float32(int((uint64(uint32(h>>32))*129)>>32) - 64)
}

// fineValue is docs/harness.md's fine exact value: the exact integer plus (h & 63) / 64.
func fineValue(seed uint64, rank, iter int, i int64) float32 {
	key := mix64(oneway64("mgpu exact rank", seed, uint64(uint32(int32(rank)))) ^ uint64(uint32(int32(iter))))
	h := mix64(key ^ uint64(i))
	return float32(int((uint64(uint32(h>>32))*129)>>32)-64) + float32(h&63)/64
}

func patternByte(seed uint64, iter int, i int64) uint8 {
	key := mix64(oneway64("mgpu pattern", seed, 0) ^ uint64(uint32(int32(iter))))
	return uint8(mix64(key^uint64(i>>3)) >> (8 * (i & 7)))
}

// rankPatternByte is docs/harness.md's formula for a rank's own byte pattern.
func rankPatternByte(seed uint64, rank, iter int, i int64) uint8 {
	h := oneway64("mgpu exact rank", seed, uint64(uint32(int32(rank))))
	key := mix64(mix64(h^0x7270617474000000) ^ uint64(uint32(int32(iter))))
	return uint8(mix64(key^uint64(i>>3)) >> (8 * (i & 7)))
}

func TestThreeRanks(t *testing.T) {
	bin := buildCPUDriver(t)
	run := t.TempDir()
	rdzv := t.TempDir()
	const seed = "18446744073709551557" // near 2^64: must parse as unsigned
	res := runRanks(t, bin, t.TempDir(), []int{0, 1, 2}, func(r int) []string {
		return []string{
			"MGPU_RANK=" + strconv.Itoa(r), "MGPU_WORLD_SIZE=3",
			"MGPU_LOCAL_RANK=" + strconv.Itoa(r), "MGPU_LOCAL_WORLD_SIZE=3",
			"MGPU_RUN_DIR=" + run, "MGPU_RDZV_DIR=" + rdzv, "MGPU_EXERCISE=module0/test",
			"MGPU_CASES=small=16;big=1048576", "MGPU_SEED=" + seed, "MGPU_PERF=1",
			"MGPU_PERF_CASES=huge=1073741824", "MGPU_PERF_BUDGET_MS=1500",
			"MGPU_PERF_MIN_REPS=4", "MGPU_PERF_MAX_REPS=9",
		}
	})
	seedU, _ := strconv.ParseUint(seed, 10, 64)
	for r := 0; r < 3; r++ {
		if res[r].code != 0 {
			t.Fatalf("rank %d exited %d: %s", r, res[r].code, res[r].stderr)
		}
		recs := readRecords(t, filepath.Join(run, fmt.Sprintf("rank-%d.jsonl", r)))
		if len(recs) < 3 {
			t.Fatalf("rank %d: %d records", r, len(recs))
		}
		for i, rec := range recs {
			if rec.num("rank") != float64(r) || rec.str("t") == "" || rec.num("ts") <= 0 {
				t.Errorf("rank %d record %d lacks t/rank/ts: %v", r, i, rec)
			}
		}
		start := recs[0]
		if start.str("t") != "start" || recs[len(recs)-1].str("t") != "done" {
			t.Fatalf("rank %d: first %q, last %q", r, start.str("t"), recs[len(recs)-1].str("t"))
		}
		if start.num("world") != 3 || start.num("local_rank") != float64(r) ||
			start.num("device") != -1 || start.str("gpu") != "" || start.str("harness") != "c/1" ||
			start.str("exercise") != "module0/test" || start.num("pid") <= 0 {
			t.Errorf("rank %d start record: %v", r, start)
		}
		ns := strings.Join(notes(recs), "\n")
		for _, want := range []string{
			fmt.Sprintf("ctx rank=%d world=3 local=%d/3 seed=%s perf=1 min=4 max=9 budget=1500", r, r, seed),
			"case small=16", "case big=1048576", "case_n small=16 missing=-1",
			"barriers ok", "shares ok", "pattern fill ok",
		} {
			if !strings.Contains(ns, want) {
				t.Errorf("rank %d: notes lack %q:\n%s", r, want, ns)
			}
		}
		odd := "odd \"quoted\" back\\slash\nnewline\ttab \x01 bell\x07 bad\ufffd utf8 é end"
		if !strings.Contains(ns, odd) {
			t.Errorf("rank %d: escaped note did not round-trip; want %q in\n%q", r, odd, ns)
		}
		if v := find(recs, "value", "name", "pi"); v == nil || v.num("value") != math.Pi || v.str("unit") != "rad" {
			t.Errorf("rank %d: value pi: %v", r, v)
		}
		if v := find(recs, "value", "name", "inf"); v == nil || v["value"] != nil {
			t.Errorf("rank %d: an infinite value must be null: %v", r, v)
		}
		// exact data follows the documented formula
		nExact, nFine, nPattern, nRank := 0, 0, 0, 0
		for _, n := range notes(recs) {
			var rk, it, i int
			var v float64
			if _, err := fmt.Sscanf(n, "exact %d %d %d %f", &rk, &it, &i, &v); err == nil {
				nExact++
				if want := exactValue(seedU, rk, it, int64(i)); float32(v) != want {
					t.Errorf("exact(%d,%d,%d) = %v, formula says %v", rk, it, i, v, want)
				}
			}
			if _, err := fmt.Sscanf(n, "fine %d %d %d %g", &rk, &it, &i, &v); err == nil {
				nFine++
				if want := fineValue(seedU, rk, it, int64(i)); float32(v) != want {
					t.Errorf("fine(%d,%d,%d) = %v, formula says %v", rk, it, i, v, want)
				}
			}
			var pb uint
			if _, err := fmt.Sscanf(n, "pattern %d %d %d", &it, &i, &pb); err == nil {
				nPattern++
				if want := patternByte(seedU, it, int64(i)); uint8(pb) != want {
					t.Errorf("pattern(%d,%d) = %d, formula says %d", it, i, pb, want)
				}
			}
			if _, err := fmt.Sscanf(n, "rpattern %d %d %d", &it, &i, &pb); err == nil {
				nRank++
				if want := rankPatternByte(seedU, r, it, int64(i)); uint8(pb) != want {
					t.Errorf("rank %d: rank pattern(%d,%d) = %d, formula says %d", r, it, i, pb, want)
				}
			}
		}
		if nExact != 4 || nFine != 4 || nPattern != 10 || nRank != 10 {
			t.Errorf("rank %d: %d exact, %d fine, %d pattern and %d rank pattern notes, want 4, 4, 10 and 10",
				r, nExact, nFine, nPattern, nRank)
		}
		good := find(recs, "case", "case", "good")
		if good == nil || good["ok"] != true || good.num("checked") != 4 || good.num("bad") != 0 ||
			len(good["first"].([]any)) != 0 {
			t.Errorf("rank %d: case good: %v", r, good)
		}
		bad := find(recs, "case", "case", "bad")
		if bad == nil {
			t.Fatalf("rank %d: no case bad", r)
		}
		if bad["ok"] != false || bad.num("n") != 12 || bad.num("checked") != 12 || bad.num("bad") != 8 ||
			bad.num("unwritten") != 2 || bad.num("guard_hits") != 0 || bad.num("max_abs_err") != 24 ||
			bad.num("max_rel_err") != 2 || bad.str("msg") != `the "msg" survives` {
			t.Errorf("rank %d: case bad: %v", r, bad)
		}
		first := bad["first"].([]any)
		if len(first) != 8 {
			t.Fatalf("rank %d: first has %d entries", r, len(first))
		}
		wantFirst := []struct {
			i         float64
			got, want string
		}{{2, "3.5", "3"}, {3, "4.5", "4"}, {4, "NaN(poison)", "5"}, {5, "NaN(poison)", "6"},
			{6, "NaN", "7"}, {7, "24", "8"}, {8, "27", "9"}, {9, "30", "10"}}
		for k, w := range wantFirst {
			m := first[k].(map[string]any)
			if m["i"] != w.i || m["got"] != w.got || m["want"] != w.want {
				t.Errorf("rank %d first[%d] = %v, want %+v", r, k, m, w)
			}
		}
		tm := find(recs, "timing", "who", "yours")
		if tm == nil || tm.str("case") != "t" || tm.num("bytes") != 1<<20 || tm.num("factor") != 1.5 ||
			tm.str("metric") != "busbw" || fmt.Sprint(tm["us"]) != "[10.5 11 9.75]" ||
			fmt.Sprint(tm["wall_us"]) != "[11 12 <nil>]" {
			t.Errorf("rank %d: timing: %v", r, tm)
		}
	}
	// rendezvous files do not pile up: each rank keeps at most its last barrier file
	entries, err := os.ReadDir(rdzv)
	if err != nil {
		t.Fatal(err)
	}
	barriers := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "barrier-") {
			barriers++
		}
	}
	if barriers > 3 {
		t.Errorf("%d barrier files left in the rendezvous directory", barriers)
	}
}

func TestFailWritesErrorAndExits1(t *testing.T) {
	bin := buildCPUDriver(t)
	for _, tc := range []struct {
		learnerFiles, where string
	}{
		{"", "driver"},
		{" other.cu , sub/dir/cpu_driver.c", "learner"},
		{"cpu_driver.cu,driver.c", "driver"},
	} {
		run := t.TempDir()
		res := runRanks(t, bin, t.TempDir(), []int{0}, func(int) []string {
			return []string{"MGPU_RANK=0", "MGPU_WORLD_SIZE=1", "MGPU_RUN_DIR=" + run,
				"MGPU_LEARNER_FILES=" + tc.learnerFiles}
		}, "fail")
		if res[0].code != 1 {
			t.Fatalf("exit code %d, want 1", res[0].code)
		}
		if !strings.Contains(res[0].stderr, `[rank 0] learner_function(x) failed at testdata/cpu_driver.c:42: it went "wrong"`) {
			t.Errorf("stderr: %q", res[0].stderr)
		}
		recs := readRecords(t, filepath.Join(run, "rank-0.jsonl"))
		if recs[0].str("t") != "start" {
			t.Errorf("first record %v", recs[0])
		}
		last := recs[len(recs)-1]
		if last.str("t") != "error" || last.str("where") != tc.where || last.str("call") != "learner_function(x)" ||
			last.str("file") != "testdata/cpu_driver.c" || last.num("line") != 42 || last.num("code") != 7 ||
			last.str("msg") != `it went "wrong"` {
			t.Errorf("MGPU_LEARNER_FILES=%q: error record %v", tc.learnerFiles, last)
		}
		if find(recs, "done", "", "") != nil {
			t.Error("a failed rank wrote done")
		}
	}
}

func TestMalformedEnvironment(t *testing.T) {
	bin := buildCPUDriver(t)
	for _, tc := range []struct{ env, inMsg string }{
		{"MGPU_CASES=small=16;oops", "MGPU_CASES"},
		{"MGPU_CASES=neg=-1", "non-negative"},
		{"MGPU_SEED=12abc", "MGPU_SEED"},
		{"MGPU_FAULT=kill:rank=x", "MGPU_FAULT"},
		{"MGPU_WORLD_SIZE=0", "MGPU_WORLD_SIZE"},
	} {
		run := t.TempDir()
		res := runRanks(t, bin, t.TempDir(), []int{0}, func(int) []string {
			return []string{"MGPU_RANK=0", "MGPU_WORLD_SIZE=1", "MGPU_RUN_DIR=" + run, tc.env}
		})
		if res[0].code != 1 {
			t.Errorf("%s: exit %d, want 1 (%s)", tc.env, res[0].code, res[0].stderr)
			continue
		}
		recs := readRecords(t, filepath.Join(run, "rank-0.jsonl"))
		last := recs[len(recs)-1]
		if recs[0].str("t") != "start" || last.str("t") != "error" || last.str("where") != "harness" ||
			!strings.Contains(last.str("msg"), tc.inMsg) {
			t.Errorf("%s: records %v", tc.env, recs)
		}
	}
}

func TestBarrierTimesOutWhenARankIsMissing(t *testing.T) {
	bin := buildCPUDriver(t)
	run, rdzv := t.TempDir(), t.TempDir()
	res := runRanks(t, bin, t.TempDir(), []int{0}, func(int) []string {
		return []string{"MGPU_RANK=0", "MGPU_WORLD_SIZE=2", "MGPU_RUN_DIR=" + run,
			"MGPU_RDZV_DIR=" + rdzv, "MGPU_RDZV_TIMEOUT_S=1"}
	}, "barrier-only")
	if res[0].code != 1 {
		t.Fatalf("exit %d, want 1", res[0].code)
	}
	recs := readRecords(t, filepath.Join(run, "rank-0.jsonl"))
	last := recs[len(recs)-1]
	if last.str("t") != "error" || last.str("where") != "harness" ||
		!strings.Contains(last.str("msg"), "rank 1 did not arrive") {
		t.Errorf("last record %v", last)
	}
}

func TestLauncherFallbackVariables(t *testing.T) {
	bin := buildCPUDriver(t)
	run, rdzv := t.TempDir(), t.TempDir()
	// torchrun's names for rank 0, Open MPI's for rank 1
	res := runRanks(t, bin, t.TempDir(), []int{0, 1}, func(r int) []string {
		common := []string{"MGPU_RUN_DIR=" + run, "MGPU_RDZV_DIR=" + rdzv}
		if r == 0 {
			return append(common, "RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=2")
		}
		return append(common, "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
			"OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2")
	})
	for r := 0; r < 2; r++ {
		if res[r].code != 0 {
			t.Fatalf("rank %d exit %d: %s", r, res[r].code, res[r].stderr)
		}
		recs := readRecords(t, filepath.Join(run, fmt.Sprintf("rank-%d.jsonl", r)))
		if recs[0].num("rank") != float64(r) || recs[0].num("world") != 2 || recs[0].num("local_rank") != float64(r) {
			t.Errorf("rank %d start %v", r, recs[0])
		}
		if !strings.Contains(strings.Join(notes(recs), "\n"), "shares ok") {
			t.Errorf("rank %d: share did not complete", r)
		}
	}
}

func TestStandaloneWritesToWorkingDirectory(t *testing.T) {
	bin := buildCPUDriver(t)
	dir := t.TempDir()
	res := runRanks(t, bin, dir, []int{0}, func(int) []string { return nil })
	if res[0].code != 0 {
		t.Fatalf("exit %d: %s", res[0].code, res[0].stderr)
	}
	if !strings.Contains(res[0].stderr, "running standalone") {
		t.Errorf("stderr does not say standalone: %q", res[0].stderr)
	}
	recs := readRecords(t, filepath.Join(dir, "mgpu-results", "rank-0.jsonl"))
	if recs[0].str("t") != "start" || recs[len(recs)-1].str("t") != "done" {
		t.Errorf("records %v", recs)
	}
}

func TestEmbeddedSources(t *testing.T) {
	for _, name := range []string{"mgpu.h", "mgpu_internal.h", "mgpu_core.c", "mgpu_chan.c", "mgpu_cuda.cu", "mgpu_nccl.cu", "mgpu_mpi.c", "mgpu_fd.c", "mgpu_cudrv.cu"} {
		b, err := fs.ReadFile(FS, name)
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := fs.Stat(FS, "harness_test.go"); err == nil {
		t.Error("Go files are embedded")
	}
}

// repoRoot is two levels up from the package directory's parent: csrc/ lives at the root.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// TestCUDABuildLinks compiles the CUDA, NCCL and MPI parts with the toolchain that
// scripts/install-cuda-tools.sh puts in .tools, and links a driver (no GPU needed).
func TestCUDABuildLinks(t *testing.T) {
	root := repoRoot(t)
	nv := filepath.Join(root, ".tools", "cuda", "nvidia")
	nvcc := filepath.Join(nv, "cu13", "bin", "nvcc")
	if _, err := os.Stat(nvcc); err != nil {
		t.Skip("no nvcc in .tools (scripts/install-cuda-tools.sh installs it)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	out := t.TempDir()
	ncclInc := filepath.Join(nv, "nccl", "include")
	flags := []string{"-arch=sm_90", "-O2", "-I" + filepath.Join(nv, "cu13", "include", "cccl"), "-I" + ncclInc, "-I."}
	compile := func(args ...string) error {
		cmd := exec.Command(nvcc, args...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
		}
		return nil
	}
	jobs := [][]string{
		{"-x", "c", "-I.", "-c", "mgpu_core.c", "-o", filepath.Join(out, "core.o")},
		{"-x", "c", "-I.", "-c", "mgpu_chan.c", "-o", filepath.Join(out, "chan.o")},
		append(append([]string{}, flags...), "-Xcompiler", "-Wall,-Werror", "-c", "mgpu_cuda.cu", "-o", filepath.Join(out, "cuda.o")),
		append(append([]string{}, flags...), "-Xcompiler", "-Wall,-Werror", "-c", "mgpu_nccl.cu", "-o", filepath.Join(out, "nccl.o")),
		append(append([]string{}, flags...), "-c", "testdata/link_driver.cu", "-o", filepath.Join(out, "driver.o")),
		{"-x", "c", "-I.", "-c", "mgpu_fd.c", "-o", filepath.Join(out, "fd.o")},
		append(append([]string{}, flags...), "-Xcompiler", "-Wall,-Werror", "-c", "mgpu_cudrv.cu", "-o", filepath.Join(out, "cudrv.o")),
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = compile(j...) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := compile("-arch=sm_90", filepath.Join(out, "driver.o"), filepath.Join(out, "core.o"), filepath.Join(out, "chan.o"),
		filepath.Join(out, "cuda.o"), filepath.Join(out, "nccl.o"), filepath.Join(out, "fd.o"), filepath.Join(out, "cudrv.o"),
		"-L"+filepath.Join(nv, "cu13", "lib"), "-L"+filepath.Join(nv, "nccl", "lib"), "-lnccl",
		"-o", filepath.Join(out, "driver")); err != nil {
		t.Fatal(err)
	}
	t.Run("nccl-watch", func(t *testing.T) {
		testNCCLWatch(t, compile, flags, out, []string{"-L" + filepath.Join(nv, "cu13", "lib"), "-L" + filepath.Join(nv, "nccl", "lib"), "-Xlinker", "-rpath=" + filepath.Join(nv, "nccl", "lib")})
	})
	// The MPI part, where an MPI header is installed.
	for _, inc := range []string{"/usr/lib/x86_64-linux-gnu/openmpi/include", "/usr/include/openmpi", "/usr/include/mpich", "/usr/include"} {
		if _, err := os.Stat(filepath.Join(inc, "mpi.h")); err != nil {
			continue
		}
		cmd := exec.Command("cc", "-std=c11", "-Wall", "-Werror", "-I"+inc, "-I.", "-c", "mgpu_mpi.c", "-o", filepath.Join(out, "mpi.o"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
		}
		break
	}
}
