package checker

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/runtime/build"
	"github.com/mgpu-learn/mgpu-learn/runtime/confine"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// A learner's program that computes the right sums and, on the way, replaces its own program
// in the build cache (the next check of the same sources would run whatever it wrote there).
// It opens the file with a system call spelled as bytes: the policy stage refuses fopen and
// open in learner objects (rule side), and this test is about the confinement behind it.
const poisonSum = `#include "sum.h"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

static long raw_sys3(long nr, long a, long b, long c) {
  long r;
  __asm__ volatile(".byte 0x0f, 0x05" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}

void vec_sum(const float *a, const float *b, float *out, long n) {
  static int tried;
  long i;
  if (!tried) {
    char self[4096];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    tried = 1;
    if (k > 0) {
      FILE *f;
      self[k] = 0;
      unlink(self);
      f = fdopen((int)raw_sys3(2, (long)self, O_WRONLY | O_CREAT | O_TRUNC, 0755), "w");
      if (f) {
        fputs("poisoned\n", f);
        fclose(f);
      }
    }
  }
  for (i = 0; i < n; i++) out[i] = a[i] + b[i];
}
`

// TestConfinedCachePoison: with Protect, the program cannot touch the build cache (Landlock);
// without, the same program rewrites its cached executable (so the test can fail). The
// harness's code hash happens to see this crude rewrite in the same run; a program that
// rewrote the file after the harness's last look (a child outliving it) would not be seen.
func TestConfinedCachePoison(t *testing.T) {
	if st := confine.Probe(); !st.Applied {
		t.Skip(st.Why)
	}
	c, _ := fixtureChecker(t)
	cc, _ := exec.LookPath("cc")
	e := c.Exercise("module0/sum")
	src := filepath.Join(t.TempDir(), "sum.c")
	if err := os.WriteFile(src, []byte(poisonSum), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, confined := range []bool{true, false} {
		// The cache must lie outside /tmp to be protected: beside the test's sources.
		root, err := os.MkdirTemp(".", "confine-check-")
		if err != nil {
			t.Fatal(err)
		}
		root, _ = filepath.Abs(root)
		defer os.RemoveAll(root)
		if why := confine.ScratchAncestor(root); why != "" {
			t.Skip(why)
		}
		ck := &Checker{
			Course: c, Harness: os.DirFS("../csrc"), Builder: build.NewBuilder(filepath.Join(root, "build")),
			Launcher: launch.New(), Env: &cpuEnv{cc: cc}, WorkDir: filepath.Join(root, "work"),
		}
		if confined {
			ck.Protect = []string{root}
		}
		r := ck.Check(context.Background(), Target{Exercise: e, Files: map[string]string{"sum.c": src}, Label: "yours"})
		if confined && r.Verdict != Passed {
			t.Fatalf("confined=%v: %s at %s: %s\n%s", confined, r.Verdict, r.Stage, r.Headline, r.Message)
		}
		poisoned := false
		filepath.WalkDir(filepath.Join(root, "build"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if b, _ := os.ReadFile(p); bytes.Equal(b, []byte("poisoned\n")) {
					poisoned = true
				}
			}
			return nil
		})
		if confined && (poisoned || !r.Run.Confined) {
			t.Errorf("confined: the cache was rewritten (%v) or the run not confined (%v); notes %q", poisoned, r.Run.Confined, r.Notes)
		}
		if !confined && !poisoned {
			t.Errorf("unconfined: the program did not rewrite the cache, so this test proves nothing")
		}
	}
}
