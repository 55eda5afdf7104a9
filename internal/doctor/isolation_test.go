package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Whether a rank could trace its verifier comes from Yama's setting, read as the kernel gives it.
func TestPtraceScopeAndVerifierLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		path string
		want int
	}{
		{write("one", "1\n"), 1},
		{write("zero", "0\n"), 0},
		{write("junk", "x\n"), -1},
		{filepath.Join(dir, "missing"), -1},
	} {
		if got := ptraceScope(tc.path); got != tc.want {
			t.Errorf("ptraceScope(%s) = %d, want %d", filepath.Base(tc.path), got, tc.want)
		}
	}
	p := &printer{plain: true}
	for scope, want := range map[int]string{1: "cannot trace its verifier", 0: "could reach into its verifier's memory", -1: "no Yama"} {
		if got := verifierIsolation(scope, p); !strings.Contains(got, want) {
			t.Errorf("scope %d: %q lacks %q", scope, got, want)
		}
	}
}
