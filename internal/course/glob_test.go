package course

import (
	"testing"

	"github.com/mgpu-learn/mgpu-learn/exercises"
	"github.com/mgpu-learn/mgpu-learn/lessons"
)

func TestValidGlob(t *testing.T) {
	for p, want := range map[string]bool{
		"nvshmemx_*reduce*": true,
		"nccl*":             false, // four fixed characters catch too much
		"*":                 false,
		"a.b*cdefgh":        false, // not an identifier
		"cudaMemcpy*Peer*":  true,
	} {
		if got := validGlob(p); got != want {
			t.Errorf("validGlob(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestSharedSupportFiles(t *testing.T) {
	c := mustLoad(t, NewFS(lessons.FS, exercises.FS))
	e := c.Exercise("module5/peer-stores")
	if e == nil {
		t.Fatal("no module5/peer-stores in the built-in course")
	}
	found := false
	for _, s := range e.Support {
		if s == "../shared/peer_copy_bench.cuh" {
			found = true
			if _, err := e.ReadFile(s); err != nil {
				t.Errorf("ReadFile(%q): %v", s, err)
			}
		}
	}
	if !found {
		t.Errorf("module5/peer-stores support = %q, want the module's shared header", e.Support)
	}
}
