package checker

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Pruning keeps KeepRuns directories, but never one young enough to belong to a check still
// running in another process.
func TestPruneRunsSparesYoungDirectories(t *testing.T) {
	runs := t.TempDir()
	old := time.Now().Add(-3 * time.Hour).Format("20060102-150405")
	young := time.Now().Add(-time.Minute).Format("20060102-150405")
	var names []string
	for i := 0; i < 6; i++ {
		names = append(names, fmt.Sprintf("%s-module0_sum-old%d-x", old, i))
	}
	for i := 0; i < 6; i++ {
		names = append(names, fmt.Sprintf("%s-module0_sum-young%d-x", young, i))
	}
	for _, n := range names {
		if err := os.Mkdir(filepath.Join(runs, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &Checker{KeepRuns: 2}
	c.pruneRuns(runs, filepath.Join(runs, names[len(names)-1]))
	for i, n := range names {
		_, err := os.Stat(filepath.Join(runs, n))
		if gone := os.IsNotExist(err); gone != (i < 6) {
			t.Errorf("%s: removed %v, want %v", n, gone, i < 6)
		}
	}
}
