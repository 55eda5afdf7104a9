package checker

import (
	"strings"
	"testing"
)

// A record the driver failed on its own finding (a call count, memory kept, a case it did not
// run) while every compared element was right must not read as wrong elements.
func TestCorrectnessMessageDriverFinding(t *testing.T) {
	found := CaseResult{Case: "small", Rank: 0, N: 48, Checked: 768, Msg: "forward made 2 all_reduce calls"}
	notRun := CaseResult{Case: "wide", Rank: 0, N: 96, Msg: "not run: after case small, ..."}
	h := correctnessHeadline([]CaseResult{found, notRun})
	if !strings.Contains(h, "failed a check of the driver (the 768 checked elements were right)") || strings.Contains(h, "elements wrong") {
		t.Errorf("headline %q", h)
	}
	m := correctnessMessage([]CaseResult{found, notRun}, []CaseResult{found, notRun})
	for _, want := range []string{"were right where compared", "Case small (n=48), rank 0: failed a check of the driver (the 768 checked elements were right).",
		"Case wide (n=96), rank 0: failed a check of the driver.", "forward made 2 all_reduce calls"} {
		if !strings.Contains(m, want) {
			t.Errorf("message lacks %q:\n%s", want, m)
		}
	}
	if strings.Contains(m, "computed a wrong result") || strings.Contains(m, "elements wrong") {
		t.Errorf("message speaks of wrong elements:\n%s", m)
	}
	// One record with wrong elements: the message is about wrong results again.
	wrong := CaseResult{Case: "odd", Rank: 1, N: 45, Checked: 10, Bad: 2}
	m = correctnessMessage([]CaseResult{wrong, found}, nil)
	if !strings.Contains(m, "Your code computed a wrong result.") || !strings.Contains(m, "2 of 10 checked elements wrong") ||
		!strings.Contains(m, "failed a check of the driver (the 768") {
		t.Errorf("mixed records:\n%s", m)
	}
	if h := correctnessHeadline([]CaseResult{wrong}); !strings.Contains(h, "2 of 10 checked elements wrong") {
		t.Errorf("headline %q", h)
	}
}
