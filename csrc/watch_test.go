package csrc

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/runtime/build"
)

// watchCounts is the "nccl" object of a done record (mgpu_ncclwatch.c's mgpu_ncclwatch_json).
type watchCounts struct {
	EnvOK     int               `json:"env_ok"`
	Comms     uint64            `json:"comms"`
	Finalized uint64            `json:"finalized"`
	MaxRanks  int               `json:"max_ranks"`
	MaskOK    int               `json:"mask_ok"`
	Windows   uint64            `json:"windows"`
	Own       map[string]uint64 `json:"own"`
	Learner   map[string]uint64 `json:"learner"`
}

// testNCCLWatch builds NCCL's watch (the profiler plugin) through runtime/build, links
// testdata/watch_driver.cu (which plays NCCL's part) with the harness's NCCL part and runs it
// on the CPU: every event lands in the right column, a thread outside the driver's window is
// the learner's, and a watch NCCL never initialized or whose mask was cleared says so.
func testNCCLWatch(t *testing.T, compile func(...string) error, flags []string, out string, libArgs []string) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no cc")
	}
	src, err := os.ReadFile("mgpu_ncclwatch.c")
	if err != nil {
		t.Fatal(err)
	}
	b := build.NewBuilder(t.TempDir())
	so, err := b.SharedObject(context.Background(), &build.Toolchain{CC: cc, Version: "test"}, "csrc/mgpu_ncclwatch.c", src)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := b.SharedObject(context.Background(), &build.Toolchain{CC: cc, Version: "test"}, "csrc/mgpu_ncclwatch.c", src); err != nil || again != so {
		t.Fatalf("second build: %q, %v; want the cached %q", again, err, so)
	}
	if _, err := b.SharedObject(context.Background(), &build.Toolchain{CC: cc, Version: "test"}, "csrc/broken.c", []byte("int f( {")); err == nil || !strings.Contains(err.Error(), "csrc/broken.c") {
		t.Fatalf("a source that does not compile: %v", err)
	}
	drv := filepath.Join(out, "watch_driver.o")
	if err := compile(append(append([]string{}, flags...), "-c", "testdata/watch_driver.cu", "-o", drv)...); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, "watch_driver")
	// Without the CUDA part (mgpu_cuda.cu): its device set-up needs a driver, this test none.
	link := []string{"-arch=sm_90", drv, filepath.Join(out, "core.o"), filepath.Join(out, "chan.o"), filepath.Join(out, "nccl.o")}
	link = append(append(link, libArgs...), "-lnccl", "-ldl", "-lpthread", "-o", bin)
	if err := compile(link...); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, mode string, env ...string) (map[string]json.RawMessage, string, int) {
		t.Helper()
		dir := t.TempDir()
		cmd := exec.Command(bin, mode)
		cmd.Env = append(baseEnv(), append([]string{"MGPU_RUN_DIR=" + dir}, env...)...)
		outb, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		f, err := os.Open(filepath.Join(dir, "rank-0.jsonl"))
		if err != nil {
			t.Fatalf("%s: no records: %v\n%s", mode, err, outb)
		}
		defer f.Close()
		var last map[string]json.RawMessage
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			last = nil
			if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
				t.Fatalf("%s: %v: %s", mode, err, sc.Text())
			}
		}
		return last, string(outb), code
	}
	counts := func(t *testing.T, rec map[string]json.RawMessage) watchCounts {
		t.Helper()
		var w watchCounts
		if string(rec["t"]) != `"done"` || rec["nccl"] == nil {
			t.Fatalf("last record is not a done record with the watch's counts: %v", rec)
		}
		if err := json.Unmarshal(rec["nccl"], &w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	watch := []string{"MGPU_NCCL_WATCH=" + so, "NCCL_PROFILER_PLUGIN=/nonexistent/set-by-someone-else.so"}

	t.Run("counts", func(t *testing.T) {
		rec, outp, code := run(t, "plain", watch...)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, outp)
		}
		if !strings.Contains(outp, "mask 1536") {
			t.Errorf("NCCL's mask after init: want the API events only (1536)\n%s", outp)
		}
		got := counts(t, rec)
		if strings.Contains(outp, "NVSHMEM_DISABLE_NCCL is not 1") {
			t.Errorf("the harness left NVSHMEM free to run collectives through NCCL:\n%s", outp)
		}
		want := watchCounts{EnvOK: 1, Comms: 2, Finalized: 1, MaxRanks: 4, MaskOK: 1, Windows: 1,
			Own:     map[string]uint64{"AllReduce": 2},
			Learner: map[string]uint64{"AllReduce": 1, "Send": 2, "Recv": 1, "ReduceScatter": 1, "other": 1}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("counts\n got %+v\nwant %+v", got, want)
		}
	})
	// What the driver does to the watch, and what its counts must then say.
	for _, tc := range []struct {
		name, mode string
		ok         func(w watchCounts) bool
	}{
		{"blind", "blind", func(w watchCounts) bool { return w.MaskOK == 0 && w.Comms == 2 && w.EnvOK == 1 }},
		{"environment-changed", "env", func(w watchCounts) bool { return w.EnvOK == 0 && w.MaskOK == 1 }},
		{"never-initialized", "no-init", func(w watchCounts) bool {
			return w.Comms == 0 && w.MaskOK == 0 && w.Learner["AllReduce"] == 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, outp, code := run(t, tc.mode, watch...)
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, outp)
			}
			if got := counts(t, rec); !tc.ok(got) {
				t.Errorf("counts %+v", got)
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		// No MGPU_NCCL_WATCH: the done record has no counts and mgpu_nccl_own does nothing.
		rec, outp, code := run(t, "plain", "NCCL_PROFILER_PLUGIN="+so)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, outp)
		}
		if string(rec["t"]) != `"done"` || rec["nccl"] != nil {
			t.Errorf("without the watch: %v", rec)
		}
	})
	t.Run("not-the-watch", func(t *testing.T) {
		// A file that is not the course's plugin is a harness error, not a silent pass.
		rec, _, code := run(t, "plain", "MGPU_NCCL_WATCH="+filepath.Join(out, "watch_driver.o"))
		if code == 0 || string(rec["t"]) != `"error"` || !strings.Contains(string(rec["call"]), "NCCL watch") {
			b, _ := json.Marshal(rec)
			t.Errorf("exit %d, last record %s", code, b)
		}
	})
}
