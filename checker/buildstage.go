package checker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/build"
)

// program is what the build stage produced: what to run and what the learner's files became.
type program struct {
	// courseObjects are the driver's and harness's objects (c/cuda).
	courseObjects []string
	srcDir        string
	argv          []string
	env           []string
	learner       []learnerFile
	course        []courseFile
	// verifier is the verifier program (exercises with `verifier: true`; docs/protocol.md §4):
	// the driver built with -DMGPU_VERIFIER and the harness, no learner code. nil otherwise.
	verifier []string
	// verifierEnv is added last to the verifier's environment (Python: a path without the
	// learner's files).
	verifierEnv []string
	// ncclWatch is NCCL's watch, the profiler plugin the ranks load (ncclwatch.go); "" when
	// the exercise forbids no collective NCCL can report.
	ncclWatch string
}

type learnerFile struct {
	Name   string // as the manifest lists it
	Path   string // on disk
	Show   string // as the learner sees it
	Object string // compiled object (c/cuda)
	PP     string // its preprocessed lines (c/cuda; runtime/build/preprocess.go)
	PTX    string // the PTX nvcc made of it (.cu files; the ordering rule reads it)
}

func isHeader(name string) bool {
	switch path.Ext(name) {
	case ".h", ".cuh", ".hpp", ".hh":
		return true
	}
	return false
}

func isSource(name string) bool {
	switch path.Ext(name) {
	case ".c", ".cu", ".cpp", ".cc", ".cxx":
		return true
	}
	return false
}

// checkDir is this check's directory under WorkDir/runs, created on first use; older ones
// beyond KeepRuns are removed.
func (k *check) checkDir() (string, error) {
	if k.dir != "" {
		return k.dir, nil
	}
	runs := filepath.Join(k.c.WorkDir, "runs")
	if err := os.MkdirAll(runs, 0o755); err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-%s-%s", time.Now().Format("20060102-150405"), sanitize(k.rep.Exercise), sanitize(k.rep.Target))
	dir, err := os.MkdirTemp(runs, name+"-")
	if err != nil {
		return "", err
	}
	k.dir = dir
	k.c.pruneRuns(runs, dir)
	return dir, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// runsMinAge: a check directory younger than this may belong to a check still running in
// another process (a course author's parallel builds, a TUI beside a CLI check), so pruning
// leaves it alone even beyond KeepRuns.
const runsMinAge = time.Hour

// pruneRuns keeps the newest KeepRuns check directories (by name, which starts with the time),
// and every directory younger than runsMinAge.
func (c *Checker) pruneRuns(runs, keep string) {
	n := c.KeepRuns
	if n <= 0 {
		n = 20
	}
	ents, err := os.ReadDir(runs)
	if err != nil {
		return
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	sort.Strings(dirs)
	now := time.Now()
	for len(dirs) > n {
		name := dirs[0]
		dirs = dirs[1:]
		if len(name) >= 15 {
			if at, err := time.ParseInLocation("20060102-150405", name[:15], time.Local); err == nil && now.Sub(at) < runsMinAge {
				break // sorted by time: every later one is younger still
			}
		}
		if p := filepath.Join(runs, name); p != keep {
			os.RemoveAll(p)
		}
	}
}

// learnerFiles resolves the target's files in manifest order.
func (k *check) learnerFiles() []learnerFile {
	var out []learnerFile
	for _, name := range k.e.Files {
		p := k.t.Files[name]
		out = append(out, learnerFile{Name: name, Path: p, Show: k.showPath(p)})
	}
	return out
}

// build runs the build stage; nil when it failed.
func (k *check) build(ctx context.Context) *program {
	k.start(StageBuild)
	e := k.e
	files, err := k.courseFiles()
	if err != nil {
		k.fail(StageBuild, FaultRunner, "the course's files for this exercise are missing", err.Error())
		return nil
	}
	// C and CUDA: the harness in a directory of its own, the driver and its support files in
	// another. A harness source then compiles with the harness's headers only, and its object
	// (its key: those headers, its bytes, the flags) is shared by every exercise and by the
	// verifier; with the exercise's headers beside it, each exercise compiled it again.
	own, harness := files, []courseFile(nil)
	if e.Kind == "cuda" || e.Kind == "c" {
		own = nil
		for _, f := range files {
			if f.Role == "harness" {
				harness = append(harness, f)
			} else {
				own = append(own, f)
			}
		}
	}
	srcDir, err := k.materialize(own)
	harnessDir := ""
	if err == nil && harness != nil {
		harnessDir, err = k.materialize(harness)
	}
	if err != nil {
		k.fail(StageBuild, FaultRunner, "cannot write the build sources", err.Error())
		return nil
	}
	prog := &program{srcDir: srcDir, learner: k.learnerFiles(), course: files}
	for _, lf := range prog.learner {
		if _, err := os.Stat(lf.Path); err != nil {
			k.fail(StageBuild, FaultYou, fmt.Sprintf("your file %s is missing", lf.Show),
				fmt.Sprintf("The exercise needs your file %s (looked for %s).\n`mgpu-learn reset %s` puts the starter back.", lf.Show, lf.Path, e.ID))
			return nil
		}
	}
	if e.Kind == "python" {
		if !k.buildPython(ctx, prog) {
			return nil
		}
		return prog
	}
	if e.Kind != "cuda" && e.Kind != "c" {
		k.fail(StageBuild, FaultRunner, fmt.Sprintf("unknown exercise kind %q", e.Kind), "The manifest's kind must be cuda, c or python.")
		return nil
	}
	tc := k.c.Env.Toolchain(e.Launch.CudaAwareMPI)
	if tc == nil {
		k.fail(StageBuild, FaultMachine, "no compiler found", "No toolchain was found for this exercise; `mgpu-learn doctor` shows what this machine has.")
		return nil
	}
	headers := []string{srcDir}
	if harnessDir != "" {
		headers = []string{harnessDir, srcDir}
	}
	req := build.Request{
		Kind:      e.Kind,
		Headers:   headers,
		Flags:     e.Build.Flags,
		Libs:      e.Build.Libs,
		RDC:       e.Build.RDC,
		Rebuild:   k.c.Rebuild,
		Toolchain: tc,
	}
	for _, lf := range prog.learner {
		if isSource(lf.Name) {
			abs, _ := filepath.Abs(lf.Path)
			req.Sources = append(req.Sources, build.Source{Path: abs, Role: build.RoleLearner, Show: lf.Show})
		}
		// A learner header must be found by the driver too. (A learner source finds headers
		// beside it without this; leaving the directory out keeps the course's objects cached
		// across learners' edits.)
		if isHeader(lf.Name) {
			if d, _ := filepath.Abs(filepath.Dir(lf.Path)); !contains(req.Headers, d) {
				req.Headers = append(req.Headers, d)
			}
		}
	}
	for _, f := range own {
		if isSource(f.Name) {
			req.Sources = append(req.Sources, build.Source{Path: filepath.Join(srcDir, f.Name), Role: build.RoleDriver, Show: f.Show})
		}
	}
	for _, f := range harness {
		if isSource(f.Name) {
			req.Sources = append(req.Sources, build.Source{Path: filepath.Join(harnessDir, f.Name), Role: build.RoleHarness,
				Show: f.Show, Headers: []string{harnessDir}})
		}
	}
	res, err := k.c.Builder.Build(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			k.fail(StageBuild, FaultRunner, "canceled", "The build was canceled.")
			return nil
		}
		k.fail(StageBuild, FaultRunner, "the build could not run", err.Error())
		return nil
	}
	sum := &BuildSummary{Cached: res.Cached, Duration: Seconds(res.Duration), Binary: res.Binary}
	k.rep.Build = sum
	if res.Log != "" {
		if dir, err := k.checkDir(); err == nil {
			logPath := filepath.Join(dir, "build.log")
			if os.WriteFile(logPath, []byte(res.Log), 0o644) == nil {
				sum.Log = logPath
			}
		}
		for _, line := range strings.Split(strings.TrimRight(res.Log, "\n"), "\n") {
			k.emit(BuildLine{Line: line})
		}
	}
	for _, d := range res.Diagnostics {
		sum.Diagnostics = append(sum.Diagnostics, Diagnostic{File: d.File, Line: d.Line, Severity: d.Severity, Msg: d.Msg, Learner: k.isLearnerFile(prog, d.File)})
	}
	if !res.OK {
		k.buildFailed(prog, res, sum)
		return nil
	}
	for i, lf := range prog.learner {
		if isSource(lf.Name) {
			prog.learner[i].Object = res.Objects[lf.Show]
			prog.learner[i].PP = res.Preprocessed[lf.Show]
			prog.learner[i].PTX = res.PTX[lf.Show]
		}
	}
	prog.argv = []string{res.Binary}
	prog.env = res.RuntimeEnv
	prog.courseObjects = res.CourseObjects
	detail := fmt.Sprintf("compiled %d of %d source(s) in %s", res.Compiled, len(req.Sources), fmtDuration(res.Duration))
	if res.Cached {
		detail = "cached"
	}
	if e.Verifier {
		vbin, why := k.buildVerifier(ctx, req)
		if vbin == "" {
			k.fail(StageBuild, FaultRunner, "the exercise's verifier does not build", why)
			return nil
		}
		prog.verifier = []string{vbin}
		detail += "; verifier built"
	}
	watch, ok := k.prepareWatch(ctx, tc)
	if !ok {
		return nil
	}
	prog.ncclWatch = watch
	k.watch = watch
	k.done(StageBuild, StatusOK, detail)
	return prog
}

// buildVerifier builds the verifier program: the rank program's request without the learner's
// sources, the driver compiled with MGPU_VERIFIER (which compiles its MGPU_LEARNER calls out).
// It returns the binary, or "" and why not (a course bug: the learner's code is not in it).
func (k *check) buildVerifier(ctx context.Context, req build.Request) (string, string) {
	v := req
	v.Sources = nil
	for _, s := range req.Sources {
		switch s.Role {
		case build.RoleLearner:
		case build.RoleDriver:
			// MGPU_VERIFIER is read by mgpu.h's MGPU_LEARNER, in the driver and its support
			// files; the harness's sources do not use it, and keep the objects of the rank's
			// program.
			s.Flags = append(slices.Clone(s.Flags), "-DMGPU_VERIFIER")
			v.Sources = append(v.Sources, s)
		default:
			v.Sources = append(v.Sources, s)
		}
	}
	res, err := k.c.Builder.Build(ctx, v)
	switch {
	case err != nil:
		return "", err.Error()
	case !res.OK:
		var b strings.Builder
		b.WriteString("The driver compiled with -DMGPU_VERIFIER and without the learner's files did not build (a calling of the learner's code outside MGPU_LEARNER?):\n")
		for _, d := range res.Diagnostics {
			fmt.Fprintf(&b, "  %s:%d: %s: %s\n", d.File, d.Line, d.Severity, d.Msg)
		}
		if len(res.Diagnostics) == 0 {
			b.WriteString(lastLines(res.Log, 20))
		}
		return "", b.String()
	}
	return res.Binary, ""
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// isLearnerFile says whether a diagnostic's file is one of the learner's.
func (k *check) isLearnerFile(prog *program, file string) bool {
	if file == "" {
		return false
	}
	for _, lf := range prog.learner {
		if file == lf.Show || file == lf.Path {
			return true
		}
	}
	// Compilers sometimes print another spelling of the path: fall back to the base name when
	// no course file has it.
	base := path.Base(filepath.ToSlash(file))
	for _, f := range prog.course {
		if f.Name == base || file == f.Show {
			return false
		}
	}
	for _, lf := range prog.learner {
		if path.Base(lf.Show) == base {
			return true
		}
	}
	return false
}

func (k *check) isCourseFile(prog *program, file string) bool {
	if file == "" {
		return false
	}
	base := path.Base(filepath.ToSlash(file))
	for _, f := range prog.course {
		if file == f.Show || base == f.Name {
			return true
		}
	}
	return false
}

var undefinedRef = regexp.MustCompile("undefined reference to [`'\"]([^'`\"]+)['`\"]")

// buildFailed reports a failed build: the first error first, whose fault it is, and where the
// whole log is.
func (k *check) buildFailed(prog *program, res *build.Result, sum *BuildSummary) {
	var first *Diagnostic
	nerr := 0
	for i := range sum.Diagnostics {
		if sum.Diagnostics[i].Severity == "error" || sum.Diagnostics[i].Severity == "fatal error" {
			if first == nil {
				first = &sum.Diagnostics[i]
			}
			nerr++
		}
	}
	var b strings.Builder
	fault := FaultYou
	var headline string
	logLine := ""
	if sum.Log != "" {
		logLine = "The whole compiler output is in " + sum.Log + "."
	}
	switch {
	case first != nil && first.Learner:
		headline = fmt.Sprintf("%s: %s", where(first.File, first.Line), first.Msg)
		fmt.Fprintf(&b, "Your code does not compile. The first error:\n\n  %s: error: %s\n", where(first.File, first.Line), first.Msg)
		if ctx := sourceContext(k.learnerPathFor(prog, first.File), first.Line); ctx != "" {
			b.WriteString(ctx)
		}
	case first != nil && k.isCourseFile(prog, first.File) && !k.anyLearnerError(sum):
		fault = FaultRunner
		headline = fmt.Sprintf("a course file does not compile: %s: %s", where(first.File, first.Line), first.Msg)
		fmt.Fprintf(&b, "A file of the course (not yours) failed to compile:\n\n  %s: error: %s\n", where(first.File, first.Line), first.Msg)
	case first != nil && k.anyLearnerError(sum):
		// A course file's error caused by the learner (e.g. a changed signature): show the
		// learner's first error.
		for i := range sum.Diagnostics {
			d := &sum.Diagnostics[i]
			if d.Learner && (d.Severity == "error" || d.Severity == "fatal error") {
				first = d
				break
			}
		}
		headline = fmt.Sprintf("%s: %s", where(first.File, first.Line), first.Msg)
		fmt.Fprintf(&b, "Your code does not compile. The first error in your files:\n\n  %s: error: %s\n", where(first.File, first.Line), first.Msg)
	default:
		msg := firstErrorLine(res.Log)
		if first != nil {
			msg = first.Msg
		}
		lower := strings.ToLower(msg + "\n" + res.Log)
		switch {
		case strings.Contains(lower, "cannot find -l") || strings.Contains(lower, "unable to find library"):
			fault = FaultRunner
			headline = "the linker cannot find a library: " + msg
			fmt.Fprintf(&b, "The program did not link because a library is missing:\n\n  %s\n\nThis is a problem of the setup, not of your code; `mgpu-learn doctor` checks the libraries.\n", msg)
		case undefinedRef.MatchString(res.Log):
			sym := undefinedRef.FindStringSubmatch(res.Log)[1]
			if strings.HasPrefix(sym, "mgpu_") {
				fault = FaultRunner
				headline = "the harness does not link: undefined " + sym
				fmt.Fprintf(&b, "The harness is missing %s; this is a bug in the course.\n", sym)
			} else {
				headline = "the program does not link: undefined reference to " + sym
				fmt.Fprintf(&b, "The program does not link: nothing defines %s.\nThe driver calls the functions the task names; check that your file defines each of them, with the same name and parameters.\n", sym)
			}
		case strings.Contains(lower, "multiple definition of"):
			headline = "the program does not link: " + msg
			fmt.Fprintf(&b, "The program does not link:\n\n  %s\n\nYour file defines something the course already defines (main, or a harness function).\n", msg)
		case msg == "":
			fault = FaultRunner
			headline = "the compiler failed without an error message"
			b.WriteString("The compiler failed but printed no error.\n")
		default:
			headline = "the build failed: " + msg
			fmt.Fprintf(&b, "The build failed:\n\n  %s\n", msg)
		}
	}
	if nerr > 1 {
		fmt.Fprintf(&b, "\n(%d errors in all; fix the first one first: later ones often follow from it.)\n", nerr)
	}
	if logLine != "" {
		b.WriteString("\n" + logLine + "\n")
	}
	k.fail(StageBuild, fault, headline, b.String())
}

func (k *check) anyLearnerError(sum *BuildSummary) bool {
	for _, d := range sum.Diagnostics {
		if d.Learner && (d.Severity == "error" || d.Severity == "fatal error") {
			return true
		}
	}
	return false
}

func (k *check) learnerPathFor(prog *program, show string) string {
	for _, lf := range prog.learner {
		if lf.Show == show || lf.Path == show || path.Base(lf.Show) == path.Base(filepath.ToSlash(show)) {
			return lf.Path
		}
	}
	return ""
}

func where(file string, line int) string {
	if line > 0 {
		return file + ":" + strconv.Itoa(line)
	}
	return file
}

// sourceContext shows line (1-based) of the file with a marker, or "".
func sourceContext(file string, line int) string {
	if file == "" || line <= 0 {
		return ""
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	if line > len(lines) {
		return ""
	}
	return fmt.Sprintf("\n  %5d | %s\n", line, strings.TrimRight(lines[line-1], "\r"))
}

func firstErrorLine(log string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(strings.ToLower(l), "error") {
			return strings.TrimSpace(l)
		}
	}
	for _, l := range strings.Split(log, "\n") {
		if s := strings.TrimSpace(l); s != "" {
			return s
		}
	}
	return ""
}

var pySyntax = regexp.MustCompile(`^(.*):(\d+):(\d+): (.*)$`)

// pyCheck compiles each file in memory and prints "path:line:col: message" for syntax errors.
// It is py_compile without the __pycache__ it would write into the learner's workspace.
const pyCheck = `import sys
bad = 0
for p in sys.argv[1:]:
    try:
        with open(p, "rb") as f:
            compile(f.read(), p, "exec", dont_inherit=True)
    except SyntaxError as e:
        msg = e.msg if e.text is None else e.msg + ": " + e.text.strip()
        print("%s:%d:%d: %s" % (p, e.lineno or 0, e.offset or 0, msg))
        bad = 1
    except ValueError as e:
        print("%s:0:0: %s" % (p, e))
        bad = 1
sys.exit(bad)
`

// buildPython checks the learner's Python files for syntax errors and sets up the run.
func (k *check) buildPython(ctx context.Context, prog *program) bool {
	py := k.c.Env.Python()
	var paths []string
	for _, lf := range prog.learner {
		if strings.HasSuffix(lf.Name, ".py") {
			paths = append(paths, lf.Path)
		}
	}
	start := time.Now()
	if len(paths) > 0 {
		cmd := exec.CommandContext(ctx, py, append([]string{"-c", pyCheck}, paths...)...)
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			k.fail(StageBuild, FaultRunner, "cannot run "+py, err.Error())
			return false
		}
		if err != nil {
			sum := &BuildSummary{Duration: Seconds(time.Since(start))}
			k.rep.Build = sum
			var first *Diagnostic
			for _, l := range strings.Split(out.String(), "\n") {
				m := pySyntax.FindStringSubmatch(l)
				if m == nil {
					continue
				}
				line, _ := strconv.Atoi(m[2])
				file := m[1]
				for _, lf := range prog.learner {
					if lf.Path == file {
						file = lf.Show
					}
				}
				sum.Diagnostics = append(sum.Diagnostics, Diagnostic{File: file, Line: line, Severity: "error", Msg: m[4], Learner: true})
				if first == nil {
					first = &sum.Diagnostics[len(sum.Diagnostics)-1]
				}
			}
			if first == nil {
				k.fail(StageBuild, FaultRunner, "the Python syntax check failed", out.String())
				return false
			}
			msg := fmt.Sprintf("Your Python code has a syntax error:\n\n  %s: %s\n", where(first.File, first.Line), first.Msg)
			msg += sourceContext(k.learnerPathFor(prog, first.File), first.Line)
			k.fail(StageBuild, FaultYou, where(first.File, first.Line)+": "+first.Msg, msg)
			return false
		}
	}
	k.rep.Build = &BuildSummary{Duration: Seconds(time.Since(start))}
	prog.argv = []string{py, filepath.Join(prog.srcDir, k.e.Driver)}
	// The learner's files are imported from a private copy holding those files alone: the
	// workspace folder itself is never on the path, so nothing else in it (a sitecustomize.py,
	// a module named like torch's or the harness's) can be imported in their place.
	var mine []courseFile
	for _, lf := range prog.learner {
		data, err := os.ReadFile(lf.Path)
		if err != nil {
			k.fail(StageBuild, FaultRunner, "cannot read "+lf.Show, err.Error())
			return false
		}
		mine = append(mine, courseFile{Name: path.Base(filepath.ToSlash(lf.Name)), Show: lf.Show, Role: "learner", Data: data})
	}
	learnerDir, err := k.materialize(mine)
	if err != nil {
		k.fail(StageBuild, FaultRunner, "cannot copy your files for the run", err.Error())
		return false
	}
	pyPath := []string{prog.srcDir, learnerDir}
	if old := os.Getenv("PYTHONPATH"); old != "" {
		pyPath = append(pyPath, old)
	}
	prog.env = []string{"PYTHONPATH=" + strings.Join(pyPath, string(os.PathListSeparator)), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}
	if k.e.Verifier {
		// The verifier runs the same driver without the learner's files on its path: it never
		// imports them (docs/protocol.md §4, "The verifier").
		vPath := []string{prog.srcDir}
		if old := os.Getenv("PYTHONPATH"); old != "" {
			vPath = append(vPath, old)
		}
		prog.verifier = prog.argv
		prog.verifierEnv = []string{"PYTHONPATH=" + strings.Join(vPath, string(os.PathListSeparator))}
	}
	k.done(StageBuild, StatusOK, "syntax checked")
	return true
}
