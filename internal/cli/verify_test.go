package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A process whose working directory is under the cache is a leftover; one whose command
// line only mentions the cache path is not.
func TestRanFromCache(t *testing.T) {
	cache := t.TempDir()
	run := filepath.Join(cache, "work", "run-1")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	inside := exec.Command("sleep", "30")
	inside.Dir = run
	mention := exec.Command("sh", "-c", "sleep 30; echo MGPU_LEARN_CACHE="+cache)
	for _, c := range []*exec.Cmd{inside, mention} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer func(c *exec.Cmd) { c.Process.Kill(); c.Wait() }(c)
	}
	time.Sleep(50 * time.Millisecond)
	if !ranFromCache(inside.Process.Pid, cache) {
		t.Errorf("pid %d runs in %s but was not counted", inside.Process.Pid, run)
	}
	if ranFromCache(mention.Process.Pid, cache) {
		t.Errorf("pid %d only mentions the cache but was counted", mention.Process.Pid)
	}
	found := false
	for _, l := range leftovers(filepath.Join(cache, "work")) {
		if l[:4+len(strconv.Itoa(inside.Process.Pid))] == "pid "+strconv.Itoa(inside.Process.Pid) {
			found = true
		}
	}
	if !found {
		t.Error("leftovers missed the process running in the work directory")
	}
}
