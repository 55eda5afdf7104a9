package build

import (
	"regexp"
	"strconv"
	"strings"
)

var (
	// gcc, clang and nvcc's host pass: "file:line:col: error: msg" or "file:line: error: msg".
	gccDiag = regexp.MustCompile(`^(.+?):(\d+)(?::\d+)?: (fatal error|error|warning): (.*)$`)
	// nvcc's front end: "file(line): error: msg", "file(line): warning #177-D: msg".
	nvccDiag = regexp.MustCompile(`^(.+?)\((\d+)\): (catastrophic error|error|warning)(?: #[\w-]+)?: (.*)$`)
	// Linkers: "/usr/bin/ld: f.o: in function `main':" then "f.c:(.text+0x5): undefined
	// reference to `foo'"; "ld: cannot find -lfoo"; "nvlink error   : Undefined reference ...".
	ldUndefined = regexp.MustCompile(`^(?:(.+?):\(.*?\): )?((?:undefined reference|multiple definition).*)$`)
	nvccFatal   = regexp.MustCompile(`^nvcc (?:fatal|error)\s*: (.*)$`)
	ldError     = regexp.MustCompile(`^(?:\S*/)?(?:ld|ld\.\w+|nvlink)(?: error)?\s*: (.*(?:cannot find|error|Undefined reference|undefined reference|multiple definition).*)$`)
)

// parseDiagnostics reads compiler and linker messages from a log whose paths are already
// the ones the learner knows. Errors come first, in the order they appeared, then warnings;
// a message repeated by a second compiler pass is kept once.
func parseDiagnostics(log string) []Diagnostic {
	var errs, warns []Diagnostic
	seen := map[Diagnostic]bool{}
	addDiag := func(d Diagnostic) {
		d.Msg = strings.TrimSpace(d.Msg)
		if seen[d] {
			return
		}
		seen[d] = true
		if d.Severity == "error" {
			errs = append(errs, d)
		} else {
			warns = append(warns, d)
		}
	}
	for _, line := range strings.Split(log, "\n") {
		line = strings.TrimRight(line, "\r")
		if m := nvccDiag.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[2])
			addDiag(Diagnostic{File: m[1], Line: n, Severity: severity(m[3]), Msg: m[4]})
			continue
		}
		if m := gccDiag.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "collect2") {
			n, _ := strconv.Atoi(m[2])
			addDiag(Diagnostic{File: m[1], Line: n, Severity: severity(m[3]), Msg: m[4]})
			continue
		}
		if m := nvccFatal.FindStringSubmatch(line); m != nil {
			addDiag(Diagnostic{Severity: "error", Msg: m[1]})
			continue
		}
		if m := ldError.FindStringSubmatch(line); m != nil {
			addDiag(Diagnostic{Severity: "error", Msg: m[1]})
			continue
		}
		if m := ldUndefined.FindStringSubmatch(line); m != nil {
			addDiag(Diagnostic{File: m[1], Severity: "error", Msg: m[2]})
		}
	}
	return append(errs, warns...)
}

func severity(s string) string {
	if strings.Contains(s, "error") {
		return "error"
	}
	return "warning"
}

// pathMap rewrites paths in compiler output. Pairs are (from, to); at every position the
// first matching pair wins, so callers list longer, more specific paths first.
type pathMap []string

func (m *pathMap) add(from, to string) {
	if from != "" && from != to {
		*m = append(*m, from, to)
	}
}

func (m pathMap) apply(s string) string {
	if len(m) == 0 || s == "" {
		return s
	}
	return strings.NewReplacer(m...).Replace(s)
}
