package probe_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe/probetest"
)

// Processes that start together share one probe: the first takes the cache's lock and probes,
// the others wait and read its facts, so a slow `import torch` runs once, not once per process.
// (Discover's calls here stand for the processes; the lock is a file lock, as between them.)
func TestConcurrentDiscoversProbeOnce(t *testing.T) {
	m := probetest.New(t)
	runs := filepath.Join(m.Root, "python-runs")
	line := `MGPU_PROBE {"version": "3.12.3", "executable": "` + filepath.Join(m.Bin, "python3") + `"}`
	out := m.Put("outputs/python3.txt", line+"\n")
	m.Exec(filepath.Join(m.Bin, "python3"), "#!/bin/sh\necho run >> '"+runs+"'\n/bin/sleep 0.5\n/bin/cat '"+out+"'\n")
	opts := m.Options()
	opts.NoCache, opts.CacheDir = false, t.TempDir()

	const n = 6
	facts := make([]*probe.Facts, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); facts[i] = discover(t, opts) }()
	}
	wg.Wait()
	b, _ := os.ReadFile(runs)
	if got := strings.Count(string(b), "run"); got != 1 {
		t.Errorf("the Python probe ran %d times, want 1", got)
	}
	fresh := 0
	for _, f := range facts {
		if f.Python == nil || f.Python.Version != "3.12.3" {
			t.Fatalf("python = %+v", f.Python)
		}
		if !f.FromCache {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of %d discoveries probed, want 1 (the others read its cache)", fresh, n)
	}
}
