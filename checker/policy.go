package checker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// policy checks the learner's code: first the integrity rules every exercise has (integrity.go),
// then the symbols the manifest forbids in c and cuda objects. Python exercises' forbidden
// calls are policed while they run: the harness wraps them and reports an error record with
// where "policy".
func (k *check) policy(ctx context.Context, prog *program) bool {
	k.start(StagePolicy)
	e := k.e
	var (
		iv       []Violation
		checked  int
		err      error
		srcCalls map[string][]Violation // forbidden calls in the preprocessed sources, by file
	)
	var forbid []course.Forbidden
	if len(e.Forbid) > 0 {
		forbid = slices.Concat(e.Forbid, lookupForbid)
	}
	if e.Kind == "python" {
		iv, checked, err = k.pythonPolicy(ctx, prog)
	} else {
		iv, checked, err = k.objectIntegrity(prog)
		if err == nil {
			var lv []Violation
			lv, srcCalls, err = sourceScan(prog, forbid)
			iv = append(iv, lv...)
		}
	}
	var ov []Violation // relaxed flags between GPUs (ordering.go)
	if err == nil && e.Ordering == "system" && e.Kind == "cuda" {
		ov, err = orderingViolations(prog)
	}
	var pv []Violation // instructions the manifest requires (ptxrequire.go)
	if err == nil && e.Kind == "cuda" {
		pv, err = ptxRequirementViolations(prog, e.PTXRequires)
	}
	if err != nil {
		k.fail(StagePolicy, FaultRunner, "the integrity check could not run", err.Error())
		return false
	}
	// The calls the manifest forbids are looked for even when an integrity rule is broken, so
	// that the report names every problem at once.
	var violations []Violation
	nobj := 0
	if e.Kind != "python" && len(e.Forbid) > 0 {
		var headline, detail string
		violations, nobj, headline, detail = forbiddenCalls(ctx, prog, forbid, srcCalls)
		if headline != "" {
			k.fail(StagePolicy, FaultRunner, headline, detail)
			return false
		}
	}
	if len(iv) > 0 {
		k.rep.Policy = append(iv, violations...)
		v := iv[0]
		msg := integrityMessage(iv)
		if len(violations) > 0 {
			msg += "\n" + forbiddenMessage(violations)
		}
		k.fail(StagePolicy, FaultYou, fmt.Sprintf("not allowed: %s in %s", v.Symbol, v.File), msg)
		return false
	}
	if len(ov) > 0 {
		k.rep.Policy = append(ov, violations...)
		msg := orderingMessage(ov)
		if len(violations) > 0 {
			msg += "\n" + forbiddenMessage(violations)
		}
		k.fail(StagePolicy, FaultYou, fmt.Sprintf("relaxed flag between GPUs: %s in %s", ov[0].Symbol, ov[0].File), msg)
		return false
	}
	// A forbidden call is named first (it says more about what the code does), with the
	// instructions missing after it.
	if len(pv) > 0 && len(violations) == 0 {
		k.rep.Policy = pv
		k.fail(StagePolicy, FaultYou, fmt.Sprintf("missing instruction: no %s in %s", pv[0].Symbol, pv[0].File), ptxRequirementMessage(pv))
		return false
	}
	ordered := ""
	switch {
	case e.Ordering == "system" && e.Kind == "python":
		ordered = "; the flags of Triton kernels are read after the run"
	case e.Ordering == "system":
		ordered = "; flags between GPUs ordered"
	}
	if len(e.Forbid) == 0 {
		k.done(StagePolicy, StatusOK, fmt.Sprintf("%d file(s) checked%s; nothing forbidden", checked, ordered))
		return true
	}
	if e.Kind == "python" {
		k.done(StagePolicy, StatusOK, fmt.Sprintf("%d file(s) checked; forbidden calls checked while running", checked))
		return true
	}
	if len(violations) > 0 {
		k.rep.Policy = append(violations, pv...)
		v := violations[0]
		msg := forbiddenMessage(violations)
		if len(pv) > 0 {
			msg += "\n" + ptxRequirementMessage(pv)
		}
		k.fail(StagePolicy, FaultYou, fmt.Sprintf("forbidden call %s in %s", v.Name(), v.File), msg)
		return false
	}
	k.done(StagePolicy, StatusOK, fmt.Sprintf("%d object(s) free of %d forbidden symbol(s)%s", nobj, len(e.Forbid), ordered))
	return true
}

// forbiddenCalls finds the calls of forbid in the learner's C and CUDA objects (their symbols)
// and in their preprocessed lines (srcCalls, by file). It returns the violations and the
// number of objects read, or a headline and detail when the check could not run.
func forbiddenCalls(ctx context.Context, prog *program, forbid []course.Forbidden, srcCalls map[string][]Violation) ([]Violation, int, string, string) {
	nm, err := exec.LookPath("nm")
	if err != nil {
		return nil, 0, "nm not found: forbidden calls cannot be checked",
			"The policy stage needs `nm` (binutils) to list the symbols of your object files; without it a forbidden call would go unnoticed, so the check stops here."
	}
	var violations []Violation
	checked := 0
	for _, lf := range prog.learner {
		if !isSource(lf.Name) {
			continue
		}
		if lf.Object == "" {
			return nil, 0, "no object file for " + lf.Show,
				fmt.Sprintf("The builder did not report an object file for %s, so its calls cannot be checked.", lf.Show)
		}
		syms, err := objectSymbols(ctx, nm, lf.Object)
		if err != nil {
			return nil, 0, "nm failed on " + lf.Show, err.Error()
		}
		checked++
		found := map[string]bool{}
		for _, f := range forbid {
		search:
			for _, name := range aliases(f.Symbol) {
				for _, s := range syms {
					if symbolMatches(s, name) {
						file, srcName := lf.Show, name
						if strings.Contains(name, "*") { // a pattern: look for the name it matched
							srcName = demangledName(strings.SplitN(s, "@", 2)[0])
						}
						if line := findInSource(lf.Path, srcName); line > 0 {
							file = fmt.Sprintf("%s:%d", lf.Show, line)
						}
						v := Violation{Symbol: f.Symbol, Found: s, File: file, Why: f.Why}
						if name != f.Symbol {
							v.Via = name
						}
						violations = append(violations, v)
						found[f.Symbol] = true
						break search
					}
				}
			}
		}
		// What the symbol table cannot show: device code, inline functions, macros.
		for _, v := range srcCalls[lf.Show] {
			if !found[v.Symbol] {
				violations = append(violations, v)
			}
		}
	}
	return violations, checked, "", ""
}

// forbiddenMessage is the report's explanation of forbidden calls.
func forbiddenMessage(violations []Violation) string {
	var b strings.Builder
	for _, v := range violations {
		if v.Via != "" {
			fmt.Fprintf(&b, "Your code calls %s through its profiling alias %s (in %s), which this exercise forbids", v.Name(), v.Via, v.File)
		} else {
			fmt.Fprintf(&b, "Your code calls %s (in %s), which this exercise forbids", v.Name(), v.File)
		}
		if v.Why != "" {
			fmt.Fprintf(&b, ": %s", v.Why)
		}
		b.WriteString(sentenceEnd(v.Why) + "\n")
	}
	b.WriteString("Remove the call and write that part yourself; the check looks at the symbols your object files use and at your code as the compiler saw it (device code and macros included).")
	return b.String()
}

// lookupForbid is forbidden wherever an exercise forbids anything: a function looked up at run
// time by its name does not appear among the object's symbols, so it would slip past the check.
var lookupForbid = func() []course.Forbidden {
	const why = "looking functions up by name at run time hides the calls from this check; call what you need directly"
	var fs []course.Forbidden
	for _, s := range []string{"dlopen", "dlsym", "dlvsym", "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion", "cuGetProcAddress", "cuGetProcAddress_v2"} {
		fs = append(fs, course.Forbidden{Symbol: s, Why: why})
	}
	return fs
}()

// aliases are the names under which a library exports the same function: NCCL's profiling
// interface defines every ncclX as pncclX too, and MPI's every MPI_X as PMPI_X.
func aliases(sym string) []string {
	switch {
	case strings.HasPrefix(sym, "nccl"):
		return []string{sym, "p" + sym}
	case strings.HasPrefix(sym, "MPI_"):
		return []string{sym, "P" + sym}
	}
	return []string{sym}
}

// objectSymbols lists the defined and undefined symbol names of an object file, raw and
// demangled (nm -C), so that C++ names are matched both ways.
func objectSymbols(ctx context.Context, nm, obj string) ([]string, error) {
	var syms []string
	for _, args := range [][]string{{obj}, {"-C", obj}} {
		cmd := exec.CommandContext(ctx, nm, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			if len(args) == 2 && len(syms) > 0 {
				break // an nm without -C: the raw names are enough
			}
			return nil, fmt.Errorf("nm %s: %v: %s", obj, err, strings.TrimSpace(errb.String()))
		}
		syms = append(syms, parseNM(out.Bytes())...)
	}
	return syms, nil
}

// parseNM reads nm's output lines, "ADDR TYPE NAME" or "TYPE NAME" (undefined), where a
// demangled NAME may contain spaces.
func parseNM(out []byte) []string {
	var syms []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " ")
		rest := line
		if strings.HasPrefix(line, " ") {
			rest = strings.TrimLeft(line, " ")
		} else if i := strings.IndexByte(line, ' '); i > 0 && isHex(line[:i]) {
			rest = line[i+1:]
		}
		if len(rest) < 3 || rest[1] != ' ' {
			continue
		}
		syms = append(syms, rest[2:])
	}
	return syms
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return s != ""
}

// demangledName reduces a demangled C++ name to its qualified name: no parameters, no
// return type, no trailing template arguments ("void ns::f<int>(int)" -> "ns::f").
func demangledName(s string) string {
	depth := 0
	end := len(s)
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			depth++
		case '>':
			depth--
		case '(':
			if depth == 0 {
				end = i
				i = len(s)
			}
		}
	}
	s = strings.TrimSpace(s[:end])
	// Trailing template arguments.
	for strings.HasSuffix(s, ">") {
		d := 0
		cut := -1
		for i := len(s) - 1; i >= 0; i-- {
			if s[i] == '>' {
				d++
			} else if s[i] == '<' {
				d--
				if d == 0 {
					cut = i
					break
				}
			}
		}
		if cut < 0 {
			break
		}
		s = s[:cut]
	}
	// A return type before the name, at template depth 0.
	depth = 0
	last := -1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<':
			depth++
		case '>':
			depth--
		case ' ':
			if depth == 0 {
				last = i
			}
		}
	}
	return s[last+1:]
}

// symbolMatches says whether an object's symbol is the forbidden one: the same C name (a
// version suffix "@GLIBC_2.14" aside), or a C++ mangled name that contains it ("_Z13lib_sum...",
// "ns::fn" as "2ns2fn").
// mangledFreeName is the name of a mangled free function, _Z<length><name>...: "exchange_tile"
// for _Z13exchange_tilePK9symm_view...
func mangledFreeName(sym string) (string, bool) {
	rest, ok := strings.CutPrefix(sym, "_Z")
	if !ok {
		return "", false
	}
	i := 0
	for i < len(rest) && isIdentDigit(rest[i]) {
		i++
	}
	if l, err := strconv.Atoi(rest[:i]); err == nil && l > 0 && i+l <= len(rest) {
		return rest[i : i+l], true
	}
	return "", false
}

func symbolMatches(sym, forbidden string) bool {
	if i := strings.IndexByte(sym, '@'); i > 0 {
		sym = sym[:i]
	}
	if strings.Contains(forbidden, "*") {
		// A pattern (C names only): the symbol, or a C++ symbol's unqualified name.
		if globMatch(forbidden, sym) {
			return true
		}
		n := demangledName(sym)
		if i := strings.LastIndex(n, "::"); i >= 0 {
			n = n[i+2:]
		}
		if n != sym && globMatch(forbidden, n) {
			return true
		}
		// A mangled free function, _Z<length><name>...
		if name, ok := mangledFreeName(sym); ok {
			return globMatch(forbidden, name)
		}
		return false
	}
	if sym == forbidden {
		return true
	}
	if strings.ContainsAny(sym, "( <:") {
		n := demangledName(sym)
		return n == forbidden || strings.HasSuffix(n, "::"+forbidden)
	}
	if !strings.HasPrefix(sym, "_Z") && !strings.HasPrefix(sym, "__Z") {
		return false
	}
	var frag strings.Builder
	for _, part := range strings.Split(forbidden, "::") {
		if part == "" {
			return false
		}
		frag.WriteString(strconv.Itoa(len(part)))
		frag.WriteString(part)
	}
	f := frag.String()
	// The fragment must not be the tail of a longer identifier ("13my_lib_sum" contains
	// "7lib_sum"... not as a whole component): check the character before the length digits.
	for i := 0; ; {
		j := strings.Index(sym[i:], f)
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || !isIdentDigit(sym[j-1]) {
			return true
		}
		i = j + 1
	}
}

func isIdentDigit(c byte) bool { return c >= '0' && c <= '9' }

// findInSource gives the line of file where sym is most likely called, or 0: the first call
// ("sym(") outside a comment, else the first mention outside a comment, else any mention.
func findInSource(file, sym string) int {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	name := sym
	if i := strings.LastIndex(name, "::"); i >= 0 {
		name = name[i+2:]
	}
	word := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`)
	call := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\s*(<[^;]*>)?\s*\(`)
	lines := strings.Split(string(data), "\n")
	code := make([]string, len(lines)) // each line without its comments
	inBlock := false
	for i, line := range lines {
		var b strings.Builder
		for j := 0; j < len(line); j++ {
			switch {
			case inBlock && strings.HasPrefix(line[j:], "*/"):
				inBlock = false
				j++
			case inBlock:
			case strings.HasPrefix(line[j:], "/*"):
				inBlock = true
				j++
			case strings.HasPrefix(line[j:], "//") || line[j] == '#' && strings.TrimSpace(line[:j]) == "" && strings.HasPrefix(strings.TrimSpace(line[j+1:]), "include"):
				j = len(line)
			default:
				b.WriteByte(line[j])
			}
		}
		code[i] = b.String()
	}
	for _, re := range []*regexp.Regexp{call, word} {
		for i, l := range code {
			if re.MatchString(l) {
				return i + 1
			}
		}
	}
	for i, l := range lines {
		if word.MatchString(l) {
			return i + 1
		}
	}
	return 0
}

// sentenceEnd is the full stop a sentence ending in s still needs.
func sentenceEnd(s string) string {
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return ""
	}
	return "."
}

// globMatch matches an identifier against a forbid pattern, where * stands for any run of
// characters: path.Match, as the loader allows only identifier characters and * in patterns
// (and identifiers hold no '/').
func globMatch(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}
