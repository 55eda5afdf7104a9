package cli

import (
	"fmt"
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
	for _, l := range leftovers(filepath.Join(cache, "work"), "") {
		if l[:4+len(strconv.Itoa(inside.Process.Pid))] == "pid "+strconv.Itoa(inside.Process.Pid) {
			found = true
		}
	}
	if !found {
		t.Error("leftovers missed the process running in the work directory")
	}
}

// With a session key, only the processes started with it count: a concurrent mgpu-learn on the
// same cache (here: a process in the work directory without the key, or with another one) is
// not this run's leftover.
func TestLeftoversOfThisSessionOnly(t *testing.T) {
	cache := t.TempDir()
	run := filepath.Join(cache, "work", "run-1")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(env ...string) *exec.Cmd {
		c := exec.Command("sleep", "30")
		c.Dir = run
		c.Env = append(os.Environ(), env...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
	t.Setenv(sessionEnv, "")
	key := markSession()
	if key == "" || os.Getenv(sessionEnv) != key {
		t.Fatalf("markSession gave %q, environment has %q", key, os.Getenv(sessionEnv))
	}
	ours := start() // inherits the key from this process's environment
	theirs := start(sessionEnv + "=someone-else")
	none := start(sessionEnv + "=")
	time.Sleep(50 * time.Millisecond)
	got := map[int]bool{}
	for _, l := range leftovers(filepath.Join(cache, "work"), key) {
		var pid int
		if _, err := fmt.Sscanf(l, "pid %d:", &pid); err == nil {
			got[pid] = true
		}
	}
	if !got[ours.Process.Pid] {
		t.Errorf("pid %d carries this session's key and runs in the work directory: not counted", ours.Process.Pid)
	}
	for _, c := range []*exec.Cmd{theirs, none} {
		if got[c.Process.Pid] {
			t.Errorf("pid %d belongs to another session but was counted", c.Process.Pid)
		}
	}
	if again := markSession(); again == key {
		t.Error("a second invocation got the same session key")
	}
}
