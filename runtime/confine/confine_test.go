package confine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A confined shell tries every way of changing the protected tree and reports which worked;
// the writable exception and the rest of the file system stay writable, and the process that
// started it is not confined itself.
func TestStartConfines(t *testing.T) {
	if st := Probe(); !st.Applied {
		t.Skip(st.Why)
	}
	base := outsideScratch(t)
	prot := filepath.Join(base, "cache")
	if why := scratchAncestor([]string{prot}); why != "" {
		t.Skip("the sources lie in a scratch directory: " + why)
	}
	run := filepath.Join(prot, "work", "run-1")
	free := filepath.Join(base, "elsewhere")
	for _, d := range []string{run, filepath.Join(prot, "build", "ab"), free} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog := filepath.Join(prot, "build", "ab", "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho honest\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `
try() { if ( eval "$2" ) 2>/dev/null; then echo "$1 ok"; else echo "$1 refused"; fi; }
try overwrite 'echo forged > cache/build/ab/prog'
try append 'echo forged >> cache/build/ab/prog'
try truncate ': > cache/build/ab/prog'
try remove 'rm -f cache/build/ab/prog && test ! -e cache/build/ab/prog'
try rename 'mv cache/build/ab/prog cache/build/ab/prog2'
try create 'echo x > cache/build/ab/new'
try mkdir 'mkdir cache/build/cd'
try move-out 'mv cache/build elsewhere/b'
try link-out 'ln cache/build/ab/prog elsewhere/hard'
try symlink-in 'ln -s /bin/sh cache/build/ab/sh'
try run 'cache/build/ab/prog'
try run-dir 'echo x > cache/work/run-1/rank-0 && mkdir cache/work/run-1/rdzv'
try elsewhere 'echo x > elsewhere/f && mkdir elsewhere/d'
`
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = base
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	st, err := Start(cmd, &Rules{Protect: []string{prot}, Writable: []string{run}})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Applied {
		t.Fatalf("not confined: %s", st.Why)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			got[f[0]] = f[1]
		}
	}
	want := map[string]string{"overwrite": "refused", "append": "refused", "truncate": "refused",
		"remove": "refused", "rename": "refused", "create": "refused", "mkdir": "refused",
		"move-out": "refused", "link-out": "refused", "symlink-in": "refused", "run": "ok",
		"run-dir": "ok", "elsewhere": "ok"}
	if st.ABI < 2 {
		delete(want, "link-out") // linking across directories is judged from ABI 2 on
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q\n%s", k, got[k], v, out.String())
		}
	}
	if b, _ := os.ReadFile(prog); string(b) != "#!/bin/sh\necho honest\n" {
		t.Errorf("the protected program changed: %q", b)
	}
	// The starting process and its other threads are not confined.
	if err := os.WriteFile(filepath.Join(prot, "build", "ab", "after"), []byte("x"), 0o644); err != nil {
		t.Errorf("the parent lost its own access: %v", err)
	}
}

// outsideScratch is a fresh directory beside the test's sources: a protected directory in
// /tmp is refused (TestScratchRefused).
func outsideScratch(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp(".", "confine-test-")
	if err != nil {
		t.Fatal(err)
	}
	d, _ = filepath.Abs(d)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestScratchRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache") // in /tmp (or $TMPDIR)
	cmd := exec.Command("true")
	st, err := Start(cmd, &Rules{Protect: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if st.Applied || !strings.Contains(st.Why, "free to create files") {
		t.Fatalf("a cache in the scratch directory: %+v", st)
	}
}

func TestRulesChecked(t *testing.T) {
	base := t.TempDir()
	_, err := Start(exec.Command("true"), &Rules{Protect: []string{filepath.Join(base, "a")}, Writable: []string{filepath.Join(base, "b")}})
	if err == nil || !strings.Contains(err.Error(), "not beneath") {
		t.Fatalf("want a 'not beneath' error, got %v", err)
	}
	cmd := exec.Command("true")
	st, err := Start(cmd, nil)
	if err != nil || st.Applied {
		t.Fatalf("nil rules: %+v %v", st, err)
	}
	cmd.Wait()
}
