package checker

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The memory-ordering rule (manifest `ordering: system`) reads the PTX nvcc made of the
// learner's .cu files (runtime/build keeps it) for flags between GPUs used with relaxed order.
// A signal that nothing orders after the data, or a spin wait that nothing orders before the
// reads that follow it, is a race: it passes most runs, on two PEs of one GPU every run
// (docs/validation/nvidia-1gpu-2hosts), and no test can be sure to catch it. The instructions
// say it outright, so the rule needs no luck:
//
//   - a signal: a system-scope store or reduction, or a system-scope atomic outside a loop,
//     whose order is relaxed (PTX's default for atom and red), with no system-scope fence
//     (fence.sc.sys, fence.acq_rel.sys, membar.sys) before it in its function;
//   - a wait: a system-scope load, or a system-scope atomic inside a loop (a backward branch
//     spans it), whose order is relaxed, with no system-scope fence after it in its function.
//
// Floating-point atomics are data (a sum made in a peer's buffer), not flags, and are left
// alone; so are volatile accesses, which compile the same for data and flags. What the rule
// cannot see (a fence in a caller when the signal is in a separate function, a fence on the
// wrong branch) it lets pass: it never refuses code whose flags carry release and acquire.

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

// ptxInstr is one instruction of a function: its line index in the function, opcode, the
// modifiers of the opcode, the branch target (bra) and the source place in effect.
type ptxInstr struct {
	i      int
	op     string
	mods   map[string]bool
	full   string
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
	var body []ptxInstr
	labels := map[string]int{}
	where := ""
	flush := func() {
		out = append(out, relaxedFlags(fn, body, labels)...)
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
			if name := files[m[1]]; name != "" {
				where = name + ":" + m[2]
			}
			continue
		}
		if ptxFuncStart.MatchString(line) {
			flush()
			fn = ""
			if m := ptxFuncName.FindAllStringSubmatch(line, -1); len(m) > 0 {
				fn = m[len(m)-1][1]
			}
			continue
		}
		if m := ptxLabel.FindStringSubmatch(line); m != nil {
			labels[m[1]] = len(body)
			continue
		}
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, ".") || strings.HasPrefix(t, "{") || strings.HasPrefix(t, "}") || strings.HasPrefix(t, ")") {
			continue
		}
		words := strings.Fields(strings.TrimRight(t, ";"))
		if strings.HasPrefix(words[0], "@") { // a predicate: @%p1 or @!%p1
			words = words[1:]
		}
		if len(words) == 0 {
			continue
		}
		parts := strings.Split(words[0], ".")
		in := ptxInstr{i: len(body), op: parts[0], mods: map[string]bool{}, full: words[0], where: where}
		for _, m := range parts[1:] {
			in.mods[m] = true
		}
		if in.op == "bra" && len(words) > 1 {
			in.target = strings.TrimRight(words[len(words)-1], ";")
		}
		body = append(body, in)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// relaxedFlags applies the rule to one function's instructions.
func relaxedFlags(fn string, body []ptxInstr, labels map[string]int) []orderingFinding {
	type span struct{ from, to int }
	var loops []span
	for _, in := range body {
		if in.op == "bra" {
			if at, ok := labels[in.target]; ok && at <= in.i {
				loops = append(loops, span{at, in.i})
			}
		}
	}
	inLoop := func(i int) bool {
		for _, l := range loops {
			if l.from <= i && i <= l.to {
				return true
			}
		}
		return false
	}
	var fences []int
	for _, in := range body {
		if in.mods["sys"] && (in.op == "membar" || in.op == "fence" && (in.mods["sc"] || in.mods["acq_rel"])) {
			fences = append(fences, in.i)
		}
	}
	fenceBefore := func(i int) bool { return len(fences) > 0 && fences[0] < i }
	fenceAfter := func(i int) bool { return len(fences) > 0 && fences[len(fences)-1] > i }
	var out []orderingFinding
	for _, in := range body {
		if !in.mods["sys"] || floatType(in.mods) {
			continue
		}
		release := in.mods["release"] || in.mods["acq_rel"]
		acquire := in.mods["acquire"] || in.mods["acq_rel"]
		kind := ""
		switch in.op {
		case "st", "red":
			if !release && !fenceBefore(in.i) {
				kind = "signal"
			}
		case "ld":
			if !acquire && !fenceAfter(in.i) {
				kind = "wait"
			}
		case "atom":
			if inLoop(in.i) {
				if !acquire && !fenceAfter(in.i) {
					kind = "wait"
				}
			} else if !release && !fenceBefore(in.i) {
				kind = "signal"
			}
		}
		if kind != "" {
			out = append(out, orderingFinding{Instr: in.full, Func: fn, Where: in.where, Kind: kind})
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
			why := "a signal to another GPU with relaxed order and no system-scope fence before it: nothing makes the data written before it visible to the reader first. Give the store or atomic release order (cuda::atomic_ref<..., cuda::thread_scope_system> with cuda::memory_order_release, or st.release.sys / atom.release.sys), or put __threadfence_system() before it"
			if f.Kind == "wait" {
				why = "a wait on another GPU's flag with relaxed order and no system-scope fence after it: the reads that follow may see data from before the flag was set. Give the load acquire order (cuda::memory_order_acquire, or ld.acquire.sys), or put __threadfence_system() after the loop"
			}
			if f.Func != "" {
				why = "in " + ptxFuncLabel(f.Func) + ", " + why
			}
			vs = append(vs, Violation{Symbol: f.Instr, Found: f.Instr, File: file, Why: why, Rule: ruleOrdering})
		}
	}
	return vs, nil
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
	return name + "()"
}

// PolicyTitle heads a report's list of policy violations: "relaxed flags between GPUs" when
// the ordering rule made them all, else "forbidden calls".
func PolicyTitle(vs []Violation) string {
	for _, v := range vs {
		if v.Rule != ruleOrdering {
			return "forbidden calls"
		}
	}
	return "relaxed flags between GPUs"
}
