package checker

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The memory-ordering rule (manifest `ordering: system`) reads the PTX nvcc made of the
// learner's .cu files (runtime/build keeps it) for flags between GPUs used with relaxed order.
// A signal that nothing orders after the data, or a spin wait that nothing orders before the
// reads that follow it, is a race: it passes most runs, on two PEs of one GPU every run
// (docs/validation/nvidia-1gpu-2hosts), and no test can be sure to catch it. The instructions
// say it outright, so the rule needs no luck. Following every path of a function's control
// flow, it refuses
//
//   - a signal: a system-scope store or reduction, or a system-scope atomic that is not a
//     wait, whose order is relaxed (PTX's default for atom and red), unless on every path to
//     it a system-scope fence (fence.sc.sys, fence.acq_rel.sys, membar.sys) comes after the
//     last data write;
//   - a wait: a system-scope load, or a system-scope atomic whose value decides a branch of a
//     loop around it (a spin), whose order is relaxed, or a volatile load that spins (volatile
//     orders nothing), when a path from it reaches a data read or write with no such fence
//     between.
//
// Data is what global (or generic) memory holds apart from flags: plain loads and stores,
// floating-point atomics (a sum made in a peer's buffer), TMA copies (cp.async), and a call
// (printf's and assert's aside). Flags are integer accesses with a scope or volatile ones, and
// integer atomics. A spin's value is followed through registers and through shared memory,
// where Triton passes one thread's load to the others. A fence that is guarded by a predicate
// orders accesses guarded by the same predicate, until it changes. The end of a kernel orders
// what a later kernel reads; a device function's return is an access (its caller's reads come
// next). What the rule cannot see it refuses, never passes: a fence in a caller when the signal
// is in a separate (non-inlined) function counts for nothing there. It never refuses code
// whose flags carry release and acquire.
//
// The same rule reads the PTX Triton compiled during a run (tritonOrdering): Triton writes
// flags through inline PTX guarded by one thread's predicate, which the paths above cover.

// orderingFinding is one relaxed flag operation of the learner's PTX.
type orderingFinding struct {
	Instr string // the PTX instruction's opcode, "atom.sys.add.u32"
	Func  string // the PTX function it is in
	Where string // the source line from the PTX's .loc ("exchange_tile.cu:19"), "" when absent
	Kind  string // "signal" or "wait"
}

var (
	ptxFuncStart = regexp.MustCompile(`^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\b`)
	ptxFuncName  = regexp.MustCompile(`([A-Za-z_$][\w$]*)\s*\(`)
	ptxFile      = regexp.MustCompile(`^\s*\.file\s+(\d+)\s+"([^"]*)"`)
	ptxLoc       = regexp.MustCompile(`^\s*\.loc\s+(\d+)\s+(\d+)`)
	ptxLabel     = regexp.MustCompile(`^\s*([A-Za-z_$][\w$]*):`)
)

// ptxInstr is one instruction of a function: its index in the function, opcode, the modifiers
// of the opcode, its guard predicate ("%p1", "!%p1", "" when unguarded), the registers it
// writes and reads, the function a call calls, the branch target (bra) and the source place.
type ptxInstr struct {
	i      int
	op     string
	mods   map[string]bool
	full   string
	pred   string
	dests  []string // registers written
	srcs   []string // registers read (the guard predicate too)
	callee string
	target string
	where  string
}

// orderingFindings reads one PTX file.
func orderingFindings(path string) ([]orderingFinding, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	files := map[string]string{}
	var out []orderingFinding
	var fn string
	entry := false
	var body []ptxInstr
	labels := map[string]int{}
	where, carry := "", ""
	flush := func() {
		out = append(out, relaxedFlags(fn, entry, body, labels)...)
		body, labels = nil, map[string]int{}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 0; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if m := ptxFile.FindStringSubmatch(line); m != nil {
			files[m[1]] = filepath.Base(m[2])
			continue
		}
		if m := ptxLoc.FindStringSubmatch(line); m != nil {
			where = m[1] + ":" + m[2] // file number: resolved at the end (Triton puts .file last)
			continue
		}
		if ptxFuncStart.MatchString(line) {
			flush()
			fn, entry = "", strings.Contains(line, ".entry")
			if m := ptxFuncName.FindAllStringSubmatch(line, -1); len(m) > 0 {
				fn = m[len(m)-1][1]
			}
			continue
		}
		if m := ptxLabel.FindStringSubmatch(line); m != nil {
			labels[m[1]] = len(body)
			continue
		}
		var stmts []string
		stmts, carry = ptxStatements(line, carry)
		for _, t := range stmts {
			words := strings.Fields(strings.ReplaceAll(t, ",", " "))
			for len(words) > 0 && strings.HasSuffix(words[0], ":") { // a label inside inline assembly
				labels[strings.TrimSuffix(words[0], ":")] = len(body)
				words = words[1:]
			}
			pred := ""
			if len(words) > 0 && strings.HasPrefix(words[0], "@") { // a predicate: @%p1 or @!%p1
				pred, words = words[0][1:], words[1:]
			}
			if len(words) == 0 || strings.HasPrefix(words[0], ".") {
				continue
			}
			body = append(body, ptxInstruction(len(body), words, pred, where))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	for i := range out {
		if num, line, ok := strings.Cut(out[i].Where, ":"); ok {
			out[i].Where = ""
			if name := files[num]; name != "" && line != "0" {
				out[i].Where = name + ":" + line
			}
		}
	}
	return out, nil
}

// ptxStatements splits a PTX line (its comment already cut off) into the statements it ends,
// after carry, the start of a statement an earlier line left open (nvcc spreads a call's
// operands over lines). Inline assembly can put several statements on a line. A part that does
// not start an instruction (a directive, a parameter list, a brace) carries nothing over.
func ptxStatements(line, carry string) (stmts []string, rest string) {
	text := strings.TrimSpace(carry + " " + line)
	parts := strings.Split(text, ";")
	for i, p := range parts {
		p = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(p), "{}"))
		if i == len(parts)-1 { // not ended on this line
			if p != "" && (p[0] == '@' || p[0] >= 'a' && p[0] <= 'z') {
				rest = p
			}
			break
		}
		if p != "" && !strings.HasPrefix(p, ")") && !strings.HasPrefix(p, "(") {
			stmts = append(stmts, p)
		}
	}
	return stmts, rest
}

// ptxInstruction makes the instruction at index i of its function from its words (the opcode
// first, the guard predicate pred taken off) at source place where.
func ptxInstruction(i int, words []string, pred, where string) ptxInstr {
	parts := strings.Split(words[0], ".")
	in := ptxInstr{i: i, op: parts[0], mods: map[string]bool{}, full: words[0], pred: pred, where: where}
	for _, m := range parts[1:] {
		in.mods[m] = true
	}
	in.dests, in.srcs = ptxRegisters(in.op, words[1:])
	if pred != "" {
		in.srcs = append(in.srcs, strings.TrimPrefix(pred, "!"))
	}
	if in.op == "bra" && len(words) > 1 {
		in.target = words[len(words)-1]
	}
	if in.op == "call" {
		for _, w := range words[1:] {
			if w != "" && !strings.HasPrefix(w, "(") {
				in.callee = w
				break
			}
		}
	}
	return in
}

// relaxedFlags applies the rule to one function's instructions (entry: a kernel, else a device
// function). It follows every path of the function's control flow, so a fence counts only where
// it lies on all paths between the data and the flag: a fence before the data writes, on one
// branch of an if, or after the reads that follow a wait does not order them.
func relaxedFlags(fn string, entry bool, body []ptxInstr, labels map[string]int) []orderingFinding {
	if len(body) == 0 {
		return nil
	}
	succ := ptxSuccessors(body, labels)
	loops := ptxLoops(body, labels)
	kinds := make([]string, len(body))
	for _, in := range body {
		kinds[in.i] = flagKind(in, spins(body, loops, in.i))
	}

	// Forward over the control flow to a fixed point: sig[i] is what is fenced on entry to i
	// over every path (a must property), wait[i] the relaxed waits some path brings to i with
	// no fence since (a may property). nil: i not reached yet.
	sig := make([]*fenced, len(body))
	wait := make([]*pendingWaits, len(body))
	sig[0] = &fenced{under: map[string]bool{}}
	wait[0] = &pendingWaits{waits: map[int]bool{}, cleared: map[string]map[int]bool{}}
	work := []int{0}
	queued := map[int]bool{0: true}
	for len(work) > 0 {
		i := work[0]
		work = work[1:]
		queued[i] = false
		s, w := sig[i].after(body[i], kinds[i]), wait[i].after(body[i], kinds[i])
		for _, j := range succ[i] {
			ns, nw := s, w
			if sig[j] != nil {
				ns, nw = sig[j].meet(s), wait[j].join(w)
				if ns.equal(sig[j]) && nw.equal(wait[j]) {
					continue
				}
			}
			sig[j], wait[j] = ns, nw
			if !queued[j] {
				queued[j] = true
				work = append(work, j)
			}
		}
	}

	var out []orderingFinding
	waitsFound := map[int]bool{}
	for _, in := range body {
		if sig[in.i] == nil { // unreachable
			continue
		}
		if kinds[in.i] == "signal" && !sig[in.i].covers(in.pred) {
			out = append(out, orderingFinding{Instr: in.full, Func: fn, Where: in.where, Kind: "signal"})
		}
		// A device function's return leads to its caller's accesses; a kernel's ends them
		// (the next kernel is ordered after it).
		if reads, writes := dataAccess(in); reads || writes || in.op == "ret" && !entry {
			for w := range wait[in.i].open(in.pred) {
				waitsFound[w] = true
			}
		}
	}
	for _, in := range body {
		if waitsFound[in.i] {
			out = append(out, orderingFinding{Instr: in.full, Func: fn, Where: in.where, Kind: "wait"})
		}
	}
	return out
}

// ptxSuccessors: the instructions control may go to after each one.
func ptxSuccessors(body []ptxInstr, labels map[string]int) [][]int {
	succ := make([][]int, len(body))
	allLabels := func() []int {
		var at []int
		for _, j := range labels {
			if j < len(body) {
				at = append(at, j)
			}
		}
		return at
	}
	for _, in := range body {
		next := in.i + 1
		switch {
		case in.op == "ret" || in.op == "exit" || in.op == "trap":
			if in.pred != "" && next < len(body) {
				succ[in.i] = []int{next}
			}
			continue
		case in.op == "bra":
			if at, ok := labels[in.target]; ok && at < len(body) {
				succ[in.i] = append(succ[in.i], at)
			}
			if in.pred == "" {
				continue
			}
		case in.op == "brx": // an indirect branch: any label
			succ[in.i] = allLabels()
		}
		if next < len(body) {
			succ[in.i] = append(succ[in.i], next)
		}
	}
	return succ
}

// loopSpan is a loop: the instructions from a label to a branch back to it.
type loopSpan struct{ from, to int }

// ptxLoops lists the loops of a function, one per backward branch.
func ptxLoops(body []ptxInstr, labels map[string]int) []loopSpan {
	var loops []loopSpan
	for _, b := range body {
		if b.op == "bra" {
			if at, ok := labels[b.target]; ok && at <= b.i {
				loops = append(loops, loopSpan{at, b.i})
			}
		}
	}
	return loops
}

// sysFence: a fence that orders everything before it with everything after it, at system scope.
func sysFence(in ptxInstr) bool {
	return in.mods["sys"] && (in.op == "membar" || in.op == "fence" && (in.mods["sc"] || in.mods["acq_rel"]))
}

// flagKind says whether an instruction is a relaxed flag operation at system scope: "signal",
// "wait" or "". spin: the value it loads decides a branch of a loop around it (a spin wait).
func flagKind(in ptxInstr, spin bool) string {
	integer := !floatType(in.mods)
	if in.op == "ld" && in.mods["volatile"] && integer && spin {
		return "wait" // a volatile spin is a relaxed wait: volatile orders nothing
	}
	if !in.mods["sys"] || !integer {
		return ""
	}
	release := in.mods["release"] || in.mods["acq_rel"]
	acquire := in.mods["acquire"] || in.mods["acq_rel"]
	switch in.op {
	case "st", "red":
		if !release {
			return "signal"
		}
	case "ld":
		if !acquire {
			return "wait"
		}
	case "atom":
		if spin {
			if !acquire {
				return "wait"
			}
		} else if !release {
			return "signal"
		}
	}
	return ""
}

// spins says whether the value instruction at loads decides a branch of a loop that spans it:
// its registers are followed through the loop's instructions (and through shared memory, where
// Triton passes one thread's load to the others) to a branch's predicate.
func spins(body []ptxInstr, loops []loopSpan, at int) bool {
	in := body[at]
	if in.op != "ld" && in.op != "atom" || len(in.dests) == 0 {
		return false
	}
	for _, l := range loops {
		if at < l.from || at > l.to {
			continue
		}
		taint := map[string]bool{}
		for _, d := range in.dests {
			taint[d] = true
		}
		shared := false
		for pass := 0; pass < 2; pass++ { // twice: values carried around the loop
			for _, b := range body[l.from : l.to+1] {
				hit := false
				for _, r := range b.srcs {
					hit = hit || taint[r]
				}
				isShared := false
				for m := range b.mods {
					isShared = isShared || strings.HasPrefix(m, "shared")
				}
				if b.op == "ld" && isShared && shared {
					hit = true
				}
				if b.op == "st" && isShared && hit {
					shared = true
				}
				if hit {
					for _, d := range b.dests {
						taint[d] = true
					}
				}
			}
		}
		for _, b := range body[l.from : l.to+1] {
			if b.op == "bra" && b.pred != "" && taint[strings.TrimPrefix(b.pred, "!")] {
				return true
			}
		}
	}
	return false
}

// ptxRegisters splits an instruction's operands into the registers it writes and those it
// reads: a store or reduction writes none (its address and value are read); an instruction with
// a memory operand writes the registers before it; any other writes its first operand.
func ptxRegisters(op string, operands []string) (dests, srcs []string) {
	var regs []string
	mem := -1
	for _, w := range operands {
		for _, t := range strings.FieldsFunc(w, func(r rune) bool { return strings.ContainsRune("[]{}+|()", r) }) {
			if strings.HasPrefix(t, "%") {
				regs = append(regs, t)
			}
		}
		if mem < 0 && strings.Contains(w, "[") {
			mem = len(regs) - strings.Count(w, "%") // registers before the memory operand
			if mem < 0 {
				mem = 0
			}
		}
	}
	switch {
	case op == "st" || op == "red" || op == "bra" || op == "call":
		return nil, regs
	case mem >= 0:
		return regs[:mem], regs[mem:]
	case op == "setp" && len(operands) > 0 && strings.Contains(operands[0], "|"):
		return regs[:2], regs[2:]
	case len(regs) > 0:
		return regs[:1], regs[1:]
	}
	return nil, nil
}

// dataAccess says whether an instruction reads or writes data in global memory (or memory
// that may be global): what a signal must be ordered after and a wait before. Flags are not
// data: integer accesses with a scope (an atomic_ref's loads and stores) or volatile ones, and
// integer atomics. A call may do either, but for printf's and assert's, which touch only the
// thread's own local memory.
func dataAccess(in ptxInstr) (reads, writes bool) {
	local := false
	for m := range in.mods {
		if strings.HasPrefix(m, "shared") || m == "local" || m == "param" || m == "const" {
			local = true
		}
	}
	scoped := in.mods["sys"] || in.mods["gpu"] || in.mods["cta"] || in.mods["cluster"] || in.mods["volatile"]
	switch in.op {
	case "call":
		quiet := in.callee == "vprintf" || in.callee == "__assertfail"
		return !quiet, !quiet
	case "ld":
		return !local && (!scoped || floatType(in.mods)), false
	case "st":
		return false, !local && (!scoped || floatType(in.mods))
	case "atom":
		if !local && floatType(in.mods) {
			return true, true
		}
	case "red":
		return false, !local && floatType(in.mods)
	case "cp": // cp.async...: the first state space named is where it writes
		if !in.mods["async"] {
			return false, false
		}
		parts := strings.Split(in.full, ".")
		for _, p := range parts[1:] {
			if p == "global" {
				return false, true
			}
			if strings.HasPrefix(p, "shared") {
				return in.mods["global"], false
			}
		}
	}
	return false, false
}

// predsWritten: the predicate registers an instruction sets ("%p1"; setp may set two,
// "%p1|%p2").
func predsWritten(in ptxInstr) []string {
	var out []string
	for _, d := range in.dests {
		if strings.HasPrefix(d, "%p") {
			out = append(out, d)
		}
	}
	return out
}

// fenced is what the signal rule knows on entry to an instruction: on every path a system
// fence came after the last data write (all), or came guarded by a predicate that has not
// changed since (under: "%p1", "!%p1"), which orders a signal guarded by the same predicate.
type fenced struct {
	all   bool
	under map[string]bool
}

func (f *fenced) after(in ptxInstr, kind string) *fenced {
	if _, writes := dataAccess(in); writes {
		return &fenced{under: map[string]bool{}}
	}
	n := &fenced{all: f.all, under: map[string]bool{}}
	for p := range f.under {
		n.under[p] = true
	}
	if sysFence(in) {
		if in.pred == "" {
			return &fenced{all: true, under: map[string]bool{}}
		}
		n.under[in.pred] = true
	}
	for _, p := range predsWritten(in) {
		delete(n.under, p)
		delete(n.under, "!"+p)
	}
	return n
}

func (f *fenced) covers(pred string) bool { return f.all || pred != "" && f.under[pred] }

func (f *fenced) meet(g *fenced) *fenced {
	n := &fenced{all: f.all && g.all, under: map[string]bool{}}
	for _, p := range unionKeys(f.under, g.under) {
		if f.covers(p) && g.covers(p) {
			n.under[p] = true
		}
	}
	return n
}

func (f *fenced) equal(g *fenced) bool {
	if f.all != g.all || len(f.under) != len(g.under) {
		return false
	}
	for p := range f.under {
		if !g.under[p] {
			return false
		}
	}
	return true
}

// pendingWaits is what the wait rule knows on entry to an instruction: the relaxed waits some
// path brings here with no system fence since, and for a predicate the waits a fence guarded by
// it has ordered (for accesses guarded by the same predicate).
type pendingWaits struct {
	waits   map[int]bool
	cleared map[string]map[int]bool
}

func (w *pendingWaits) after(in ptxInstr, kind string) *pendingWaits {
	if sysFence(in) && in.pred == "" {
		return &pendingWaits{waits: map[int]bool{}, cleared: map[string]map[int]bool{}}
	}
	n := &pendingWaits{waits: copySet(w.waits), cleared: map[string]map[int]bool{}}
	for p, s := range w.cleared {
		n.cleared[p] = copySet(s)
	}
	if sysFence(in) {
		n.cleared[in.pred] = copySet(n.waits)
	}
	for _, p := range predsWritten(in) {
		delete(n.cleared, p)
		delete(n.cleared, "!"+p)
	}
	if kind == "wait" {
		n.waits[in.i] = true
		for _, s := range n.cleared {
			delete(s, in.i)
		}
	}
	return n
}

// open: the waits not ordered before an access guarded by pred.
func (w *pendingWaits) open(pred string) map[int]bool {
	out := map[int]bool{}
	for i := range w.waits {
		if pred == "" || !w.cleared[pred][i] {
			out[i] = true
		}
	}
	return out
}

func (w *pendingWaits) join(v *pendingWaits) *pendingWaits {
	n := &pendingWaits{waits: copySet(w.waits), cleared: map[string]map[int]bool{}}
	for i := range v.waits {
		n.waits[i] = true
	}
	// A wait stays ordered under p only if it is ordered (or absent) on both paths.
	for _, p := range unionKeys(w.cleared, v.cleared) {
		s := map[int]bool{}
		for i := range n.waits {
			if (!w.waits[i] || w.cleared[p][i]) && (!v.waits[i] || v.cleared[p][i]) {
				s[i] = true
			}
		}
		if len(s) > 0 {
			n.cleared[p] = s
		}
	}
	return n
}

func (w *pendingWaits) equal(v *pendingWaits) bool {
	if !sameSet(w.waits, v.waits) || len(w.cleared) != len(v.cleared) {
		return false
	}
	for p, s := range w.cleared {
		if !sameSet(s, v.cleared[p]) {
			return false
		}
	}
	return true
}

func copySet(s map[int]bool) map[int]bool {
	n := make(map[int]bool, len(s))
	for k := range s {
		n[k] = true
	}
	return n
}

func sameSet(a, b map[int]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func unionKeys[V any](a, b map[string]V) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// ptxFloatTypes are PTX's floating-point types: an operation on them moves data, not a flag.
var ptxFloatTypes = map[string]bool{"f16": true, "f16x2": true, "bf16": true, "bf16x2": true,
	"f32": true, "f64": true, "e4m3x2": true, "e5m2x2": true}

// floatType: the operation's type is floating point (data, not a flag).
func floatType(mods map[string]bool) bool {
	for m := range mods {
		if ptxFloatTypes[m] {
			return true
		}
	}
	return false
}

// orderingViolations applies the rule to every learner source with PTX.
func orderingViolations(prog *program) ([]Violation, error) {
	var vs []Violation
	for _, lf := range prog.learner {
		if lf.PTX == "" {
			if strings.EqualFold(filepath.Ext(lf.Name), ".cu") {
				// Never a silent pass: a .cu file of the learner always has PTX (runtime/build).
				return nil, fmt.Errorf("the build kept no PTX of %s, so its flags cannot be read", lf.Show)
			}
			continue
		}
		found, err := orderingFindings(lf.PTX)
		if err != nil {
			return nil, fmt.Errorf("reading the PTX of %s: %w", lf.Show, err)
		}
		seen := map[string]bool{}
		for _, f := range found {
			file := lf.Show
			if f.Where != "" {
				file = filepath.Join(filepath.Dir(lf.Show), f.Where)
			}
			k := f.Instr + "|" + file
			if seen[k] {
				continue // one line per place: the PTX of every architecture repeats it
			}
			seen[k] = true
			vs = append(vs, orderingViolation(f, file, false))
		}
	}
	return vs, nil
}

// tritonCacheDir is where a Python driver points TRITON_CACHE_DIR for rank r (docs/protocol.md
// §1): <run dir>/triton-cache-rank<r>-<pid>.
var tritonCacheDir = regexp.MustCompile(`^triton-cache-rank(\d+)-\d+$`)

// tritonOrdering applies the rule to the PTX Triton compiled in each rank during the run (a
// python exercise with `ordering: system`): a finding fails the rank's case "ordering", which
// the manifest must have, with the instructions and the learner's lines.
func tritonOrdering(runDir string, rows []CaseResult) error {
	ents, err := os.ReadDir(runDir)
	if err != nil {
		return err
	}
	for _, ent := range ents {
		m := tritonCacheDir.FindStringSubmatch(ent.Name())
		if m == nil || !ent.IsDir() {
			continue
		}
		rank, _ := strconv.Atoi(m[1])
		var vs []Violation
		seen := map[string]bool{}
		err := filepath.WalkDir(filepath.Join(runDir, ent.Name()), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(p) != ".ptx" {
				return err
			}
			found, err := orderingFindings(p)
			if err != nil {
				return fmt.Errorf("reading %s: %w", p, err)
			}
			for _, f := range found {
				if k := f.Instr + "|" + f.Where; !seen[k] {
					seen[k] = true
					vs = append(vs, orderingViolation(f, f.Where, true))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(vs) == 0 {
			continue
		}
		for i := range rows {
			if rows[i].Case == "ordering" && rows[i].Rank == rank {
				rows[i].OK = false
				rows[i].Msg = "in the PTX Triton compiled from your kernels: " + orderingMessage(vs)
			}
		}
	}
	return nil
}

// orderingViolation describes one finding; triton: say how to fix it in Triton's words.
func orderingViolation(f orderingFinding, file string, triton bool) Violation {
	var why string
	switch {
	case f.Kind == "signal" && triton:
		why = "a signal to another GPU with relaxed order: nothing makes the data written before it visible to the reader first. Write the flag with release order at system scope, tl.atomic_xchg(flag, value, sem=\"release\", scope=\"sys\"), after tl.debug_barrier()"
	case f.Kind == "signal":
		why = "a signal to another GPU with relaxed order, and on some path to it no system-scope fence after the last data written: nothing makes that data visible to the reader first. Give the store or atomic release order (cuda::atomic_ref<..., cuda::thread_scope_system> with cuda::memory_order_release, or st.release.sys / atom.release.sys), or put __threadfence_system() between the data and the signal, on every path"
	case triton && strings.Contains(f.Instr, ".volatile"):
		why = "a wait on another GPU's flag that spins on a volatile load (tl.load(..., volatile=True)), which orders nothing: the loads that follow may see data from before the flag was set. Read the flag with acquire order at system scope, tl.atomic_add(flag, 0, sem=\"acquire\", scope=\"sys\"), in the loop, then tl.debug_barrier()"
	case triton:
		why = "a wait on another GPU's flag with relaxed order: the loads that follow may see data from before the flag was set. Read the flag with acquire order at system scope, tl.atomic_add(flag, 0, sem=\"acquire\", scope=\"sys\"), in the loop, then tl.debug_barrier()"
	case strings.Contains(f.Instr, ".volatile"):
		why = "a wait on another GPU's flag that spins on a volatile load, which orders nothing, and a path from it to a read or write of data (or to the caller, from a device function) with no system-scope fence between: those accesses may see data from before the flag was set. Load the flag with acquire order (cuda::atomic_ref<..., cuda::thread_scope_system> with cuda::memory_order_acquire, or ld.acquire.sys), or put __threadfence_system() right after the loop"
	default:
		why = "a wait on another GPU's flag with relaxed order, and a path from it to a read or write of data (or to the caller, from a device function) with no system-scope fence between: those accesses may see data from before the flag was set. Give the load acquire order (cuda::memory_order_acquire, or ld.acquire.sys), or put __threadfence_system() right after the loop"
	}
	if f.Func != "" {
		why = "in " + ptxFuncLabel(f.Func) + ", " + why
	}
	if file == "" {
		file = "a kernel without line information"
	}
	return Violation{Symbol: f.Instr, Found: f.Instr, File: file, Why: why, Rule: ruleOrdering}
}

// orderingMessage explains the relaxed flags found.
func orderingMessage(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s (in %s): %s.\n", v.Symbol, v.File, v.Why)
	}
	b.WriteString("Flags between GPUs need release order on the signal and acquire order on the wait (or system-scope fences): " +
		"with relaxed order the check may pass by luck, so the PTX your code compiled to is read instead.")
	return b.String()
}

// ptxFuncLabel is a PTX function's name as the learner wrote it: a C++ name's identifier
// (_Z13exchange_tilePK9symm_view... is "exchange_tile()"), else the name.
func ptxFuncLabel(name string) string {
	if n, ok := mangledFreeName(name); ok {
		return n + "()"
	}
	// A nested name, _ZN<length><name>...<length><name>E... (a namespace's, anonymous ones
	// included): the last part.
	if rest, ok := strings.CutPrefix(name, "_ZN"); ok {
		last := ""
		for rest != "" && rest[0] != 'E' {
			i := 0
			for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
				i++
			}
			l, err := strconv.Atoi(rest[:i])
			if err != nil || l <= 0 || i+l > len(rest) {
				break
			}
			last, rest = rest[i:i+l], rest[i+l:]
		}
		if last != "" {
			return last + "()"
		}
	}
	return name + "()"
}

// PolicyTitle heads a report's list of policy violations: "relaxed flags between GPUs" when
// the ordering rule made them all, "missing instructions" when ptx_requires did, else
// "forbidden calls".
func PolicyTitle(vs []Violation) string {
	rules := map[string]bool{}
	for _, v := range vs {
		rules[v.Rule] = true
	}
	switch {
	case len(rules) == 1 && rules[ruleOrdering]:
		return "relaxed flags between GPUs"
	case len(rules) == 1 && rules[rulePTX]:
		return "missing instructions"
	}
	return "forbidden calls"
}
