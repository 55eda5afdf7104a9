package csrc

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"
)

// The checker compiles the harness's sources in a directory of their own, with the harness's
// headers only and without the verifier's -DMGPU_VERIFIER (checker/buildstage.go), so that
// their objects are shared by every exercise and by each exercise's verifier. That holds while
// a harness source includes nothing but the harness's headers and system headers, and reads no
// macro the driver's build sets for one program only.
func TestHarnessSourcesCompileAlone(t *testing.T) {
	quoted := regexp.MustCompile(`(?m)^\s*#\s*include\s*"([^"]+)"`)
	headers := map[string]bool{}
	ents, err := fs.ReadDir(FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if ext := path.Ext(e.Name()); ext == ".h" || ext == ".cuh" {
			headers[e.Name()] = true
		}
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		if ext := path.Ext(name); ext != ".c" && ext != ".cu" {
			continue
		}
		n++
		data, err := fs.ReadFile(FS, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range quoted.FindAllStringSubmatch(string(data), -1) {
			if !headers[m[1]] {
				t.Errorf("%s includes %q, which is not a harness header: it would be looked for beside the exercise", name, m[1])
			}
		}
		if strings.Contains(string(data), "MGPU_VERIFIER") {
			t.Errorf("%s reads MGPU_VERIFIER: its object would differ between the rank's program and the verifier", name)
		}
	}
	if n < 5 {
		t.Fatalf("found %d harness sources", n)
	}
}
