package course

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// CourseFile is the path of the course index inside the course file system.
const CourseFile = "lessons/course.yaml"

type courseYAML struct {
	Title   string   `yaml:"title"`
	Modules []string `yaml:"modules"`
}

type moduleYAML struct {
	ID        string   `yaml:"id"`
	Title     string   `yaml:"title"`
	Summary   string   `yaml:"summary"`
	Exercises []string `yaml:"exercises"`
}

// The vocabularies of the manifest. docs/manifest.md lists the same words.
var (
	kinds       = []string{"cuda", "c", "python"}
	launchers   = []string{"local", "single", "mpirun", "torchrun"}
	metrics     = []string{"busbw", "algbw", "time"}
	stages      = []string{"build", "policy", "run", "correctness", "performance", "pass"}
	buildLibs   = []string{"nccl", "mpi", "nvshmem", "cuda", "pthread"}
	requireLibs = []string{"nccl", "mpi", "cuda-aware-mpi", "nvshmem", "torch", "nvcc", "cc"}
	// nvlsVars are set by every launcher and may not be overridden by a manifest.
	nvlsVars = []string{"NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS", "TORCH_SYMM_MEM_DISABLE_MULTICAST"}
)

var (
	moduleIDRe   = regexp.MustCompile(`^module[0-9]+$`)
	nameRe       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	lessonFileRe = regexp.MustCompile(`^[0-9]+-.+\.md$`)
	computeRe    = regexp.MustCompile(`^[0-9]+\.[0-9]+$`)
)

const hiddenMsg = "names starting with \".\" or \"_\" are left out of the built-in course by go:embed"

type loader struct {
	fsys fs.FS
	errs ErrorList
	c    *Course
	// lessonRoots are the front-matter nodes by lesson path, for locating bad references.
	lessonRoots map[string]*yaml.Node
	// exerciseRoots are the manifests' root nodes by exercise folder.
	exerciseRoots map[string]*yaml.Node
	// broken are the ids (<module id>/<folder>) of exercises whose manifest could not be read
	// fully: references to them are not reported again.
	broken map[string]bool
}

// Load reads and validates the course in fsys, whose root holds lessons/ and exercises/. On any
// problem it returns a nil course and an ErrorList naming the file and line of every problem
// found.
func Load(fsys fs.FS) (*Course, error) {
	ld := &loader{
		fsys:          fsys,
		c:             &Course{FS: fsys},
		lessonRoots:   map[string]*yaml.Node{},
		exerciseRoots: map[string]*yaml.Node{},
		broken:        map[string]bool{},
	}
	ld.load()
	ld.errs.sort()
	if err := ld.errs.err(); err != nil {
		return nil, err
	}
	return ld.c, nil
}

func (ld *loader) load() {
	data, err := fs.ReadFile(ld.fsys, CourseFile)
	if err != nil {
		ld.errs.add(CourseFile, 0, "cannot read the course index: %v", plainErr(err))
		return
	}
	var cy courseYAML
	root, clean := decodeYAML(CourseFile, data, 0, &cy, &ld.errs)
	if !clean {
		return
	}
	ld.c.Title = strings.TrimSpace(cy.Title)
	if ld.c.Title == "" {
		ld.errs.add(CourseFile, keyLine(root, "title"), "title is missing or empty")
	}
	if len(cy.Modules) == 0 {
		ld.errs.add(CourseFile, keyLine(root, "modules"), "modules is missing or empty: list the module folders under lessons/")
	}
	seenDir := map[string]int{}
	seenID := map[string]string{}
	for i, dir := range cy.Modules {
		line := lineOf(root, "modules", i)
		if !validName(dir) {
			ld.errs.add(CourseFile, line, "module folder %q is not a plain folder name", dir)
			continue
		}
		if prev, dup := seenDir[dir]; dup {
			ld.errs.add(CourseFile, line, "module folder %q is listed twice (first at line %d)", dir, prev)
			continue
		}
		seenDir[dir] = line
		m := ld.loadModule(dir, line, seenID)
		if m != nil {
			ld.c.Modules = append(ld.c.Modules, m)
		}
	}
	ld.crossCheck()
}

func (ld *loader) loadModule(dir string, courseLine int, seenID map[string]string) *Module {
	file := path.Join("lessons", dir, "module.yaml")
	data, err := fs.ReadFile(ld.fsys, file)
	if err != nil {
		ld.errs.add(CourseFile, courseLine, "module folder %q: cannot read %s: %v", dir, file, plainErr(err))
		return nil
	}
	var my moduleYAML
	root, clean := decodeYAML(file, data, 0, &my, &ld.errs)
	if !clean {
		return nil
	}
	m := &Module{ID: my.ID, Dir: dir, Title: strings.TrimSpace(my.Title), Summary: strings.TrimSpace(my.Summary)}
	switch {
	case my.ID == "":
		ld.errs.add(file, keyLine(root, "id"), "id is missing: write the module id, e.g. \"module0\"")
	case !moduleIDRe.MatchString(my.ID):
		ld.errs.add(file, lineOf(root, "id"), "id %q is not of the form module<N> (e.g. \"module0\")", my.ID)
	case seenID[my.ID] != "":
		ld.errs.add(file, lineOf(root, "id"), "module id %q is already used by %s", my.ID, seenID[my.ID])
	case dir != my.ID && !strings.HasPrefix(dir, my.ID+"-"):
		ld.errs.add(file, lineOf(root, "id"), "module id %q does not match its folder %q: the folder must be %q or start with %q", my.ID, dir, my.ID, my.ID+"-")
	}
	if my.ID != "" && seenID[my.ID] == "" {
		seenID[my.ID] = file
	}
	if m.Title == "" {
		ld.errs.add(file, keyLine(root, "title"), "title is missing or empty")
	}

	ld.loadLessons(m)

	exDir := path.Join("exercises", dir)
	listed := map[string]int{}
	for i, name := range my.Exercises {
		line := lineOf(root, "exercises", i)
		if !validName(name) {
			ld.errs.add(file, line, "exercise folder %q is not a plain folder name (letters, digits, '.', '_', '-')", name)
			continue
		}
		if prev, dup := listed[name]; dup {
			ld.errs.add(file, line, "exercise %q is listed twice (first at line %d)", name, prev)
			continue
		}
		listed[name] = line
		man := path.Join(exDir, name, "exercise.yaml")
		if !isFile(ld.fsys, man) {
			ld.errs.add(file, line, "exercise %q is listed but %s does not exist", name, man)
			continue
		}
		if e := ld.loadExercise(m, path.Join(exDir, name)); e != nil {
			m.Exercises = append(m.Exercises, e)
		}
	}
	if entries, err := fs.ReadDir(ld.fsys, exDir); err == nil {
		for _, de := range entries {
			if !de.IsDir() || hidden(de.Name()) || de.Name() == SharedDir {
				continue
			}
			if _, ok := listed[de.Name()]; !ok {
				ld.errs.add(file, keyLine(root, "exercises"), "exercise folder %s is not listed in exercises", path.Join(exDir, de.Name()))
			}
		}
	}
	return m
}

func (ld *loader) loadLessons(m *Module) {
	dir := path.Join("lessons", m.Dir)
	entries, err := fs.ReadDir(ld.fsys, dir)
	if err != nil {
		return // the module.yaml was read, so the folder exists; nothing more to say
	}
	var names []string
	for _, de := range entries {
		if !de.IsDir() && lessonFileRe.MatchString(de.Name()) {
			names = append(names, de.Name())
		}
	}
	sort.Strings(names)
	for _, name := range names {
		file := path.Join(dir, name)
		data, err := fs.ReadFile(ld.fsys, file)
		if err != nil {
			ld.errs.add(file, 0, "cannot read: %v", plainErr(err))
			continue
		}
		l, root := parseLesson(file, data, &ld.errs)
		l.ModuleID = m.ID
		l.ID = m.ID + "/" + strings.TrimSuffix(name, ".md")
		if l.Title == "" {
			l.Title = strings.TrimSuffix(name, ".md")
		}
		ld.lessonRoots[file] = root
		m.Lessons = append(m.Lessons, l)
	}
}

func (ld *loader) loadExercise(m *Module, dir string) *Exercise {
	file := path.Join(dir, "exercise.yaml")
	data, err := fs.ReadFile(ld.fsys, file)
	if err != nil {
		ld.errs.add(file, 0, "cannot read: %v", plainErr(err))
		return nil
	}
	e := &Exercise{Module: m, Dir: dir, fsys: ld.fsys}
	root, clean := decodeYAML(file, data, 0, &e.Manifest, &ld.errs)
	if !clean {
		ld.broken[m.ID+"/"+e.Name()] = true
	}
	if root == nil {
		return nil
	}
	ld.exerciseRoots[dir] = root
	if clean {
		v := &exerciseCheck{ld: ld, e: e, file: file, root: root}
		v.check()
	}
	return e
}

// crossCheck checks what spans files: exercise ids, lesson references in both directions.
func (ld *loader) crossCheck() {
	seen := map[string]string{}
	for _, m := range ld.c.Modules {
		for _, e := range m.Exercises {
			if e.ID == "" {
				continue
			}
			file := path.Join(e.Dir, "exercise.yaml")
			if prev, dup := seen[e.ID]; dup {
				ld.errs.add(file, lineOf(ld.exerciseRoots[e.Dir], "id"), "duplicate exercise id %q (also %s)", e.ID, prev)
				continue
			}
			seen[e.ID] = file
		}
	}
	for _, m := range ld.c.Modules {
		for _, l := range m.Lessons {
			root := ld.lessonRoots[l.Path]
			for i, id := range l.Exercises {
				if ld.c.Exercise(id) == nil && !ld.broken[id] {
					msg := fmt.Sprintf("exercise %q does not exist", id)
					if near := ld.c.closeMatches(id); len(near) > 0 {
						msg += fmt.Sprintf("; did you mean %s?", strings.Join(near, ", "))
					} else if !strings.Contains(id, "/") {
						msg += "; write the full id, e.g. \"" + m.ID + "/" + id + "\""
					}
					ld.errs.add(l.Path, lineOf(root, "exercises", i), "%s", msg)
				}
			}
		}
		for _, e := range m.Exercises {
			if e.Lesson != "" && ld.c.Lesson(e.Lesson) == nil {
				ld.errs.add(path.Join(e.Dir, "exercise.yaml"), lineOf(ld.exerciseRoots[e.Dir], "lesson"),
					"lesson %q does not exist (a lesson id is <module id>/<file name without .md>)", e.Lesson)
			}
		}
	}
}

// exerciseCheck validates one manifest.
type exerciseCheck struct {
	ld   *loader
	e    *Exercise
	file string
	root *yaml.Node
}

func (v *exerciseCheck) errAt(line int, format string, args ...any) {
	v.ld.errs.add(v.file, line, format, args...)
}

func (v *exerciseCheck) at(p ...any) int { return lineOf(v.root, p...) }

func (v *exerciseCheck) key(k string) int { return keyLine(v.root, k) }

func (v *exerciseCheck) exists(rel string) bool { return isFile(v.ld.fsys, path.Join(v.e.Dir, rel)) }

// handsOver reports whether any of the exercise's files rel (support files may be in
// ../shared/) calls a hand-over (docs/protocol.md §4).
func (v *exerciseCheck) handsOver(rel []string) bool {
	for _, r := range rel {
		if b, err := fs.ReadFile(v.ld.fsys, path.Join(v.e.Dir, r)); err == nil && bytes.Contains(b, []byte("hand_over(")) {
			return true
		}
	}
	return false
}

// watchedNCCL are the NCCL calls NCCL's watch reports (docs/protocol.md §4), each with the name
// NCCL's profiler gives it. The all-to-all family reaches the profiler as the Send and Recv
// events it is made of and is not here.
var watchedNCCL = []struct{ Symbol, Name string }{
	{"ncclAllReduce", "AllReduce"},
	{"ncclReduceScatter", "ReduceScatter"},
	{"ncclAllGather", "AllGather"},
	{"ncclReduce", "Reduce"},
	{"ncclBroadcast", "Broadcast"},
	{"ncclBcast", "Broadcast"},
	{"ncclSend", "Send"},
	{"ncclRecv", "Recv"},
}

// NCCLFunction is the API function behind a name NCCL's profiler reports ("AllReduce" is
// ncclAllReduce); names it does not know come back as they are.
func NCCLFunction(name string) string {
	switch name {
	case "AlltoAll", "Gather", "Scatter":
		return "nccl" + name
	}
	for _, w := range watchedNCCL {
		if w.Name == name {
			return w.Symbol
		}
	}
	return name
}

// WatchedNCCL maps, for a forbid list, the NCCL profiler's name of every collective NCCL's watch
// reports and the list forbids (by name or by pattern) to the function's name and the entry's
// reason. Empty: the list puts nothing under the watch. (Whether the watch runs also depends on
// the kind and the libraries: a cuda exercise that links NCCL.)
func WatchedNCCL(forbid []Forbidden) map[string]Forbidden {
	out := map[string]Forbidden{}
	for _, w := range watchedNCCL {
		if _, seen := out[w.Name]; seen {
			continue
		}
		for _, f := range forbid {
			ok := f.Symbol == w.Symbol
			if !ok && strings.Contains(f.Symbol, "*") {
				ok, _ = path.Match(f.Symbol, w.Symbol)
			}
			if ok {
				out[w.Name] = Forbidden{Symbol: w.Symbol, Why: f.Why}
				break
			}
		}
	}
	return out
}

var cStringRE = regexp.MustCompile(`"([^"\\]|\\.)*"`)

// ownCalls finds, in the driver and its support files, calls of a collective the manifest
// forbids and NCCL's watch reports that are not made through MGPU_NCCL_OWN: the watch would
// count them as the learner's, and the solution would fail (docs/harness.md).
func (v *exerciseCheck) ownCalls(files []string) {
	var watched []string
	for _, w := range watchedNCCL {
		for _, f := range WatchedNCCL(v.e.Forbid) {
			if f.Symbol == w.Symbol {
				watched = append(watched, w.Symbol)
			}
		}
	}
	if len(watched) == 0 {
		return
	}
	call := regexp.MustCompile(`\b(` + strings.Join(watched, "|") + `)\s*\(`)
	for _, rel := range files {
		b, err := fs.ReadFile(v.ld.fsys, path.Join(v.e.Dir, rel))
		if err != nil {
			continue
		}
		prev := ""
		for i, line := range strings.Split(string(b), "\n") {
			code := cStringRE.ReplaceAllString(line, `""`)
			if c := strings.Index(code, "//"); c >= 0 {
				code = code[:c]
			}
			t := strings.TrimSpace(code)
			if strings.HasPrefix(t, "*") || strings.HasPrefix(t, "/*") {
				continue
			}
			if m := call.FindStringSubmatch(code); m != nil && !strings.Contains(code, "MGPU_NCCL_OWN(") && !strings.HasSuffix(prev, "MGPU_NCCL_OWN(") {
				v.ld.errs.add(path.Join(v.e.Dir, rel), i+1, "the driver calls %s, which the manifest forbids and NCCL's watch reports: make the call through MGPU_NCCL_OWN(...), or the watch counts it as the learner's (docs/harness.md)", m[1])
			}
			if t != "" {
				prev = t
			}
		}
	}
}

func (v *exerciseCheck) check() {
	e, m := v.e, &v.e.Manifest
	want := e.Module.ID + "/" + e.Name()
	switch {
	case m.ID == "":
		v.errAt(v.key("id"), "id is missing: it must be %q", want)
	case m.ID != want:
		v.errAt(v.at("id"), "id %q does not match the folder: it must be %q (<module id>/<folder name>)", m.ID, want)
	}
	if strings.TrimSpace(m.Title) == "" {
		v.errAt(v.key("title"), "title is missing or empty")
	}
	switch {
	case m.Kind == "":
		v.errAt(v.key("kind"), "kind is missing: one of %s", strings.Join(kinds, ", "))
	case !oneOf(m.Kind, kinds):
		v.errAt(v.at("kind"), "kind %q is not one of %s", m.Kind, strings.Join(kinds, ", "))
	}
	switch {
	case m.Task == "":
		v.errAt(v.key("task"), "task is missing: name the markdown file that states the task (e.g. task.md)")
	case !fs.ValidPath(m.Task) || m.Task == ".":
		v.errAt(v.at("task"), "task %q is not a relative path inside the exercise folder", m.Task)
	case hasHiddenPart(m.Task):
		v.errAt(v.at("task"), "task %q: %s", m.Task, hiddenMsg)
	case !v.exists(m.Task):
		v.errAt(v.at("task"), "task file %s does not exist", path.Join(e.Dir, m.Task))
	}
	switch {
	case m.Driver == "":
		v.errAt(v.key("driver"), "driver is missing: name the course-owned file that has main")
	case !fs.ValidPath(m.Driver) || m.Driver == ".":
		v.errAt(v.at("driver"), "driver %q is not a relative path inside the exercise folder", m.Driver)
	case hasHiddenPart(m.Driver):
		v.errAt(v.at("driver"), "driver %q: %s", m.Driver, hiddenMsg)
	case !v.exists(m.Driver):
		v.errAt(v.at("driver"), "driver file %s does not exist", path.Join(e.Dir, m.Driver))
	case m.Verifier:
		// A split driver hands the rank's outputs to its verifier (docs/protocol.md §4); one that
		// never does leaves the verifier nothing to check. The hand-overs may be in a support
		// file the driver includes (a module's shared bench).
		if !v.handsOver(append([]string{m.Driver}, m.Support...)) {
			v.errAt(v.key("verifier"), "verifier: true, but neither the driver %s nor its support files ever hand an output over (mgpu_hand_over / h.hand_over): nothing would reach the verifier", path.Join(e.Dir, m.Driver))
		}
	}
	if m.Kind == "cuda" && oneOf("nccl", m.Build.Libs) && m.Driver != "" && v.exists(m.Driver) {
		v.ownCalls(append([]string{m.Driver}, m.Support...))
	}
	for i, s := range m.Support {
		inShared := strings.HasPrefix(s, "../"+SharedDir+"/") && fs.ValidPath(strings.TrimPrefix(s, "../"))
		switch {
		case !inShared && (!fs.ValidPath(s) || s == "."):
			v.errAt(v.at("support", i), "support file %q is not a relative path inside the exercise folder (or ../%s/ of its module)", s, SharedDir)
		case hasHiddenPart(strings.TrimPrefix(s, "../")):
			v.errAt(v.at("support", i), "support file %q: %s", s, hiddenMsg)
		case !v.exists(s):
			v.errAt(v.at("support", i), "support file %s does not exist", path.Join(e.Dir, s))
		}
	}
	v.checkFiles()
	v.checkBuild()
	v.checkLaunch()
	v.checkRequires()
	if len(m.Cases) == 0 {
		v.errAt(v.key("cases"), "cases is missing or empty: the correctness stage needs at least one case")
	}
	v.checkCases("cases", m.Cases)
	v.checkPerf()
	for i, f := range m.Forbid {
		if strings.TrimSpace(f.Symbol) == "" {
			v.errAt(v.at("forbid", i), "forbid entry has no symbol")
		}
		if strings.TrimSpace(f.Why) == "" {
			v.errAt(v.at("forbid", i), "forbid entry %q has no why: say why the call is not allowed", f.Symbol)
		}
		if strings.Contains(f.Symbol, "*") {
			switch {
			case m.Kind == "python":
				v.errAt(v.at("forbid", i, "symbol"), "forbid entry %q: a * pattern works for C and CUDA symbols only; name the Python function", f.Symbol)
			case !validGlob(f.Symbol):
				v.errAt(v.at("forbid", i, "symbol"), "forbid entry %q: a pattern is a C identifier with * for any run of identifier characters, and at least 6 characters that are not *", f.Symbol)
			}
		}
	}
	switch {
	case m.Ordering == "":
	case m.Ordering != "system":
		v.errAt(v.key("ordering"), "ordering %q: the only rule is \"system\" (flags between GPUs)", m.Ordering)
	case m.Kind != "cuda" && m.Kind != "python":
		v.errAt(v.key("ordering"), "ordering reads the PTX of CUDA sources or of Triton kernels; this exercise's kind is %q", m.Kind)
	case m.Kind == "python" && !hasCase(m.Cases, "ordering"):
		v.errAt(v.key("ordering"), "ordering on a python exercise fails the case \"ordering\" of a rank whose Triton kernels have a relaxed flag: add that case (its driver records whether a Triton kernel was compiled)")
	}
	for i, r := range m.PTXRequires {
		switch {
		case m.Kind != "cuda":
			v.errAt(v.at("ptx_requires", i), "ptx_requires reads the PTX of CUDA sources; this exercise's kind is %q", m.Kind)
		case !validPTXPattern(r.Pattern):
			v.errAt(v.at("ptx_requires", i, "pattern"), "ptx_requires pattern %q: a PTX opcode's dot-separated parts (cp.async.bulk.global.shared::cta), at least an opcode and one part", r.Pattern)
		case strings.TrimSpace(r.Why) == "":
			v.errAt(v.at("ptx_requires", i, "why"), "ptx_requires entry %q: say why (the learner reads it when the instruction is missing)", r.Pattern)
		}
	}
	for i, h := range m.Hints {
		if strings.TrimSpace(h) == "" {
			v.errAt(v.at("hints", i), "hint is empty")
		}
	}
	switch {
	case m.Timeout.Duration < 0:
		v.errAt(v.at("timeout"), "timeout %s is negative", m.Timeout.Duration)
	case m.Timeout.Duration == 0:
		m.Timeout.Duration = DefaultTimeout
	}
	v.checkStage(v.at("starter", "fails_at"), "starter.fails_at", m.Starter.FailsAt)
	if m.Starter.Hangs && oneOf(m.Starter.FailsAt, stages) && m.Starter.FailsAt != "run" {
		v.errAt(v.at("starter", "hangs"), "starter.hangs: a starter stopped by the timeout fails at run, not %s", m.Starter.FailsAt)
	}
	v.checkVariants()
}

func (v *exerciseCheck) checkStage(line int, what, stage string) {
	switch {
	case stage == "":
		v.errAt(line, "%s is missing: one of %s", what, strings.Join(stages, ", "))
	case !oneOf(stage, stages):
		v.errAt(line, "%s %q is not one of %s", what, stage, strings.Join(stages, ", "))
	case stage == "performance" && v.e.Perf == nil:
		v.errAt(line, "%s is \"performance\" but the exercise has no perf section", what)
	}
}

func (v *exerciseCheck) checkFiles() {
	e := v.e
	if len(e.Files) == 0 {
		v.errAt(v.key("files"), "files is missing or empty: list the learner's files")
		return
	}
	listed := map[string]bool{}
	for i, f := range e.Files {
		line := v.at("files", i)
		switch {
		case !fs.ValidPath(f) || f == ".":
			v.errAt(line, "file %q is not a relative path", f)
			continue
		case listed[f]:
			v.errAt(line, "file %q is listed twice", f)
			continue
		case hasHiddenPart(f):
			v.errAt(line, "file %q: %s", f, hiddenMsg)
			continue
		case strings.EqualFold(f, "TASK.md") || strings.HasPrefix(f, ".mgpu-learn"):
			v.errAt(line, "file name %q is reserved for the workspace", f)
		case f == e.Driver:
			v.errAt(line, "file %q is also the driver: the driver is course-owned", f)
		}
		listed[f] = true
		if !v.exists(path.Join("starter", f)) {
			v.errAt(line, "starter file %s does not exist", e.StarterPath(f))
		}
		if !v.exists(path.Join("solution", f)) {
			v.errAt(line, "solution file %s does not exist", e.SolutionPath(f))
		}
	}
	for _, sub := range []string{"starter", "solution"} {
		for _, f := range filesUnder(v.ld.fsys, path.Join(e.Dir, sub)) {
			if !listed[f] {
				v.errAt(v.key("files"), "%s is not one of files: list it or remove it", path.Join(e.Dir, sub, f))
			}
		}
	}
}

func (v *exerciseCheck) checkBuild() {
	for i, l := range v.e.Build.Libs {
		if !oneOf(l, buildLibs) {
			v.errAt(v.at("build", "libs", i), "build library %q is not one of %s", l, strings.Join(buildLibs, ", "))
		}
	}
	if v.e.Kind == "python" && (len(v.e.Build.Flags) > 0 || len(v.e.Build.Libs) > 0 || v.e.Build.RDC) {
		v.errAt(v.key("build"), "build applies to cuda and c exercises only")
	}
	if v.e.Build.RDC && v.e.Kind != "cuda" {
		v.errAt(v.at("build", "rdc"), "rdc needs kind cuda")
	}
}

func (v *exerciseCheck) checkLaunch() {
	l := &v.e.Launch
	switch {
	case l.Launcher == "":
		l.Launcher = "local"
	case !oneOf(l.Launcher, launchers):
		v.errAt(v.at("launch", "launcher"), "launcher %q is not one of %s", l.Launcher, strings.Join(launchers, ", "))
	case l.Launcher == "torchrun" && v.e.Kind != "python" && v.e.Kind != "":
		v.errAt(v.at("launch", "launcher"), "launcher torchrun needs kind python, not %q", v.e.Kind)
	}
	if l.Ranks == "" {
		l.Ranks = "all"
	} else if l.Ranks != "all" {
		n, err := strconv.Atoi(l.Ranks)
		if err != nil || n <= 0 {
			v.errAt(v.at("launch", "ranks"), "ranks %q must be \"all\" or a positive whole number", l.Ranks)
		}
	}
	if l.CrossCheckRanks != 0 && (l.CrossCheckRanks < 3 || l.CrossCheckRanks > 8) {
		v.errAt(v.at("launch", "cross_check_ranks"), "cross_check_ranks %d must be from 3 to 8 (the CPU runs that many ranks)", l.CrossCheckRanks)
	}
	if l.CudaAwareMPI && l.Launcher != "mpirun" {
		v.errAt(v.at("launch", "cuda_aware_mpi"), "cuda_aware_mpi needs launcher mpirun")
	}
	keys := make([]string, 0, len(l.Env))
	for k := range l.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if oneOf(k, nvlsVars) {
			v.errAt(v.at("launch", "env", k), "env may not set %s: the launcher keeps NVLink multicast off", k)
		}
	}
}

func (v *exerciseCheck) checkRequires() {
	r := &v.e.Requires
	if r.GPUs < 0 {
		v.errAt(v.at("requires", "gpus"), "gpus %d is negative", r.GPUs)
	}
	for i, l := range r.Libs {
		if !oneOf(l, requireLibs) {
			v.errAt(v.at("requires", "libs", i), "required library %q is not one of %s", l, strings.Join(requireLibs, ", "))
		}
	}
	if r.MinCompute != "" && !computeRe.MatchString(r.MinCompute) {
		v.errAt(v.at("requires", "min_compute"), "min_compute %q must look like \"9.0\"", r.MinCompute)
	}
}

// checkCases checks a case list found under the given key path ("cases", or "perf" "cases").
func (v *exerciseCheck) checkCases(where string, cases []Case) {
	p := strings.Split(where, ".")
	at := func(i int, k ...string) int {
		path := make([]any, 0, len(p)+1+len(k))
		for _, s := range p {
			path = append(path, s)
		}
		path = append(path, i)
		for _, s := range k {
			path = append(path, s)
		}
		return v.at(path...)
	}
	seen := map[string]int{}
	for i := range cases {
		c := &cases[i]
		switch {
		case c.Name == "":
			v.errAt(at(i), "%s entry has no name", where)
		case !nameRe.MatchString(c.Name):
			v.errAt(at(i, "name"), "case name %q may hold only letters, digits, '.', '_' and '-'", c.Name)
		case seen[c.Name] > 0:
			v.errAt(at(i, "name"), "case name %q is used twice in %s (first at line %d)", c.Name, where, seen[c.Name])
		default:
			seen[c.Name] = at(i, "name")
		}
		if c.N <= 0 {
			v.errAt(at(i, "n"), "case %q: n must be a positive integer, got %d", c.Name, c.N)
		}
		switch c.On {
		case "":
			c.On = "all"
		case "all", "0":
		default:
			v.errAt(at(i, "on"), "case %q: on %q must be \"all\" or \"0\"", c.Name, c.On)
		}
	}
}

func (v *exerciseCheck) checkPerf() {
	p := v.e.Perf
	if p == nil {
		return
	}
	switch {
	case p.Metric == "":
		v.errAt(v.key("perf"), "perf.metric is missing: one of %s", strings.Join(metrics, ", "))
	case !oneOf(p.Metric, metrics):
		v.errAt(v.at("perf", "metric"), "perf.metric %q is not one of %s", p.Metric, strings.Join(metrics, ", "))
	}
	if p.MinRatio <= 0 {
		v.errAt(v.at("perf", "min_ratio"), "perf.min_ratio must be greater than 0 (yours/baseline target, e.g. 0.8)")
	}
	if p.SuspectAbove != 0 && p.SuspectAbove <= p.MinRatio {
		v.errAt(v.at("perf", "suspect_above"), "perf.suspect_above %g must be above min_ratio %g", p.SuspectAbove, p.MinRatio)
	}
	if len(p.Cases) == 0 {
		v.errAt(v.key("perf"), "perf.cases is missing or empty: list the sizes to time")
	}
	v.checkCases("perf.cases", p.Cases)
	found := false
	for _, c := range p.Cases {
		found = found || c.Name == p.Case
	}
	switch {
	case p.Case == "":
		v.errAt(v.key("perf"), "perf.case is missing: name the headline case from perf.cases")
	case !found:
		v.errAt(v.at("perf", "case"), "perf.case %q is not one of perf.cases", p.Case)
	}
	if p.MinReps < 0 || p.MaxReps < 0 || p.BudgetMS < 0 {
		v.errAt(v.key("perf"), "perf.min_reps, max_reps and budget_ms may not be negative")
	}
	if p.MinReps > 0 && p.MaxReps > 0 && p.MaxReps < p.MinReps {
		v.errAt(v.at("perf", "max_reps"), "perf.max_reps %d is below min_reps %d", p.MaxReps, p.MinReps)
	}
}

func (v *exerciseCheck) checkVariants() {
	e := v.e
	declared := map[string]bool{}
	listed := map[string]bool{}
	for _, f := range e.Files {
		listed[f] = true
	}
	for i := range e.Variants {
		vr := &e.Variants[i]
		line := v.at("variants", i)
		switch {
		case vr.Name == "":
			v.errAt(line, "variant has no name")
			continue
		case !validName(vr.Name):
			v.errAt(v.at("variants", i, "name"), "variant name %q is not a plain folder name", vr.Name)
			continue
		case declared[vr.Name]:
			v.errAt(v.at("variants", i, "name"), "variant %q is declared twice", vr.Name)
			continue
		}
		declared[vr.Name] = true
		v.checkStage(v.at("variants", i, "expect"), "variant "+strconv.Quote(vr.Name)+" expect", vr.Expect)
		if vr.CaughtAtRun && vr.Expect != "policy" {
			v.errAt(v.at("variants", i, "caught_at_run"), "variant %q: caught_at_run is for a policy failure found while the program runs; its expect is %q", vr.Name, vr.Expect)
		}
		if vr.Timed && vr.Expect == "pass" {
			v.errAt(v.at("variants", i, "timed"), "variant %q: timed marks a mistake the check after timing finds; a variant expected to pass has none", vr.Name)
		}
		if vr.Race && (vr.Expect == "pass" || vr.Expect == "build" || vr.Expect == "policy") {
			v.errAt(v.at("variants", i, "race"), "variant %q: race marks a mistake that shows only in some runs; a variant expected to %s does not depend on a run's timing", vr.Name, map[string]string{"pass": "pass", "build": "fail at build", "policy": "fail at policy"}[vr.Expect])
		}
		dir := path.Join(e.Dir, "variants", vr.Name)
		files := filesUnder(v.ld.fsys, dir)
		if len(files) == 0 {
			v.errAt(v.at("variants", i, "name"), "variant folder %s is missing or has no files", dir)
		}
		for _, f := range files {
			if !listed[f] {
				v.errAt(v.at("variants", i, "name"), "%s is not one of files", path.Join(dir, f))
			}
		}
	}
	entries, err := fs.ReadDir(v.ld.fsys, path.Join(e.Dir, "variants"))
	if err != nil {
		return
	}
	for _, de := range entries {
		// A folder with no course files (empty, or only Python's __pycache__ left after a
		// variant was renamed) is not a variant: go:embed leaves it out of the built-in course.
		if de.IsDir() && !hidden(de.Name()) && !declared[de.Name()] &&
			len(filesUnder(v.ld.fsys, path.Join(e.Dir, "variants", de.Name()))) > 0 {
			v.errAt(v.key("variants"), "variant folder %s is not declared in variants", path.Join(e.Dir, "variants", de.Name()))
		}
	}
}

// filesUnder lists the regular files below dir, as slash paths relative to it, sorted.
func filesUnder(fsys fs.FS, dir string) []string {
	var out []string
	_ = fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if p != dir && hidden(d.Name()) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() {
			out = append(out, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	return out
}

func isFile(fsys fs.FS, name string) bool {
	fi, err := fs.Stat(fsys, name)
	return err == nil && fi.Mode().IsRegular()
}

// hidden reports whether a file name starts with "." or "_": go:embed leaves such files out of
// the built-in course, so the loader ignores them on disk too, and course files may not use them.
func hidden(name string) bool { return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") }

// SharedDir is the folder of a module's exercises that holds course-owned files several
// exercises use: a manifest's support names them "../shared/<file>". It is not an exercise.
const SharedDir = "shared"

// hasHiddenPart reports whether any element of a slash path is hidden.
func hasHiddenPart(p string) bool {
	for _, el := range strings.Split(p, "/") {
		if hidden(el) {
			return true
		}
	}
	return false
}

func validName(s string) bool { return nameRe.MatchString(s) && s != "." && s != ".." }

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// plainErr drops the path an fs error repeats.
func plainErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return errors.New("no such file")
		}
		return pe.Err
	}
	return err
}

// validGlob says whether a forbid pattern is an identifier with * wildcards, specific enough
// (6 fixed characters) not to catch everything.
func validGlob(p string) bool {
	fixed := 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '*':
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
			fixed++
		default:
			return false
		}
	}
	return fixed >= 6
}

// hasCase: cases has one of that name.
func hasCase(cases []Case, name string) bool {
	for _, c := range cases {
		if c.Name == name {
			return true
		}
	}
	return false
}

// validPTXPattern: an opcode and at least one part, dot-separated, each of PTX's characters.
func validPTXPattern(p string) bool {
	parts := strings.Split(p, ".")
	if len(parts) < 2 {
		return false
	}
	for _, part := range parts {
		if part == "" {
			return false
		}
		for _, r := range part {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == ':') {
				return false
			}
		}
	}
	return true
}
