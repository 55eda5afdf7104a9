package checker

import "testing"

func TestFaultRank(t *testing.T) {
	for plan, want := range map[string]int{
		"kill:rank=1:after_ms=1500": 1,
		"kill:rank=3":               3,
		"kill:after_ms=10:rank=0":   0,
		"":                          -1,
		"kill:rank=x":               -1,
	} {
		if got := faultRank(plan); got != want {
			t.Errorf("faultRank(%q) = %d, want %d", plan, got, want)
		}
	}
}
