package checker

import (
	"os"
	"path/filepath"
	"testing"
)

// A materialized source directory that changed after it was written (a program of an earlier
// check rewrote the driver, or planted a module beside it) is written again from the course.
func TestMaterializeRestoresTampered(t *testing.T) {
	k := &check{c: &Checker{WorkDir: t.TempDir()}}
	files := []courseFile{{Name: "driver.py", Data: []byte("h.compare(mem, want)\n")}, {Name: "mgpu_harness.py", Data: []byte("# harness\n")}}
	dir, err := k.materialize(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, tamper := range []func(){
		func() { os.WriteFile(filepath.Join(dir, "driver.py"), []byte("h.compare(want, want)\n"), 0o644) },
		func() { os.WriteFile(filepath.Join(dir, "sitecustomize.py"), []byte("import os\n"), 0o644) },
		func() { os.Remove(filepath.Join(dir, "mgpu_harness.py")) },
	} {
		tamper()
		again, err := k.materialize(files)
		if err != nil {
			t.Fatal(err)
		}
		if again != dir {
			t.Fatalf("directory %s, want %s", again, dir)
		}
		if !sameFiles(dir, files) {
			ents, _ := os.ReadDir(dir)
			t.Fatalf("not restored: %v", ents)
		}
	}
}
