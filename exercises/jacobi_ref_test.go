package exercises

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestJacobiReference builds testdata/jacobi_ref_test.c with the host C compiler and runs it:
// the CPU reference that module2's Jacobi verifiers compute (module2-mpi/shared/jacobi_ref.h)
// must equal a whole grid swept with the float rule of the exercises' kernels, window by
// window, for 1 to 8 ranks; and a window one row too narrow must show.
func TestJacobiReference(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	bin := filepath.Join(t.TempDir(), "jacobi_ref_test")
	build := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
		"-I", filepath.Join("module2-mpi", "shared"), "-I", filepath.Join("..", "csrc"),
		filepath.Join("testdata", "jacobi_ref_test.c"), "-o", bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("jacobi_ref_test: %v\n%s", err, out)
	}
}
