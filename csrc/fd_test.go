package csrc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fdDriver is testdata/fd_driver.c linked with the core, the channel and mgpu_fd.c, built once.
var fdDriver struct {
	once sync.Once
	path string
	err  error
}

func buildFDDriver(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("mgpu_fd.c uses Linux's abstract Unix sockets")
	}
	fdDriver.once.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			fdDriver.err = err
			return
		}
		dir, err := os.MkdirTemp("", "mgpu-fd-test-")
		if err != nil {
			fdDriver.err = err
			return
		}
		// Strict C99 and C11, like the rest of the harness.
		for _, std := range []string{"-std=c99", "-std=c11"} {
			cmd := exec.Command(cc, std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-pthread",
				"-I.", "-c", "mgpu_fd.c", "-o", filepath.Join(dir, "mgpu_fd.o"))
			if out, err := cmd.CombinedOutput(); err != nil {
				fdDriver.err = fmt.Errorf("%s: %v\n%s", cmd, err, out)
				return
			}
		}
		fdDriver.path = filepath.Join(dir, "fd_driver")
		cmd := exec.Command(cc, "-std=c11", "-Wall", "-Werror", "-O1", "-pthread", "-I.",
			"testdata/fd_driver.c", "mgpu_fd.c", "mgpu_core.c", "mgpu_chan.c", "-lm", "-o", fdDriver.path)
		if out, err := cmd.CombinedOutput(); err != nil {
			fdDriver.err = fmt.Errorf("%s: %v\n%s", cmd, err, out)
		}
	})
	if fdDriver.err != nil {
		t.Fatalf("building the fd driver: %v", fdDriver.err)
	}
	return fdDriver.path
}

func fdEnv(world int, run, rdzv string, extra ...string) func(int) []string {
	return func(r int) []string {
		return append([]string{
			"MGPU_RANK=" + strconv.Itoa(r), "MGPU_WORLD_SIZE=" + strconv.Itoa(world),
			"MGPU_LOCAL_RANK=" + strconv.Itoa(r), "MGPU_LOCAL_WORLD_SIZE=" + strconv.Itoa(world),
			"MGPU_RUN_DIR=" + run, "MGPU_RDZV_DIR=" + rdzv, "MGPU_EXERCISE=module5/fd-test",
		}, extra...)
	}
}

// Three CPU ranks pass two open files each, then none: every rank must read every other
// rank's files through the descriptors it received.
func TestShareFDs(t *testing.T) {
	bin := buildFDDriver(t)
	for _, world := range []int{1, 3} {
		run, rdzv := t.TempDir(), t.TempDir()
		ranks := make([]int, world)
		for i := range ranks {
			ranks[i] = i
		}
		res := runRanks(t, bin, t.TempDir(), ranks, fdEnv(world, run, rdzv))
		for r := 0; r < world; r++ {
			if res[r].code != 0 {
				t.Fatalf("world %d: rank %d exited %d: %s", world, r, res[r].code, res[r].stderr)
			}
			recs := readRecords(t, filepath.Join(run, fmt.Sprintf("rank-%d.jsonl", r)))
			if ns := strings.Join(notes(recs), "\n"); !strings.Contains(ns, fmt.Sprintf("fds ok: %d ranks", world)) {
				t.Errorf("world %d rank %d notes: %s", world, r, ns)
			}
		}
	}
}

// A rank that offers a different number of descriptors is named, on every rank.
func TestShareFDsCountMismatch(t *testing.T) {
	bin := buildFDDriver(t)
	run, rdzv := t.TempDir(), t.TempDir()
	res := runRanks(t, bin, t.TempDir(), []int{0, 1}, fdEnv(2, run, rdzv), "mismatch")
	for r := 0; r < 2; r++ {
		if res[r].code != 1 {
			t.Fatalf("rank %d exited %d, want 1: %s", r, res[r].code, res[r].stderr)
		}
		e := find(readRecords(t, filepath.Join(run, fmt.Sprintf("rank-%d.jsonl", r))), "error", "", "")
		if e == nil || e.str("where") != "harness" || e.str("call") != "mgpu_share_fds" ||
			!strings.Contains(e.str("msg"), "every rank must share the same number") {
			t.Errorf("rank %d error record: %v", r, e)
		}
	}
}

// A rank that never comes is reported after MGPU_RDZV_TIMEOUT_S, not waited for forever.
func TestShareFDsMissingRank(t *testing.T) {
	bin := buildFDDriver(t)
	run, rdzv := t.TempDir(), t.TempDir()
	res := runRanks(t, bin, t.TempDir(), []int{0, 1}, fdEnv(3, run, rdzv, "MGPU_RDZV_TIMEOUT_S=1"))
	for r := 0; r < 2; r++ {
		if res[r].code != 1 {
			t.Fatalf("rank %d exited %d, want 1: %s", r, res[r].code, res[r].stderr)
		}
		e := find(readRecords(t, filepath.Join(run, fmt.Sprintf("rank-%d.jsonl", r))), "error", "", "")
		if e == nil || e.str("where") != "harness" || !strings.Contains(e.str("msg"), "rank 2") {
			t.Errorf("rank %d error record: %v", r, e)
		}
	}
}
