// Package course holds the course content model: modules, lessons and exercises, loaded from a
// file system and validated so that every problem is reported with its file and line.
package course

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout is an exercise's run timeout when its manifest gives none.
const DefaultTimeout = 120 * time.Second

// Course is a loaded, validated course.
type Course struct {
	Title   string
	Modules []*Module
	// FS is the file system the course was loaded from: "lessons/..." and "exercises/...".
	FS fs.FS
}

// Module is one module: a folder under lessons/ with its module.yaml, and the folder of the same
// name under exercises/.
type Module struct {
	ID      string // "module0"
	Dir     string // folder name, "module0-orientation"
	Title   string
	Summary string
	Lessons []*Lesson // sorted by file name
	// Exercises are in the order module.yaml lists them.
	Exercises []*Exercise
}

// Lesson is one lesson file, lessons/<moddir>/NN-slug.md.
type Lesson struct {
	ID       string // "module0/01-nodes": module id, slash, file name without .md
	ModuleID string
	Path     string // fs path, "lessons/module0-orientation/01-nodes.md"
	Title    string
	// Exercises are the ids of the exercises the lesson points to, from its front matter.
	Exercises []string
	// Body is the markdown after the front matter.
	Body string
	// Pages split Body: the text before the first "## " heading (when there is any), then one
	// page per "## " section.
	Pages []Page
}

// Page is one screen of a lesson.
type Page struct {
	Title    string // the section's heading text; the lesson's title for the opening page
	Markdown string // includes the "## " heading line for section pages
}

// Exercise is an exercise: its manifest and where its files are.
type Exercise struct {
	Manifest
	Module *Module
	Dir    string // fs path of the exercise folder, "exercises/module0-orientation/devices"

	fsys fs.FS
}

// Module returns the module with the given id ("module0") or folder name, or nil.
func (c *Course) Module(id string) *Module {
	for _, m := range c.Modules {
		if m.ID == id {
			return m
		}
	}
	for _, m := range c.Modules {
		if m.Dir == id {
			return m
		}
	}
	return nil
}

// Exercise returns the exercise with the given id ("module0/devices"), or nil.
func (c *Course) Exercise(id string) *Exercise {
	for _, m := range c.Modules {
		for _, e := range m.Exercises {
			if e.ID == id {
				return e
			}
		}
	}
	return nil
}

// Exercises returns every exercise in course order.
func (c *Course) Exercises() []*Exercise {
	var all []*Exercise
	for _, m := range c.Modules {
		all = append(all, m.Exercises...)
	}
	return all
}

// Lessons returns the lessons of the module with the given id, or nil.
func (c *Course) Lessons(moduleID string) []*Lesson {
	if m := c.Module(moduleID); m != nil {
		return m.Lessons
	}
	return nil
}

// Lesson returns the lesson with the given id ("module0/01-nodes"), or nil.
func (c *Course) Lesson(id string) *Lesson {
	for _, m := range c.Modules {
		for _, l := range m.Lessons {
			if l.ID == id {
				return l
			}
		}
	}
	return nil
}

// Resolve turns a command-line argument into exercises: "all" (every exercise, in course
// order), a module id or folder ("module0", "module0-orientation": its exercises), an exercise
// id ("module0/peer-copy", or "module0-orientation/peer-copy"), or an exercise name that only
// one module has ("peer-copy"). An unknown argument gives an error that lists close matches.
func (c *Course) Resolve(arg string) ([]*Exercise, error) {
	a := strings.Trim(strings.TrimSpace(arg), "/")
	if a == "" {
		return nil, fmt.Errorf("no exercise given: use \"all\", a module id such as %q or an exercise id such as %q", c.exampleModule(), c.exampleExercise())
	}
	if a == "all" {
		return c.Exercises(), nil
	}
	if m := c.Module(a); m != nil {
		return append([]*Exercise(nil), m.Exercises...), nil
	}
	if e := c.Exercise(a); e != nil {
		return []*Exercise{e}, nil
	}
	if mod, name, ok := strings.Cut(a, "/"); ok {
		if m := c.Module(mod); m != nil {
			if e := c.Exercise(m.ID + "/" + name); e != nil {
				return []*Exercise{e}, nil
			}
		}
	} else {
		var named []*Exercise
		for _, e := range c.Exercises() {
			if e.Name() == a {
				named = append(named, e)
			}
		}
		if len(named) == 1 {
			return named, nil
		}
		if len(named) > 1 {
			ids := make([]string, len(named))
			for i, e := range named {
				ids[i] = e.ID
			}
			return nil, fmt.Errorf("%q is ambiguous: it could be %s", arg, strings.Join(ids, ", "))
		}
	}
	if near := c.closeMatches(a); len(near) > 0 {
		return nil, fmt.Errorf("no exercise or module %q; did you mean %s?", arg, strings.Join(near, ", "))
	}
	return nil, fmt.Errorf("no exercise or module %q: use \"all\", a module id such as %q or an exercise id such as %q", arg, c.exampleModule(), c.exampleExercise())
}

func (c *Course) exampleModule() string {
	if len(c.Modules) > 0 {
		return c.Modules[0].ID
	}
	return "module0"
}

func (c *Course) exampleExercise() string {
	if all := c.Exercises(); len(all) > 0 {
		return all[0].ID
	}
	return "module0/devices"
}

// closeMatches lists up to five module and exercise ids close to a: by edit distance to the
// id, the folder form or the exercise name, or by containing a.
func (c *Course) closeMatches(a string) []string {
	type cand struct {
		id   string
		dist int
	}
	_, aName, hasSlash := strings.Cut(a, "/")
	limit := max(2, len(a)/3)
	var cands []cand
	consider := func(id string, forms ...string) {
		best := limit + 1
		for _, s := range forms {
			d := editDistance(a, s)
			if len(a) >= 3 && strings.Contains(s, a) {
				d = min(d, 1)
			}
			best = min(best, d)
		}
		if best <= limit {
			cands = append(cands, cand{id, best})
		}
	}
	for _, m := range c.Modules {
		consider(m.ID, m.ID, m.Dir)
		for _, e := range m.Exercises {
			forms := []string{e.ID, m.Dir + "/" + e.Name(), e.Name()}
			if hasSlash && aName != "" {
				// "module9/peer-copy": the right name under the wrong module.
				if editDistance(aName, e.Name()) <= max(1, len(aName)/4) {
					cands = append(cands, cand{e.ID, 1})
				}
			}
			consider(e.ID, forms...)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].dist < cands[j].dist })
	var out []string
	seen := map[string]bool{}
	for _, cd := range cands {
		if !seen[cd.id] && len(out) < 5 {
			seen[cd.id] = true
			out = append(out, cd.id)
		}
	}
	return out
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Name is the exercise's folder name, the part of its id after the slash.
func (e *Exercise) Name() string { return path.Base(e.Dir) }

// ReadFile reads a file of the exercise folder; rel is slash-separated and relative to it
// ("task.md", "starter/peer.cu").
func (e *Exercise) ReadFile(rel string) ([]byte, error) {
	return fs.ReadFile(e.fsys, path.Join(e.Dir, rel))
}

// FS is the file system the exercise's paths (Dir, StarterPath...) refer to.
func (e *Exercise) FS() fs.FS { return e.fsys }

// TaskPath is the fs path of the task markdown.
func (e *Exercise) TaskPath() string { return path.Join(e.Dir, e.Task) }

// DriverPath is the fs path of the driver.
func (e *Exercise) DriverPath() string { return path.Join(e.Dir, e.Driver) }

// SupportPath is the fs path of a support file.
func (e *Exercise) SupportPath(name string) string { return path.Join(e.Dir, name) }

// StarterPath is the fs path of the starter version of learner file name.
func (e *Exercise) StarterPath(name string) string { return path.Join(e.Dir, "starter", name) }

// SolutionPath is the fs path of the reference solution of learner file name.
func (e *Exercise) SolutionPath(name string) string { return path.Join(e.Dir, "solution", name) }

// VariantPath is the fs path of learner file name in the given variant. A variant need not
// hold every learner file; HasVariantFile says whether it holds this one.
func (e *Exercise) VariantPath(variant, name string) string {
	return path.Join(e.Dir, "variants", variant, name)
}

// HasVariantFile reports whether the variant folder holds learner file name.
func (e *Exercise) HasVariantFile(variant, name string) bool {
	fi, err := fs.Stat(e.fsys, e.VariantPath(variant, name))
	return err == nil && fi.Mode().IsRegular()
}

// Variant returns the variant with the given name, or nil.
func (e *Exercise) Variant(name string) *Variant {
	for i := range e.Variants {
		if e.Variants[i].Name == name {
			return &e.Variants[i]
		}
	}
	return nil
}

// CasesEnv is the value of MGPU_CASES: "name=n;name=n".
func (e *Exercise) CasesEnv() string { return casesEnv(e.Cases) }

// PerfCasesEnv is the value of MGPU_PERF_CASES, "" when the exercise has no perf section.
func (e *Exercise) PerfCasesEnv() string {
	if e.Perf == nil {
		return ""
	}
	return casesEnv(e.Perf.Cases)
}

func casesEnv(cases []Case) string {
	parts := make([]string, len(cases))
	for i, c := range cases {
		parts[i] = c.Name + "=" + strconv.FormatInt(c.N, 10)
	}
	return strings.Join(parts, ";")
}
