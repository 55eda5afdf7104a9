package checker

import (
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// A pattern's parts must appear in the opcode in order, the opcode first: the plain, tensor and
// reducing forms of a TMA store match, a TMA load does not.
func TestPTXOpcodeMatches(t *testing.T) {
	const p = "cp.async.bulk.global.shared::cta"
	for op, want := range map[string]bool{
		"cp.async.bulk.global.shared::cta.bulk_group":                       true,
		"cp.async.bulk.tensor.1d.global.shared::cta.bulk_group":             true,
		"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes": false,
		"cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32":        true, // the TMA's too
		"cp.async.bulk.commit_group":                                        false,
		"st.global.v4.u32":                                                  false,
	} {
		if got := ptxOpcodeMatches(op, p); got != want {
			t.Errorf("%s: got %v, want %v", op, got, want)
		}
	}
}

// nvcc's PTX (13.0, sm_90) of module5/tma-peer's reference and of its plain-stores variant:
// the reference holds the bulk store, the variant does not and is named with the file.
func TestPTXRequirements(t *testing.T) {
	reqs := []course.PTXRequirement{{Pattern: "cp.async.bulk.global.shared::cta", Why: "the TMA"}}
	prog := func(ptx string) *program {
		return &program{learner: []learnerFile{{Name: "tma_copy.cu", Show: "tma_copy.cu", PTX: ptx}, {Name: "notes.h", Show: "notes.h"}}}
	}
	if vs, err := ptxRequirementViolations(prog("testdata/ptxrequire/tma-solution.ptx"), reqs); err != nil || len(vs) != 0 {
		t.Errorf("solution: %+v %v", vs, err)
	}
	vs, err := ptxRequirementViolations(prog("testdata/ptxrequire/plain-stores.ptx"), reqs)
	if err != nil || len(vs) != 1 || vs[0].Rule != rulePTX || vs[0].File != "tma_copy.cu" {
		t.Fatalf("plain stores: %+v %v", vs, err)
	}
	if msg := ptxRequirementMessage(vs); !strings.Contains(msg, "No cp.async.bulk.global.shared::cta instruction in the PTX of tma_copy.cu: the TMA.") {
		t.Errorf("message %q", msg)
	}
	if got := PolicyTitle(vs); got != "missing instructions" {
		t.Errorf("title %q", got)
	}
	// A .cu file without its PTX is the runner's error, never a pass.
	if _, err := ptxRequirementViolations(prog(""), reqs); err == nil || !strings.Contains(err.Error(), "no PTX of tma_copy.cu") {
		t.Errorf("no PTX: %v", err)
	}
	// Instructions inline assembly puts on one line are read one by one.
	one := writePTX(t, ".version 9.0\n.visible .entry k()\n{\n\t{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%r1], %r2; @p cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r3], %r4; }\n\tret;\n}\n")
	if vs, err := ptxRequirementViolations(prog(one), reqs); err != nil || len(vs) != 0 {
		t.Errorf("inline assembly: %+v %v", vs, err)
	}
}
