package checker

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The integrity rules of the policy stage (docs/protocol.md §4). They hold for every exercise,
// whatever its manifest forbids: the learner's code may not report results itself, run before
// the harness has taken its key, or replace a function the driver or the harness calls. For
// Python, csrc/python/mgpu_policy.py refuses the routes by which a module reaches past its own
// objects.

// Violation rules (Violation.Rule); "" is a call the manifest forbids.
const (
	ruleHarness   = "harness"   // a call of the harness's recording or data API
	ruleStartup   = "startup"   // code that runs before the harness's start-up
	ruleInterpose = "interpose" // a definition that replaces a function the driver or harness uses
	rulePython    = "python"    // a route mgpu_policy.py refuses
)

// learnerHarnessCalls are the harness functions a learner's code may call: the error checks of
// mgpu.h's macros (MGPU_CUDA, MGPU_KERNEL, MGPU_NCCL, MGPU_MPI) and mgpu_fail. Every other
// mgpu_ function records results, makes the run's data or times, which is the driver's part.
var learnerHarnessCalls = map[string]bool{
	"mgpu_check_cuda": true, "mgpu_check_kernel": true, "mgpu_check_nccl": true,
	"mgpu_check_mpi": true, "mgpu_fail": true, "mgpu_where_for": true,
}

var identRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// apiNames are the identifiers of the exercise's support headers: the functions the learner is
// asked to define.
func (k *check) apiNames() map[string]bool {
	names := map[string]bool{}
	for _, rel := range k.e.Support {
		if !isHeader(rel) {
			continue
		}
		data, err := k.e.ReadFile(rel)
		if err != nil {
			continue
		}
		for _, id := range identRE.FindAll(data, -1) {
			names[string(id)] = true
		}
	}
	return names
}

// isAPI says whether a defined symbol is one of the API's functions, as a C name or inside a
// C++ mangled one (<length><name>).
func isAPI(sym string, api map[string]bool) bool {
	if api[sym] {
		return true
	}
	if !strings.HasPrefix(sym, "_Z") {
		return false
	}
	for i := 2; i < len(sym); {
		if sym[i] < '0' || sym[i] > '9' {
			i++
			continue
		}
		j := i
		for j < len(sym) && sym[j] >= '0' && sym[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(sym[i:j])
		if err != nil || n <= 0 || j+n > len(sym) {
			i = j
			continue
		}
		if api[sym[j:j+n]] {
			return true
		}
		i = j
	}
	return false
}

// objectIntegrity checks the learner's objects against the integrity rules.
func (k *check) objectIntegrity(prog *program) ([]Violation, int, error) {
	courseUndef := map[string]bool{}
	for _, obj := range prog.courseObjects {
		f, err := elf.Open(obj)
		if err != nil {
			return nil, 0, fmt.Errorf("reading %s: %w", obj, err)
		}
		syms, _ := f.Symbols()
		for _, s := range syms {
			if s.Section == elf.SHN_UNDEF && s.Name != "" {
				courseUndef[s.Name] = true
			}
		}
		f.Close()
	}
	api := k.apiNames()
	var vs []Violation
	checked := 0
	for _, lf := range prog.learner {
		if !isSource(lf.Name) || lf.Object == "" {
			continue
		}
		f, err := elf.Open(lf.Object)
		if err != nil {
			return nil, 0, fmt.Errorf("reading the object of %s: %w", lf.Show, err)
		}
		checked++
		at := func(name string) string {
			if line := findInSource(lf.Path, name); line > 0 {
				return fmt.Sprintf("%s:%d", lf.Show, line)
			}
			return lf.Show
		}
		for _, sec := range f.Sections {
			n := sec.Name
			switch {
			case strings.HasPrefix(n, ".preinit_array"), n == ".init",
				strings.HasPrefix(n, ".init_array."), strings.HasPrefix(n, ".ctors."):
				word := "constructor"
				if strings.HasPrefix(n, ".preinit_array") || n == ".init" {
					word = n
				}
				vs = append(vs, Violation{Rule: ruleStartup, Symbol: n, Found: n, File: at(word),
					Why: "code placed to run before main, ahead of the harness's own start-up, could take what the harness is given; plain constructors are fine, prioritized ones, .preinit_array and .init are not"})
			}
		}
		syms, _ := f.Symbols()
		seen := map[string]bool{}
		for _, s := range syms {
			if s.Name == "" || seen[s.Name] {
				continue
			}
			defined := s.Section != elf.SHN_UNDEF
			bind, typ := elf.ST_BIND(s.Info), elf.ST_TYPE(s.Info)
			switch {
			case !defined && strings.HasPrefix(s.Name, "mgpu_") && !learnerHarnessCalls[s.Name]:
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleHarness, Symbol: s.Name, Found: s.Name, File: at(s.Name),
					Why: "the harness's recording, data and timing functions are the driver's: results count only when the driver computes and records them"})
			case defined && typ == elf.STT_GNU_IFUNC:
				seen[s.Name] = true
				vs = append(vs, Violation{Rule: ruleStartup, Symbol: s.Name, Found: s.Name, File: at(s.Name),
					Why: "an indirect function's resolver runs while the program is loaded, before the harness starts"})
			case defined && courseUndef[s.Name] && !isAPI(s.Name, api) &&
				(bind == elf.STB_GLOBAL || bind == elf.STB_WEAK && !strings.HasPrefix(s.Name, "_Z")):
				seen[s.Name] = true
				shown := demangledName(s.Name)
				vs = append(vs, Violation{Rule: ruleInterpose, Symbol: shown, Found: s.Name, File: at(shown),
					Why: "the driver or the harness calls a function of that name, and your definition would replace the library's for them; give your function another name"})
			}
		}
		f.Close()
	}
	return vs, checked, nil
}

// pythonPolicy runs mgpu_policy.py over the learner's Python files.
func (k *check) pythonPolicy(ctx context.Context, prog *program) ([]Violation, int, error) {
	var files []string
	show := map[string]string{}
	for _, lf := range prog.learner {
		if strings.HasSuffix(lf.Name, ".py") {
			files = append(files, lf.Path)
			show[lf.Path] = lf.Show
		}
	}
	if len(files) == 0 {
		return nil, 0, nil
	}
	script := filepath.Join(prog.srcDir, "mgpu_policy.py")
	cmd := exec.CommandContext(ctx, k.c.Env.Python(), append([]string{"-I", script}, files...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var vs []Violation
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var f struct {
			File, What, Why string
			Line            int
		}
		if jerr := json.Unmarshal(sc.Bytes(), &f); jerr != nil {
			return nil, 0, fmt.Errorf("mgpu_policy.py printed %q: %v", sc.Text(), jerr)
		}
		if f.What == "unreadable" {
			return nil, 0, fmt.Errorf("mgpu_policy.py could not read %s: %s", f.File, f.Why)
		}
		file := show[f.File]
		if file == "" {
			file = path.Base(filepath.ToSlash(f.File))
		}
		if f.Line > 0 {
			file = fmt.Sprintf("%s:%d", file, f.Line)
		}
		vs = append(vs, Violation{Rule: rulePython, Symbol: f.What, Found: f.What, File: file, Why: f.Why})
	}
	if err != nil && len(vs) == 0 {
		return nil, 0, fmt.Errorf("mgpu_policy.py: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return vs, len(files), nil
}

// integrityMessage is the report's explanation of integrity violations.
func integrityMessage(vs []Violation) string {
	var b strings.Builder
	for _, v := range vs {
		switch v.Rule {
		case ruleHarness:
			fmt.Fprintf(&b, "Your code calls the harness's %s (in %s): %s.\n", v.Symbol, v.File, v.Why)
		case ruleStartup:
			fmt.Fprintf(&b, "Your code has start-up code %s (in %s): %s.\n", v.Symbol, v.File, v.Why)
		case ruleInterpose:
			fmt.Fprintf(&b, "Your code defines %s (in %s): %s.\n", v.Symbol, v.File, v.Why)
		case ruleSource:
			fmt.Fprintf(&b, "Your code has %s (in %s): %s.\n", v.Found, v.File, v.Why)
		case rulePython:
			fmt.Fprintf(&b, "Your code uses %s (in %s), which %s.\n", v.Symbol, v.File, v.Why)
		}
	}
	b.WriteString("The check trusts only what the course's driver computes and records; write the functions the task asks for and nothing that reaches past them.")
	return b.String()
}
