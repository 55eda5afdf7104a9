package course

import "testing"

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
