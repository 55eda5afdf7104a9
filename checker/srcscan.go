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
		for _, id := range identifiers(code) {
			if _, ok := idents[id]; !ok {
				idents[id] = at
			}
		}
	}
	return idents, lineDirs, sc.Err()
}

// identifiers lists the C identifiers of one line of code, outside string and character
// literals — and inside them too on a line with inline assembly (asm, __asm__).
func identifiers(line string) []string {
	asm := false
	for _, w := range []string{"asm", "__asm__", "__asm"} {
		if containsWord(line, w) {
			asm = true
		}
	}
	var ids []string
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
			if asm {
				ids = append(ids, identifiers(line[i+1:min(j, len(line))])...)
			}
			i = j + 1
		case isIdentStart(c):
			j := i + 1
			for j < len(line) && (isIdentStart(line[j]) || isIdentDigit(line[j])) {
				j++
			}
			ids = append(ids, line[i:j])
			i = j
		case isIdentDigit(c):
			// a number, with its suffix or exponent: no identifier starts inside it
			j := i + 1
			for j < len(line) && (isIdentStart(line[j]) || isIdentDigit(line[j]) || line[j] == '.') {
				j++
			}
			i = j
		default:
			i++
		}
	}
	return ids
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(w)
		if (j == 0 || !isIdentStart(s[j-1]) && !isIdentDigit(s[j-1])) &&
			(end == len(s) || !isIdentStart(s[end]) && !isIdentDigit(s[end])) {
			return true
		}
		i = j + 1
	}
}

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
