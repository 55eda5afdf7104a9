package checker

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

// The preprocessed scan (runtime/build/preprocess.go keeps the lines) finds what a symbol
// table cannot show: calls made in device code, calls of inline header functions, and calls
// spelled through macros or token pasting, all of which are plain identifiers once the
// preprocessor has run. Comments are gone by then; string and character literals are skipped,
// except in inline assembly, whose text can call a function by name.

// ruleSource is the integrity rule for a #line directive (Violation.Rule).
const ruleSource = "source"

// ppIdent is one identifier's first place in the learner's preprocessed lines.
type ppIdent struct {
	file string // as stored: a base name in the learner's directory, else a path
	line int
}

// ppScan reads a preprocessed-lines file: the identifiers used (first place of each) and the
// #line directives found ("file:line claims path").
func ppScan(path string) (map[string]ppIdent, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	idents := map[string]ppIdent{}
	var lineDirs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	var ls lineScanner
	for sc.Scan() {
		text := sc.Text()
		if rest, ok := strings.CutPrefix(text, "!line "); ok {
			lineDirs = append(lineDirs, rest)
			continue
		}
		where, code, ok := strings.Cut(text, "\t")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(where, ':')
		if i < 0 {
			continue
		}
		var line int
		fmt.Sscanf(where[i+1:], "%d", &line)
		at := ppIdent{file: where[:i], line: line}
		for _, id := range ls.scan(code, false) {
			if _, ok := idents[id]; !ok {
				idents[id] = at
			}
		}
	}
	return idents, lineDirs, sc.Err()
}

// identifiers lists the C identifiers of one line of code, outside string and character
// literals — and inside them too within inline assembly (asm, __asm__).
func identifiers(line string) []string {
	var sc lineScanner
	return sc.scan(line, true)
}

// legacySyscall is the 32-bit system call instruction in an asm string (int $0x80, int 128),
// which a red-team pass used where the words syscall and sysenter are refused.
var legacySyscall = regexp.MustCompile(`(?i)\bint\s+\$?(0x80|128)\b`)

// lineScanner finds identifiers line after line, keeping what an asm statement spread over
// several lines needs: whether one is open, how deep its parentheses are, and its string
// literals not yet read. Adjacent literals are one string to the assembler ("call lib_" "sum"
// is "call lib_sum", also across lines), and their escapes (\x5f, \137) are decoded first, so a
// name spelled in pieces or in escapes inside inline assembly is still seen whole.
type lineScanner struct {
	asm     bool // after an asm keyword, until its parentheses close
	depth   int
	pending []byte // adjacent string literals of the asm statement, decoded
}

// scan returns the identifiers of one line; end says whether the text ends here (a lone
// line), so that literals still pending are read now rather than with the next line.
func (sc *lineScanner) scan(line string, end bool) []string {
	var ids []string
	flush := func() {
		if len(sc.pending) > 0 {
			ids = append(ids, plainIdentifiers(string(sc.pending))...)
			if legacySyscall.Match(sc.pending) {
				ids = append(ids, "int $0x80")
			}
			sc.pending = sc.pending[:0]
		}
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '"' || c == '\'':
			j := i + 1
			for j < len(line) && line[j] != c {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			if sc.asm && c == '"' {
				sc.pending = append(sc.pending, unescapeC(line[i+1:min(j, len(line))])...)
			} else if sc.asm {
				flush()
			}
			i = j + 1
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case isIdentStart(c):
			flush()
			j := i + 1
			for j < len(line) && (isIdentStart(line[j]) || isIdentDigit(line[j])) {
				j++
			}
			id := line[i:j]
			if id == "asm" || id == "__asm__" || id == "__asm" {
				sc.asm, sc.depth = true, 0
			}
			ids = append(ids, id)
			i = j
		case isIdentDigit(c):
			flush()
			// a number, with its suffix or exponent: no identifier starts inside it
			j := i + 1
			for j < len(line) && (isIdentStart(line[j]) || isIdentDigit(line[j]) || line[j] == '.') {
				j++
			}
			i = j
		default:
			flush()
			if sc.asm {
				switch c {
				case '(':
					sc.depth++
				case ')':
					sc.depth--
					if sc.depth <= 0 {
						sc.asm = false
					}
				case ';':
					sc.asm = false
				}
			}
			i++
		}
	}
	if end {
		flush()
	}
	return ids
}

// plainIdentifiers lists the identifiers of a text that has no literals (an asm string).
func plainIdentifiers(s string) []string {
	var ids []string
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && (isIdentStart(s[j]) || isIdentDigit(s[j])) {
				j++
			}
			ids = append(ids, s[i:j])
			i = j
		case isIdentDigit(c):
			j := i + 1
			for j < len(s) && (isIdentStart(s[j]) || isIdentDigit(s[j]) || s[j] == '.') {
				j++
			}
			i = j
		default:
			i++
		}
	}
	return ids
}

// unescapeC decodes the escapes of a C string literal's body; an escape it does not know
// stands for a space, which ends an identifier as the assembler would.
func unescapeC(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			out = append(out, s[i])
			continue
		}
		i++
		switch c := s[i]; {
		case c == 'x':
			v, j := 0, i+1
			for j < len(s) && hexDigit(s[j]) >= 0 {
				v = v*16 + hexDigit(s[j])
				j++
			}
			out = append(out, byte(v))
			i = j - 1
		case c >= '0' && c <= '7':
			v, j := 0, i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				v = v*8 + int(s[j]-'0')
				j++
			}
			out = append(out, byte(v))
			i = j - 1
		case c == '\\' || c == '"' || c == '\'' || c == '?':
			out = append(out, c)
		default: // \n, \t and the other control characters, \u...
			out = append(out, ' ')
		}
	}
	return out
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// sourceViolations checks a learner file's preprocessed lines against the forbidden symbols
// (and their aliases) and the #line rule.
func sourceViolations(lf learnerFile, pp string, forbid []course.Forbidden) ([]Violation, error) {
	idents, lineDirs, err := ppScan(pp)
	if err != nil {
		return nil, fmt.Errorf("reading the preprocessed %s: %w", lf.Show, err)
	}
	show := func(at ppIdent) string {
		if strings.ContainsRune(at.file, '/') {
			return fmt.Sprintf("%s:%d (a header your %s includes)", at.file, at.line, lf.Show)
		}
		return fmt.Sprintf("%s:%d", showIn(lf.Show, at.file), at.line)
	}
	var vs []Violation
	for _, d := range lineDirs {
		where, claim, _ := strings.Cut(d, " ")
		if base, _, ok := strings.Cut(where, ":"); ok && !strings.ContainsRune(base, '/') {
			// The preprocessor's line count drifts over comments and blank lines: the
			// directive's own line in the source is the one to show.
			if n := directiveLine(filepath.Join(filepath.Dir(lf.Path), base)); n > 0 {
				where = fmt.Sprintf("%s:%d", base, n)
			}
		}
		vs = append(vs, Violation{Rule: ruleSource, Symbol: "#line", Found: "#line " + claim, File: showIn(lf.Show, where),
			Why: "a #line directive makes the lines after it claim to come from another file, which hides them from this check"})
	}
	// Raw system calls written as inline assembly leave no symbol behind.
	for _, w := range []string{"syscall", "sysenter", "int $0x80"} {
		if at, ok := idents[w]; ok {
			vs = append(vs, Violation{Rule: ruleSide, Symbol: w, Found: w, File: show(at), Why: sideWhy(w)})
			break
		}
	}
	for _, f := range forbid {
		for _, name := range aliases(f.Symbol) {
			short := name
			if i := strings.LastIndex(short, "::"); i >= 0 {
				short = short[i+2:]
			}
			if strings.Contains(short, "*") {
				if id, at, ok := firstGlob(idents, short); ok {
					vs = append(vs, Violation{Symbol: f.Symbol, Found: id, File: show(at), Why: f.Why})
					break
				}
				continue
			}
			if at, ok := idents[short]; ok {
				v := Violation{Symbol: f.Symbol, Found: short, File: show(at), Why: f.Why}
				if name != f.Symbol {
					v.Via = name
				}
				vs = append(vs, v)
				break
			}
		}
	}
	return vs, nil
}

// showIn turns a stored base name into the learner's view of it: the base name of a file in
// the same directory as the learner file shown as show.
func showIn(show, base string) string {
	if i := strings.LastIndexByte(show, '/'); i >= 0 && !strings.ContainsRune(base, '/') {
		return show[:i+1] + base
	}
	return base
}

// sourceScan reads every learner source's preprocessed lines once: the #line directives
// (an integrity rule, whether or not the exercise forbids anything) and, by file, the calls of
// forbid found there.
func sourceScan(prog *program, forbid []course.Forbidden) ([]Violation, map[string][]Violation, error) {
	var integrity []Violation
	calls := map[string][]Violation{}
	for _, lf := range prog.learner {
		if !isSource(lf.Name) || lf.Object == "" {
			continue
		}
		if lf.PP == "" {
			return nil, nil, fmt.Errorf("the build kept no preprocessed form of %s", lf.Show)
		}
		sv, err := sourceViolations(lf, lf.PP, forbid)
		if err != nil {
			return nil, nil, err
		}
		for _, v := range sv {
			if v.Rule != "" {
				integrity = append(integrity, v)
			} else {
				calls[lf.Show] = append(calls[lf.Show], v)
			}
		}
	}
	return integrity, calls, nil
}

var lineDirective = regexp.MustCompile(`^\s*#\s*(line\s+)?[0-9]+`)

// directiveLine is the line of the first #line directive in a file, or 0.
func directiveLine(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for i, l := range strings.Split(string(data), "\n") {
		if lineDirective.MatchString(l) {
			return i + 1
		}
	}
	return 0
}

// firstGlob is the identifier matching pattern that comes first in the file (by line).
func firstGlob(idents map[string]ppIdent, pattern string) (string, ppIdent, bool) {
	var (
		best   string
		bestAt ppIdent
	)
	for id, at := range idents {
		if !globMatch(pattern, id) {
			continue
		}
		if best == "" || at.file == bestAt.file && at.line < bestAt.line || at.file == bestAt.file && at.line == bestAt.line && id < best {
			best, bestAt = id, at
		}
	}
	return best, bestAt, best != ""
}
