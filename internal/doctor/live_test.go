package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// TestLive writes the report for this machine and the repository's course; it runs only with
// MGPU_DOCTOR_LIVE=1 (on the GPU machines), into $MGPU_DOCTOR_OUT when set.
func TestLive(t *testing.T) {
	if os.Getenv("MGPU_DOCTOR_LIVE") == "" {
		t.Skip("set MGPU_DOCTOR_LIVE=1 to report on this machine")
	}
	cache := t.TempDir()
	start := time.Now()
	f, err := probe.Discover(context.Background(), probe.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(start)
	start = time.Now()
	if g, err := probe.Discover(context.Background(), probe.Options{CacheDir: cache}); err != nil || !g.FromCache {
		t.Errorf("second Discover: from cache %v, %v", g != nil && g.FromCache, err)
	}
	t.Logf("probe: %s cold, %s from cache", cold, time.Since(start))

	var c *course.Course
	if root := repoRoot(); root != "" {
		if c, err = course.Load(os.DirFS(root)); err != nil {
			t.Logf("course not loaded (modules left out): %v", err)
			c = nil
		}
	}
	r := Build(f, c)
	var text, js bytes.Buffer
	if err := r.WriteText(&text, true); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	if out := os.Getenv("MGPU_DOCTOR_OUT"); out != "" {
		os.WriteFile(filepath.Join(out, "doctor.txt"), text.Bytes(), 0o644)
		os.WriteFile(filepath.Join(out, "doctor.json"), js.Bytes(), 0o644)
	}
}

// repoRoot is the folder holding go.mod above the working directory.
func repoRoot() string {
	dir, _ := os.Getwd()
	for dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
	return ""
}
