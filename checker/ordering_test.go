package checker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writePTX(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.ptx")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The rule on hand-made functions: what counts as a signal and a wait, and what orders them.
func TestOrderingFindings(t *testing.T) {
	const head = ".version 9.0\n.target sm_90\n.address_size 64\n"
	cases := []struct {
		name string
		body string
		want []string // "kind instr"
	}{
		{"release and acquire", `.visible .entry k(
)
{
	st.global.f32 [%rd1], %f1;
	atom.add.release.sys.u32 %r1, [%rd2], 1;
$L__BB0_1:
	ld.acquire.sys.b32 %r2, [%rd3];
	@%p1 bra $L__BB0_1;
	ret;
}`, nil},
		{"relaxed signal and wait", `.visible .entry k(
)
{
	atom.sys.add.u32 %r1, [%rd2], 1;
$L__BB0_1:
	ld.relaxed.sys.b32 %r2, [%rd3];
	setp.lt.u32 %p1, %r2, %r3;
	@%p1 bra $L__BB0_1;
	ld.global.f32 %f1, [%rd4];
	ret;
}`, []string{"signal atom.sys.add.u32", "wait ld.relaxed.sys.b32"}},
		{"a relaxed wait with nothing read or written after it in the kernel is left alone", `.visible .entry k(
)
{
	red.release.sys.global.add.u32 [%rd2], 1;
$L__BB0_1:
	ld.relaxed.sys.b32 %r2, [%rd3];
	setp.lt.u32 %p1, %r2, %r3;
	@%p1 bra $L__BB0_1;
	st.volatile.global.u32 [%rd3], 0;
	ret;
}`, nil},
		{"a device function's relaxed wait before it returns: its caller reads next", `.visible .func _Z4waitPj(
	.param .b64 p
)
{
$L__BB0_1:
	ld.relaxed.sys.global.u32 %r2, [%rd3];
	setp.lt.u32 %p1, %r2, %r3;
	@%p1 bra $L__BB0_1;
	ret;
}`, []string{"wait ld.relaxed.sys.global.u32"}},
		{"printf after a wait reads nothing of a peer's", `.visible .entry k(
)
{
$L__BB0_1:
	ld.relaxed.sys.global.u32 %r2, [%rd3];
	setp.lt.u32 %p1, %r2, %r3;
	@%p1 bra $L__BB0_1;
	{
	.param .b64 param0;
	st.param.b64 [param0], %rd1;
	.param .b32 retval0;
	call.uni (retval0), 
	vprintf, 
	(
	param0, 
	param1
	);
	}
	ret;
}`, nil},
		{"another call after a wait may read", `.visible .entry k(
)
{
$L__BB0_2:
	ld.relaxed.sys.global.u32 %r4, [%rd5];
	setp.lt.u32 %p2, %r4, %r3;
	@%p2 bra $L__BB0_2;
	call.uni 
	_Z6helperPf, 
	(
	param0
	);
	ret;
}`, []string{"wait ld.relaxed.sys.global.u32"}},
		{"inline assembly with several statements on a line: each is read", `.visible .entry k(
)
{
	st.global.f32 [%rd1], %f1;
	// begin inline asm
	{ .reg .b32 t; mov.u32 t, 1; st.relaxed.sys.global.u32 [%rd2], t; }
	// end inline asm
	fence.sc.sys; st.global.f32 [%rd1], %f2; L1: red.release.sys.global.add.u32 [%rd3], 1;
	ret;
}`, []string{"signal st.relaxed.sys.global.u32"}},
		{"a fence before the data writes does not order them", `.visible .entry k(
)
{
	fence.sc.sys;
	st.global.v4.f32 [%rd1], {%f1, %f2, %f3, %f4};
	atom.sys.add.u32 %r1, [%rd2], 1;
	ret;
}`, []string{"signal atom.sys.add.u32"}},
		{"a fence on one branch only", `.visible .entry k(
)
{
	st.global.f32 [%rd1], %f1;
	setp.eq.s32 %p1, %r1, 0;
	@%p1 bra $L__BB0_2;
	membar.sys;
$L__BB0_2:
	st.relaxed.sys.global.u32 [%rd2], %r1;
	ret;
}`, []string{"signal st.relaxed.sys.global.u32"}},
		{"a fence on both branches", `.visible .entry k(
)
{
	st.global.f32 [%rd1], %f1;
	setp.eq.s32 %p1, %r1, 0;
	@%p1 bra $L__BB0_2;
	membar.sys;
	bra.uni $L__BB0_3;
$L__BB0_2:
	fence.sc.sys;
$L__BB0_3:
	st.relaxed.sys.global.u32 [%rd2], %r1;
	ret;
}`, nil},
		{"a guarded fence orders a signal under the same guard, until the guard changes", `.visible .entry k(
)
{
	st.global.f32 [%rd1], %f1;
	setp.eq.s32 %p1, %r1, 0;
	@%p1 fence.sc.sys;
	@%p1 red.relaxed.sys.global.add.u32 [%rd2], 1;
	@!%p1 red.relaxed.sys.global.add.u32 [%rd3], 1;
	setp.eq.s32 %p1, %r2, 0;
	@%p1 atom.relaxed.sys.exch.b32 %r4, [%rd4], 1;
	@%p1 fence.sc.sys;
	setp.eq.and.s32 %p2|%p1, %r2, 0, %p3;
	@%p1 atom.relaxed.sys.exch.b32 %r5, [%rd5], 1;
	ret;
}`, []string{"signal red.relaxed.sys.global.add.u32", "signal atom.relaxed.sys.exch.b32", "signal atom.relaxed.sys.exch.b32"}},
		{"a fence after the reads that follow a wait is too late; one before them is not", `.visible .entry k(
)
{
$L__BB0_1:
	ld.relaxed.sys.global.u32 %r2, [%rd3];
	setp.lt.u32 %p1, %r2, %r3;
	@%p1 bra $L__BB0_1;
	ld.global.nc.f32 %f1, [%rd4];
	fence.acq_rel.sys;
$L__BB0_2:
	atom.sys.cas.b32 %r5, [%rd5], 1, 1;
	setp.ne.u32 %p2, %r5, 1;
	@%p2 bra $L__BB0_2;
	fence.acq_rel.sys;
	ld.global.f32 %f2, [%rd4];
	ret;
}`, []string{"wait ld.relaxed.sys.global.u32"}},
		{"a read on a path that skips the fence", `.visible .entry k(
)
{
$L__BB0_1:
	ld.relaxed.sys.global.u32 %r2, [%rd3];
	setp.lt.u32 %p1, %r2, %r3;
	@%p1 bra $L__BB0_1;
	@%p3 bra $L__BB0_2;
	fence.sc.sys;
$L__BB0_2:
	cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd4], 4096, [%r2];
	ret;
}`, []string{"wait ld.relaxed.sys.global.u32"}},
		{"a TMA store to a peer is data a signal must follow a fence", `.visible .entry k(
)
{
	fence.sc.sys;
	cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r1], 4096;
	cp.async.bulk.wait_group 0;
	st.relaxed.sys.global.u32 [%rd2], %r1;
	ret;
}`, []string{"signal st.relaxed.sys.global.u32"}},
		{"fences make relaxed flags right", `.visible .entry k(
)
{
	fence.acq_rel.sys;
	st.relaxed.sys.u32 [%rd2], %r1;
$L__BB0_1:
	atom.relaxed.sys.cas.b32 %r2, [%rd3], 0, 0;
	@%p1 bra $L__BB0_1;
	membar.sys;
	ret;
}`, nil},
		{"a fence after a signal does not order it; a gpu fence is not enough", `.visible .entry k(
)
{
	fence.acq_rel.gpu;
	red.relaxed.sys.global.add.u32 [%rd2], 1;
	fence.sc.sys;
	ret;
}`, []string{"signal red.relaxed.sys.global.add.u32"}},
		{"float atomics are data; one function's fence does not order another's flag", `.visible .entry a(
)
{
	red.relaxed.sys.global.add.f32 [%rd2], %f1;
	atom.add.sys.bf16x2 %r1, [%rd2], %r3;
	fence.sc.sys;
	ret;
}
.visible .func (.param .b32 func_retval0) _Z6signalPj(
	.param .b64 p
)
{
	@%p2 st.relaxed.sys.global.u32 [%rd2], %r1;
	ret;
}`, []string{"signal st.relaxed.sys.global.u32"}},
	}
	for _, c := range cases {
		found, err := orderingFindings(writePTX(t, head+c.body))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range found {
			got = append(got, f.Kind+" "+f.Instr)
		}
		if strings.Join(got, "; ") != strings.Join(c.want, "; ") {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

// nvcc's own PTX of module5/flag-barrier (nvcc 13.0, -rdc=true -arch=sm_90): the reference
// solution passes, the relaxed-flag variant (atomicAdd_system for the count) is found, and the
// policy message names the file and the function.
func TestOrderingOnFlagBarrierPTX(t *testing.T) {
	ok, err := orderingFindings("testdata/ordering/flag-barrier-solution.ptx")
	if err != nil || len(ok) != 0 {
		t.Fatalf("solution: %+v %v", ok, err)
	}
	prog := &program{learner: []learnerFile{{Name: "exchange_tile.cu", Show: "exchange_tile.cu", PTX: "testdata/ordering/flag-barrier-relaxed-flag.ptx"}}}
	vs, err := orderingViolations(prog)
	if err != nil || len(vs) != 1 {
		t.Fatalf("relaxed-flag: %+v %v", vs, err)
	}
	v := vs[0]
	if v.Symbol != "atom.sys.add.u32" || v.File != "exchange_tile.cu" || v.Rule != ruleOrdering ||
		!strings.Contains(v.Why, "exchange_tile(") || !strings.Contains(v.Why, "release") {
		t.Errorf("violation %+v", v)
	}
	if msg := orderingMessage(vs); !strings.Contains(msg, "atom.sys.add.u32 (in exchange_tile.cu)") {
		t.Errorf("message %q", msg)
	}
}

// nvcc's PTX (13.0, sm_90) of correct flag code written three common ways
// (testdata/ordering/correct-patterns.cu): cuda::atomic_ref with its default seq_cst order
// (a fence.sc.sys before relaxed or acquire instructions), atomicAdd_system and a volatile wait
// between __threadfence_system() calls, a CAS loop between fences, every thread fencing before
// the block meets and one signals, one thread waiting and fencing before the block meets and
// reads, printf after a relaxed wait, release signals to every peer in a loop. None is refused. (vprintf's declaration ends on a line
// of its own with ";", which once crashed the reader.)
func TestOrderingAcceptsCorrectPatterns(t *testing.T) {
	found, err := orderingFindings("testdata/ordering/correct-patterns.ptx")
	if err != nil || len(found) != 0 {
		t.Fatalf("findings %+v, err %v", found, err)
	}
}

// nvcc's PTX (13.0, sm_90) of flag code that has a system fence in the wrong place
// (testdata/ordering/wrong-patterns.cu): before the data writes, on one branch of an if, after
// the reads that follow the wait, no fence before a call of a function that is not inlined; a
// spin on a volatile load with no fence after it; relaxed signals to every peer in a loop (a
// loop, not a spin). Each is found, in its function.
func TestOrderingFindsMisplacedFences(t *testing.T) {
	found, err := orderingFindings("testdata/ordering/wrong-patterns.ptx")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range found { // the kinds found in each function (an unrolled loop repeats one)
		if fn := ptxFuncLabel(f.Func); !strings.Contains(got[fn], f.Kind+" ") {
			got[fn] += f.Kind + " "
		}
	}
	want := map[string]string{"fence_before_data()": "signal ", "fence_one_branch()": "signal ", "fence_after_reads()": "wait ",
		"call_after_wait()": "wait ", "volatile_spin()": "wait ", "relaxed_peer_loop()": "signal "}
	if len(got) != len(want) {
		t.Errorf("findings %+v", found)
	}
	for fn, k := range want {
		if got[fn] != k {
			t.Errorf("%s: got %q, want %q (all: %+v)", fn, got[fn], k, found)
		}
	}
}

// The report's heading says what kind of policy findings it lists.
func TestPolicyTitle(t *testing.T) {
	ord := Violation{Symbol: "atom.sys.add.u32", Rule: ruleOrdering}
	call := Violation{Symbol: "ncclAllReduce"}
	if got := PolicyTitle([]Violation{ord}); got != "relaxed flags between GPUs" {
		t.Errorf("ordering only: %q", got)
	}
	if got := PolicyTitle([]Violation{ord, call}); got != "forbidden calls" {
		t.Errorf("mixed: %q", got)
	}
}

// A learner .cu file without its PTX stops the rule with an error (the runner's), never a pass.
func TestOrderingNeedsThePTX(t *testing.T) {
	prog := &program{learner: []learnerFile{{Name: "one_shot.cu", Show: "one_shot.cu"}, {Name: "notes.h", Show: "notes.h"}}}
	if _, err := orderingViolations(prog); err == nil || !strings.Contains(err.Error(), "no PTX of one_shot.cu") {
		t.Errorf("err %v", err)
	}
}

// Function names in the report are the learner's: free, nested and anonymous-namespace ones.
func TestPTXFuncLabel(t *testing.T) {
	for in, want := range map[string]string{
		"_Z13exchange_tilePK9symm_viewPKfxj":                                               "exchange_tile()",
		"_ZN44_GLOBAL__N__c1df9da7_11_one_shot_cu_145d97f115one_shot_kernelE7ar_viewPfxji": "one_shot_kernel()",
		"_ZN2ns6kernelEv": "kernel()",
		"plain_c_kernel":  "plain_c_kernel()",
		"_ZN9":            "_ZN9()",
	} {
		if got := ptxFuncLabel(in); got != want {
			t.Errorf("ptxFuncLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// Triton 3.6's PTX (sm_90, compiled on an H200 by scripts/triton-ptx-harvest.py) of
// module6/symm-mem's reference and variants and module7/fused's reference: Triton writes the
// flags through inline PTX guarded by one thread's predicate, passes a spin's value to the other
// threads through shared memory, and puts .file after the functions. The reference solutions
// pass; relaxed flags, a volatile spin and one relaxed barrier of two are found at their lines.
func TestOrderingOnTritonPTX(t *testing.T) {
	for file, want := range map[string][]string{
		"symm-mem-solution":              nil,
		"symm-mem-no-final-barrier":      nil,
		"fused-solution":                 nil,
		"symm-mem-relaxed-signal":        {"signal atom.global.sys.relaxed.exch.b32 symm_allreduce.py:39", "wait ld.global.sys.relaxed.b32 symm_allreduce.py:45", "wait ld.global.sys.relaxed.b32 symm_allreduce.py:47"},
		"symm-mem-first-barrier-relaxed": {"signal atom.global.sys.relaxed.exch.b32 symm_allreduce.py:59", "wait ld.global.sys.relaxed.b32 symm_allreduce.py:63", "wait ld.global.sys.relaxed.b32 symm_allreduce.py:65"},
		"symm-mem-volatile-wait":         {"wait ld.volatile.global.b32 symm_allreduce.py:46", "wait ld.volatile.global.b32 symm_allreduce.py:48"},
	} {
		found, err := orderingFindings("testdata/ordering/triton/" + file + ".ptx")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, f := range found {
			got[f.Kind+" "+f.Instr+" "+f.Where] = true
		}
		if len(got) != len(want) {
			t.Errorf("%s: got %v, want %v", file, got, want)
			continue
		}
		for _, w := range want {
			if !got[w] {
				t.Errorf("%s: missing %q (got %v)", file, w, got)
			}
		}
	}
}

// After a run, the PTX in each rank's Triton cache (<run dir>/triton-cache-rank<r>-<pid>) is
// read: a relaxed flag fails that rank's case "ordering" with Triton's fix; the other rank's
// case and other cases stay as the driver recorded them.
func TestTritonOrderingFailsTheCase(t *testing.T) {
	dir := t.TempDir()
	put := func(sub, src string) {
		data, err := os.ReadFile("testdata/ordering/triton/" + src + ".ptx")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("triton-cache-rank0-41/AB12/_one_shot_kernel.ptx", "symm-mem-solution")
	put("triton-cache-rank1-42/CD34/_one_shot_kernel.ptx", "symm-mem-volatile-wait")
	put("not-a-cache/x.ptx", "symm-mem-relaxed-signal")
	rows := []CaseResult{{Case: "ordering", Rank: 0, OK: true}, {Case: "ordering", Rank: 1, OK: true}, {Case: "one", Rank: 1, OK: true}}
	if err := tritonOrdering(dir, rows); err != nil {
		t.Fatal(err)
	}
	if !rows[0].OK || rows[0].Msg != "" || !rows[2].OK {
		t.Errorf("rows that should stay: %+v", rows)
	}
	if rows[1].OK || !strings.Contains(rows[1].Msg, "ld.volatile.global.b32 (in symm_allreduce.py:46)") ||
		!strings.Contains(rows[1].Msg, `sem=\"acquire\"`) && !strings.Contains(rows[1].Msg, `sem="acquire"`) ||
		!strings.Contains(rows[1].Msg, "_one_shot_kernel()") {
		t.Errorf("rank 1: %+v", rows[1])
	}
	if err := tritonOrdering(filepath.Join(dir, "absent"), rows); err == nil {
		t.Error("a run directory that cannot be read must be an error")
	}
}

// The correctness stage of a python exercise with `ordering: system` reads the run's Triton
// caches: the driver's ordering case said ok on both ranks, rank 1's PTX has a volatile spin,
// and the check fails at correctness on that case with the instruction and the line.
func TestCorrectnessReadsTritonPTX(t *testing.T) {
	m := strings.Replace(baseManifest, "  - {name: small, n: 8}\n", "  - {name: ordering, n: 1}\n  - {name: small, n: 8}\n", 1)
	e := loadFake(t, m)
	e.Kind, e.Ordering = "python", "system" // what the stage looks at; the rest is the fake's
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/ordering/triton/symm-mem-volatile-wait.ptx")
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "triton-cache-rank1-77", "EF56")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "_one_shot_kernel.ptx"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ok := true
	rec := func(name string, n int64) record { return record{Case: name, N: n, OK: &ok, Checked: n} }
	rr := &runResult{dir: dir, records: []*rankRecords{
		{Rank: 0, Cases: []record{rec("ordering", 1), rec("small", 8), rec("big", 64)}},
		{Rank: 1, Cases: []record{rec("ordering", 1), rec("small", 8)}},
	}}
	c := &Checker{Env: &fakeEnv{gpus: 2}}
	k := c.newCheck(Target{Exercise: e, Label: "yours"}, Stages)
	if k.correctness(rr) {
		t.Fatal("passed")
	}
	expect(t, k.rep, Failed, StageCorrectness, FaultYou, "case ordering", "rank 1", "ld.volatile.global.b32", "symm_allreduce.py:46")
	// Without the rule the same records pass.
	e.Ordering = ""
	k = c.newCheck(Target{Exercise: e, Label: "yours"}, Stages)
	if !k.correctness(rr) {
		t.Fatalf("without ordering: %s", k.rep.Message)
	}
}
