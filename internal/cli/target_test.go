package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// Two checks of different variants at once (two processes sharing the cache's work
// directory) must not write the course's files into the same place: one would build the
// other's code. Every target gets a directory of its own, removed by its cleanup.
func TestTargetsNeverShareFiles(t *testing.T) {
	c, err := course.Load(os.DirFS(filepath.Join("..", "..", "testdata", "fixture-course")))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Exercise("module0/sum")
	if e == nil {
		t.Fatal("no module0/sum in the fixture course")
	}
	work := t.TempDir()
	a := &App{}
	type got struct {
		path    string
		data    []byte
		cleanup func()
	}
	var all []got
	for _, o := range []checkOptions{
		{Variant: "off-by-one"}, {Variant: "exit1"}, {Solution: true}, {Variant: "off-by-one"}, {Solution: true},
	} {
		tg, cleanup, err := a.target(e, nil, o, work)
		if err != nil {
			t.Fatal(err)
		}
		p := tg.Files["sum.c"]
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range all {
			if filepath.Dir(g.path) == filepath.Dir(p) {
				t.Fatalf("%+v shares its directory %s with an earlier target", o, filepath.Dir(p))
			}
		}
		all = append(all, got{p, data, cleanup})
	}
	// Each file still holds what its own target wrote, after the later ones were written.
	for i, g := range all {
		now, err := os.ReadFile(g.path)
		if err != nil || !bytes.Equal(now, g.data) {
			t.Errorf("target %d: %s changed under it (%v)", i, g.path, err)
		}
	}
	if bytes.Equal(all[0].data, all[1].data) || bytes.Equal(all[0].data, all[2].data) {
		t.Error("the fixture's variants and solution should differ")
	}
	for _, g := range all {
		g.cleanup()
		if _, err := os.Stat(filepath.Dir(g.path)); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", filepath.Dir(g.path), err)
		}
	}
}
