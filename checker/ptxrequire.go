package checker

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// The manifest's ptx_requires: instructions the learner's PTX must hold, each at least once.
// Where an exercise teaches a method (the TMA, say) and an older one reaches the same result at
// a speed inside the target (plain 16-byte stores from the same SMs), the other stages cannot
// tell them apart; the PTX can. It reads what nvcc made of the learner's .cu files, so it needs
// no GPU, like the ordering rule. It is not a defence against an instruction placed where it
// never runs: it catches the mistake, not a forgery that gains nothing.

// rulePTX marks a policy finding of ptx_requires.
const rulePTX = "ptx"

// ptxOpcodeMatches: the opcode holds the pattern's parts in order, its first part being the
// opcode's own.
func ptxOpcodeMatches(opcode, pattern string) bool {
	want := strings.Split(pattern, ".")
	have := strings.Split(opcode, ".")
	if len(have) == 0 || have[0] != want[0] {
		return false
	}
	j := 1
	for _, h := range have[1:] {
		if j < len(want) && h == want[j] {
			j++
		}
	}
	return j == len(want)
}

// ptxOpcodes lists the opcodes of a PTX file's instructions (comments, directives and labels
// left out; a guard predicate dropped), read statement by statement as the ordering rule reads
// them (ptxStatements).
func ptxOpcodes(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ops := map[string]bool{}
	carry := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		var stmts []string
		stmts, carry = ptxStatements(line, carry)
		for _, stmt := range stmts {
			words := strings.Fields(stmt)
			for len(words) > 0 && (strings.HasSuffix(words[0], ":") || strings.HasPrefix(words[0], "@")) {
				words = words[1:] // a label, a guard predicate
			}
			if len(words) == 0 || strings.HasPrefix(words[0], ".") {
				continue
			}
			ops[words[0]] = true
		}
	}
	return ops, sc.Err()
}

// ptxRequirementViolations lists the requirements no learner .cu file's PTX meets.
func ptxRequirementViolations(prog *program, reqs []course.PTXRequirement) ([]Violation, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	ops := map[string]bool{}
	var files []string
	for _, lf := range prog.learner {
		if !strings.EqualFold(filepath.Ext(lf.Name), ".cu") {
			continue
		}
		if lf.PTX == "" {
			return nil, fmt.Errorf("the build kept no PTX of %s, so its instructions cannot be read", lf.Show)
		}
		o, err := ptxOpcodes(lf.PTX)
		if err != nil {
			return nil, fmt.Errorf("reading the PTX of %s: %w", lf.Show, err)
		}
		for op := range o {
			ops[op] = true
		}
		files = append(files, lf.Show)
	}
	var vs []Violation
	for _, r := range reqs {
		met := false
		for op := range ops {
			if ptxOpcodeMatches(op, r.Pattern) {
				met = true
				break
			}
		}
		if !met {
			vs = append(vs, Violation{Symbol: r.Pattern, File: strings.Join(files, ", "), Why: r.Why, Rule: rulePTX})
		}
	}
	return vs, nil
}

// ptxRequirementMessage explains the instructions missing.
func ptxRequirementMessage(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "No %s instruction in the PTX of %s: %s.\n", v.Symbol, v.File, v.Why)
	}
	b.WriteString("The policy stage reads the PTX your .cu files compiled to: the exercise asks for this method, and another one can reach the same results and a speed close to the target without teaching it.")
	return b.String()
}
