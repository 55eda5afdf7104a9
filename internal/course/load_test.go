package course

import (
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// validFS copies testdata/course into a MapFS that a test may change.
func validFS(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	src := os.DirFS("testdata/course")
	err := fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(src, p)
		m[p] = &fstest.MapFile{Data: data, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustLoad(t *testing.T, fsys fs.FS) *Course {
	t.Helper()
	c, err := Load(fsys)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestLoadValidCourse(t *testing.T) {
	c := mustLoad(t, os.DirFS("testdata/course"))
	if c.Title != "Test course" {
		t.Errorf("title %q", c.Title)
	}
	if len(c.Modules) != 2 || c.Modules[0].ID != "module0" || c.Modules[0].Dir != "module0-basics" || c.Modules[1].ID != "module1" {
		t.Fatalf("modules %+v", c.Modules)
	}
	m0 := c.Module("module0")
	if m0 != c.Module("module0-basics") || m0.Title != "Basics" || m0.Summary != "Two small exercises." {
		t.Errorf("module0 %+v", m0)
	}
	var ids []string
	for _, e := range c.Exercises() {
		ids = append(ids, e.ID)
	}
	if want := []string{"module0/hello", "module0/sum", "module1/ring"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("exercises %v, want %v", ids, want)
	}

	hello := c.Exercise("module0/hello")
	if hello.Module != m0 || hello.Dir != "exercises/module0-basics/hello" || hello.Name() != "hello" {
		t.Errorf("hello placed wrong: %+v", hello)
	}
	if got := hello.CasesEnv(); got != "small=16;big=4096" {
		t.Errorf("CasesEnv %q", got)
	}
	if got := hello.PerfCasesEnv(); got != "" {
		t.Errorf("PerfCasesEnv without perf %q", got)
	}
	if hello.Timeout.Duration != DefaultTimeout {
		t.Errorf("default timeout %v", hello.Timeout)
	}
	if hello.Cases[0].On != "all" || hello.Cases[1].On != "0" {
		t.Errorf("case on: %+v", hello.Cases)
	}
	if hello.Launch.Ranks != "2" {
		t.Errorf("ranks %q", hello.Launch.Ranks)
	}
	if got := hello.StarterPath("hello.c"); got != "exercises/module0-basics/hello/starter/hello.c" {
		t.Errorf("StarterPath %q", got)
	}
	if got := hello.SolutionPath("hello.c"); got != "exercises/module0-basics/hello/solution/hello.c" {
		t.Errorf("SolutionPath %q", got)
	}
	if got := hello.VariantPath("off-by-one", "hello.c"); got != "exercises/module0-basics/hello/variants/off-by-one/hello.c" {
		t.Errorf("VariantPath %q", got)
	}
	if !hello.HasVariantFile("off-by-one", "hello.c") || hello.HasVariantFile("off-by-one", "nope.c") {
		t.Error("HasVariantFile")
	}
	if v := hello.Variant("off-by-one"); v == nil || v.Expect != "correctness" || v.Why != "stops one short" {
		t.Errorf("Variant %+v", v)
	}
	if hello.Variant("nope") != nil {
		t.Error("Variant(nope) should be nil")
	}
	data, err := hello.ReadFile("solution/hello.c")
	if err != nil || !strings.Contains(string(data), "return n;") {
		t.Errorf("ReadFile: %q, %v", data, err)
	}
	if hello.TaskPath() != "exercises/module0-basics/hello/task.md" || hello.DriverPath() != "exercises/module0-basics/hello/driver.c" {
		t.Errorf("TaskPath %q DriverPath %q", hello.TaskPath(), hello.DriverPath())
	}

	sum := c.Exercise("module0/sum")
	if got := sum.PerfCasesEnv(); got != "medium=1048576;large=268435456" {
		t.Errorf("PerfCasesEnv %q", got)
	}
	if sum.Timeout.Duration != 90*time.Second {
		t.Errorf("timeout %v", sum.Timeout)
	}
	if sum.Perf.MinRatio != 0.8 || sum.Perf.Metric != "busbw" || *sum.Cases[0].CPU != true {
		t.Errorf("perf %+v", sum.Perf)
	}
	if sum.Launch.Env["OMP_NUM_THREADS"] != "1" {
		t.Errorf("env %v", sum.Launch.Env)
	}
	ring := c.Exercise("module1/ring")
	if ring.Launch.Ranks != "all" || ring.Requires.MinCompute != "9.0" || !ring.Requires.PeerAccess {
		t.Errorf("ring %+v", ring.Manifest)
	}

	ls := c.Lessons("module0")
	if len(ls) != 2 || ls[0].ID != "module0/01-intro" || ls[1].ID != "module0/02-sums" {
		t.Fatalf("lessons %+v", ls)
	}
	intro := ls[0]
	if intro.Title != "Introduction" || intro.ModuleID != "module0" || intro.Path != "lessons/module0-basics/01-intro.md" {
		t.Errorf("intro %+v", intro)
	}
	if !reflect.DeepEqual(intro.Exercises, []string{"module0/hello"}) {
		t.Errorf("intro exercises %v", intro.Exercises)
	}
	if strings.Contains(intro.Body, "title:") || !strings.HasPrefix(intro.Body, "Opening words") {
		t.Errorf("body keeps front matter: %q", intro.Body)
	}
	var titles []string
	for _, p := range intro.Pages {
		titles = append(titles, p.Title)
	}
	if want := []string{"Introduction", "First section", "Second section"}; !reflect.DeepEqual(titles, want) {
		t.Errorf("page titles %q, want %q", titles, want)
	}
	if !strings.Contains(intro.Pages[1].Markdown, "## not a heading") || !strings.Contains(intro.Pages[1].Markdown, "Setext text") {
		t.Errorf("first section lost its fence or setext heading: %q", intro.Pages[1].Markdown)
	}
	if !strings.HasPrefix(intro.Pages[2].Markdown, "## Second `section`") || !strings.Contains(intro.Pages[2].Markdown, "> ## quoted") {
		t.Errorf("second page %q", intro.Pages[2].Markdown)
	}
	if c.Lesson("module1/01-ring") == nil || len(c.Lesson("module1/01-ring").Pages) != 1 {
		t.Errorf("ring lesson pages: %+v", c.Lesson("module1/01-ring"))
	}
	if c.Lessons("module9") != nil {
		t.Error("Lessons of an unknown module")
	}
}

func TestLoadErrors(t *testing.T) {
	const (
		hello   = "exercises/module0-basics/hello/exercise.yaml"
		sum     = "exercises/module0-basics/sum/exercise.yaml"
		ring    = "exercises/module1-more/ring/exercise.yaml"
		mod0    = "lessons/module0-basics/module.yaml"
		mod1    = "lessons/module1-more/module.yaml"
		sums    = "lessons/module0-basics/02-sums.md"
		ringLsn = "lessons/module1-more/01-ring.md"
	)
	// edit replaces old by new in a file of the valid course; it fails the test when old is absent.
	type change func(t *testing.T, m fstest.MapFS)
	edit := func(file, old, new string) change {
		return func(t *testing.T, m fstest.MapFS) {
			s := string(m[file].Data)
			if !strings.Contains(s, old) {
				t.Fatalf("%s does not contain %q", file, old)
			}
			m[file] = &fstest.MapFile{Data: []byte(strings.Replace(s, old, new, 1))}
		}
	}
	remove := func(file string) change {
		return func(t *testing.T, m fstest.MapFS) {
			if m[file] == nil {
				t.Fatalf("no %s", file)
			}
			delete(m, file)
		}
	}
	add := func(file, content string) change {
		return func(t *testing.T, m fstest.MapFS) { m[file] = &fstest.MapFile{Data: []byte(content)} }
	}
	tests := []struct {
		name    string
		changes []change
		want    []string
	}{
		{"driver's own NCCL calls outside MGPU_NCCL_OWN", []change{
			edit(ring, "launcher: single\n", "launcher: single\nbuild:\n  libs: [nccl]\nforbid:\n  - symbol: \"ncclAll*\"\n    why: w\n  - symbol: ncclSend\n    why: w\n"),
			add("exercises/module1-more/ring/driver.cu", "/* ncclAllReduce(x) in a comment */\n"+
				"int main() {\n"+
				"  MGPU_NCCL(ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, s));\n"+
				"  MGPU_NCCL_OWN(ncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, s));\n"+
				"  MGPU_NCCL_OWN(\n      ncclSend(a, n, ncclFloat, 1, comm, s));\n"+
				"  printf(\"ncclAllGather(%d)\\n\", 1); // ncclSend(a) in a comment\n"+
				"  pncclAllReduce(a, b, n, ncclFloat, ncclSum, comm, s);\n"+
				"  ncclAllGather (a, b, n, ncclFloat, comm, s);\n"+
				"  ncclRecv(a, n, ncclFloat, 1, comm, s);\n"+
				"}\n")},
			[]string{"exercises/module1-more/ring/driver.cu:3: the driver calls ncclAllReduce, which the manifest forbids and NCCL's watch reports: make the call through MGPU_NCCL_OWN(...), or the watch counts it as the learner's (docs/harness.md)",
				"exercises/module1-more/ring/driver.cu:9: the driver calls ncclAllGather, which the manifest forbids and NCCL's watch reports: make the call through MGPU_NCCL_OWN(...), or the watch counts it as the learner's (docs/harness.md)"}},
		{"caught_at_run on a failure that is not policy", []change{edit(hello, "    message: [mismatch]\n", "    message: [mismatch]\n    caught_at_run: true\n")},
			[]string{hello + `:32: variant "off-by-one": caught_at_run is for a policy failure found while the program runs; its expect is "correctness"`}},
		{"timed on a variant expected to pass", []change{edit(hello, "    expect: correctness\n    message: [mismatch]\n", "    expect: pass\n    timed: true\n")},
			[]string{hello + `:31: variant "off-by-one": timed marks a mistake the check after timing finds; a variant expected to pass has none`}},
		{"race on a variant expected to fail at policy", []change{edit(hello, "    expect: correctness\n    message: [mismatch]\n", "    expect: policy\n    race: true\n")},
			[]string{hello + `:31: variant "off-by-one": race marks a mistake that shows only in some runs; a variant expected to fail at policy does not depend on a run's timing`}},
		{"ordering on a C exercise", []change{edit(hello, "kind: c\n", "kind: c\nordering: system\n")},
			[]string{hello + `:5: ordering reads the PTX of CUDA sources or of Triton kernels; this exercise's kind is "c"`}},
		{"ptx_requires on a C exercise, a bad pattern, no reason", []change{edit(hello, "kind: c\n", "kind: c\nptx_requires:\n  - {pattern: cp.async.bulk, why: x}\n"),
			edit(ring, "kind: cuda\n", "kind: cuda\nptx_requires:\n  - {pattern: \"st global\", why: x}\n  - {pattern: cp.async.bulk}\n")},
			[]string{hello + `:6: ptx_requires reads the PTX of CUDA sources; this exercise's kind is "c"`,
				ring + `:5: ptx_requires pattern "st global": a PTX opcode's dot-separated parts (cp.async.bulk.global.shared::cta), at least an opcode and one part`,
				ring + `:6: ptx_requires entry "cp.async.bulk": say why (the learner reads it when the instruction is missing)`}},
		{"ordering on a python exercise without the case it fails", []change{edit(sum, "kind: python\n", "kind: python\nordering: system\n")},
			[]string{sum + `:4: ordering on a python exercise fails the case "ordering" of a rank whose Triton kernels have a relaxed flag: add that case (its driver records whether a Triton kernel was compiled)`}},
		{"unknown ordering", []change{edit(hello, "kind: c\n", "kind: c\nordering: gpu\n")},
			[]string{hello + `:5: ordering "gpu": the only rule is "system" (flags between GPUs)`}},
		{"unknown key", []change{edit(hello, "kind: c\n", "kind: c\ncolour: red\n")},
			[]string{hello + `:5: unknown key "colour"`}},
		{"unknown nested key", []change{edit(hello, "  ranks: 2\n", "  ranks: 2\n  rank: 3\n")},
			[]string{hello + `:14: unknown key "rank"`}},
		{"missing starter", []change{remove("exercises/module0-basics/hello/starter/hello.c")},
			[]string{hello + `:6: starter file exercises/module0-basics/hello/starter/hello.c does not exist`}},
		{"missing solution of second file", []change{remove("exercises/module0-basics/sum/solution/helper.py")},
			[]string{sum + `:5: solution file exercises/module0-basics/sum/solution/helper.py does not exist`}},
		{"duplicate exercise id", []change{edit(sum, "id: module0/sum", "id: module0/hello")},
			[]string{
				sum + `:1: duplicate exercise id "module0/hello" (also ` + hello + `)`,
				sum + `:1: id "module0/hello" does not match the folder: it must be "module0/sum" (<module id>/<folder name>)`,
				sums + `:4: exercise "module0/sum" does not exist; did you mean module0/hello?`,
			}},
		{"duplicate module id", []change{edit(mod1, "id: module1", "id: module0")},
			[]string{
				ring + `:1: id "module1/ring" does not match the folder: it must be "module0/ring" (<module id>/<folder name>)`,
				mod1 + `:1: module id "module0" is already used by ` + mod0,
			}},
		{"lesson points at missing exercise", []change{edit(sums, "  - module0/sum\n", "  - module0/sum\n  - module0/sums\n")},
			[]string{sums + `:5: exercise "module0/sums" does not exist; did you mean module0/sum?`}},
		{"bad ranks zero", []change{edit(hello, "ranks: 2", "ranks: 0")},
			[]string{hello + `:13: ranks "0" must be "all" or a positive whole number`}},
		{"bad ranks word", []change{edit(sum, "ranks: all", "ranks: every")},
			[]string{sum + `:9: ranks "every" must be "all" or a positive whole number`}},
		{"lesson without title", []change{edit(ringLsn, "title: Rings\n", "summary: x\n")},
			[]string{ringLsn + `:2: unknown key "summary"`, ringLsn + `:1: front matter has no title`}},
		{"lesson with empty title", []change{edit(ringLsn, "title: Rings\n", "title: \"\"\n")},
			[]string{ringLsn + `:2: title is empty`}},
		{"lesson without front matter", []change{edit(ringLsn, "---\ntitle: Rings\n---\n", "")},
			[]string{ringLsn + `:1: no front matter: a lesson starts with a "---" line, then "title: ...", then another "---" line`}},
		{"listed exercise folder missing", []change{edit(mod1, "[ring]", "[ring, gone]")},
			[]string{mod1 + `:4: exercise "gone" is listed but exercises/module1-more/gone/exercise.yaml does not exist`}},
		{"unlisted exercise folder", []change{edit(mod0, "  - sum\n", "")},
			[]string{mod0 + `:4: exercise folder exercises/module0-basics/sum is not listed in exercises`, sums + `:4: exercise "module0/sum" does not exist`}},
		{"module folder missing", []change{edit("lessons/course.yaml", "  - module1-more\n", "  - module1-more\n  - module2-nothing\n")},
			[]string{`lessons/course.yaml:6: module folder "module2-nothing": cannot read lessons/module2-nothing/module.yaml: no such file`}},
		{"module id does not match folder", []change{edit(mod1, "id: module1", "id: module7")},
			[]string{
				ring + `:1: id "module1/ring" does not match the folder: it must be "module7/ring" (<module id>/<folder name>)`,
				mod1 + `:1: module id "module7" does not match its folder "module1-more": the folder must be "module7" or start with "module7-"`,
			}},
		{"bad module id", []change{edit(mod1, "id: module1", "id: mod1")},
			[]string{
				ring + `:1: id "module1/ring" does not match the folder: it must be "mod1/ring" (<module id>/<folder name>)`,
				mod1 + `:1: id "mod1" is not of the form module<N> (e.g. "module0")`,
			}},
		{"bad kind and launcher", []change{edit(hello, "kind: c", "kind: rust"), edit(hello, "launcher: local", "launcher: slurm")},
			[]string{hello + `:4: kind "rust" is not one of cuda, c, python`, hello + `:12: launcher "slurm" is not one of local, single, mpirun, torchrun`}},
		{"missing driver file", []change{remove("exercises/module1-more/ring/driver.cu")},
			[]string{ring + `:6: driver file exercises/module1-more/ring/driver.cu does not exist`}},
		{"missing task key", []change{edit(ring, "task: task.md\n", "")},
			[]string{ring + `:1: task is missing: name the markdown file that states the task (e.g. task.md)`}},
		{"duplicate case and bad n", []change{edit(hello, "{name: big, n: 4096", "{name: small, n: 0")},
			[]string{hello + `:19: case name "small" is used twice in cases (first at line 18)`, hello + `:19: case "small": n must be a positive integer, got 0`}},
		{"n not a number", []change{edit(hello, "n: 4096", "n: 4KiB")},
			[]string{hello + ":19: cannot unmarshal !!str `4KiB` into int64"}},
		{"perf headline not among perf cases", []change{edit(sum, "case: large", "case: huge")},
			[]string{sum + `:19: perf.case "huge" is not one of perf.cases`}},
		{"perf metric and ratio", []change{edit(sum, "metric: busbw", "metric: speed"), edit(sum, "min_ratio: 0.8", "min_ratio: 0")},
			[]string{sum + `:20: perf.metric "speed" is not one of busbw, algbw, time`, sum + `:22: perf.min_ratio must be greater than 0 (yours/baseline target, e.g. 0.8)`}},
		{"suspect_above below min_ratio", []change{edit(sum, "suspect_above: 1.3", "suspect_above: 0.5")},
			[]string{sum + `:23: perf.suspect_above 0.5 must be above min_ratio 0.8`}},
		{"bad stages", []change{edit(hello, "fails_at: correctness", "fails_at: compile"), edit(hello, "expect: correctness", "expect: performance")},
			[]string{hello + `:26: starter.fails_at "compile" is not one of build, policy, run, correctness, performance, pass`, hello + `:30: variant "off-by-one" expect is "performance" but the exercise has no perf section`}},
		{"hanging starter must fail at run", []change{edit(ring, "fails_at: build", "fails_at: build\n  hangs: true")},
			[]string{ring + `:17: starter.hangs: a starter stopped by the timeout fails at run, not build`}},
		{"hidden learner file", []change{edit(ring, "files: [ring.cu]", "files: [ring.cu, _util.h]"), add("exercises/module1-more/ring/starter/_util.h", "x"), add("exercises/module1-more/ring/solution/_util.h", "x")},
			[]string{ring + `:5: file "_util.h": names starting with "." or "_" are left out of the built-in course by go:embed`}},
		{"hidden folders and files are ignored", []change{add("exercises/module1-more/_scratch/notes.txt", "x"), add("exercises/module1-more/ring/starter/.DS_Store", "x"), add("exercises/module1-more/ring/variants/.wip/ring.cu", "x")},
			nil},
		{"variant folder missing", []change{remove("exercises/module0-basics/sum/variants/builtin/sum.py")},
			[]string{sum + `:37: variant folder exercises/module0-basics/sum/variants/builtin is missing or has no files`}},
		{"undeclared variant folder", []change{add("exercises/module1-more/ring/variants/slow/ring.cu", "x")},
			[]string{ring + `:1: variant folder exercises/module1-more/ring/variants/slow is not declared in variants`}},
		{"renamed variant's __pycache__ left behind", []change{add("exercises/module1-more/ring/variants/old-name/__pycache__/ring.cpython-311.pyc", "x")},
			nil},
		{"variant file not a learner file", []change{add("exercises/module0-basics/hello/variants/off-by-one/other.c", "x")},
			[]string{hello + `:28: exercises/module0-basics/hello/variants/off-by-one/other.c is not one of files`}},
		{"stray starter file", []change{add("exercises/module0-basics/hello/starter/extra.c", "x")},
			[]string{hello + `:6: exercises/module0-basics/hello/starter/extra.c is not one of files: list it or remove it`}},
		{"forbid without why", []change{edit(hello, "    why: \"write the loop yourself\"\n", "")},
			[]string{hello + `:21: forbid entry "memcpy" has no why: say why the call is not allowed`}},
		{"unknown libraries", []change{edit(hello, "libs: [cc]", "libs: [cc, cublas]"), edit(hello, "flags: [\"-O2\"]", "libs: [nccl, boost]")},
			[]string{hello + `:10: build library "boost" is not one of nccl, mpi, nvshmem, cuda, pthread`, hello + `:16: required library "cublas" is not one of nccl, mpi, cuda-aware-mpi, nvshmem, torch, nvcc, cc`}},
		{"bad duration", []change{edit(sum, "timeout: 90s", "timeout: 90")},
			[]string{sum + `:31: bad duration "90": write it as "90s" or "2m"`}},
		{"env sets NVLS switch", []change{edit(sum, "OMP_NUM_THREADS: \"1\"", "NCCL_NVLS_ENABLE: \"1\"")},
			[]string{sum + `:11: env may not set NCCL_NVLS_ENABLE: the launcher keeps NVLink multicast off`}},
		{"manifest lesson missing", []change{edit(hello, "lesson: module0/01-intro", "lesson: module0/09-nothing")},
			[]string{hello + `:3: lesson "module0/09-nothing" does not exist (a lesson id is <module id>/<file name without .md>)`}},
		{"yaml syntax error", []change{edit(ring, "title: Ring\n", "title: [Ring\n")},
			[]string{ring + `:2: did not find expected ',' or ']'`}},
		{"duplicate key", []change{edit(ring, "title: Ring\n", "title: Ring\ntitle: Again\n")},
			[]string{ring + `:3: mapping key "title" already defined at line 2`}},
		{"torchrun needs python", []change{edit(ring, "launcher: single", "launcher: torchrun")},
			[]string{ring + `:8: launcher torchrun needs kind python, not "cuda"`}},
		{"course index missing", []change{remove("lessons/course.yaml")},
			[]string{`lessons/course.yaml: cannot read the course index: no such file`}},
		{"several files at once", []change{edit(hello, "kind: c\n", "kind: c\ncolour: red\n"), edit(ringLsn, "title: Rings\n", "")},
			[]string{hello + `:5: unknown key "colour"`, ringLsn + `:1: front matter is empty: a lesson needs a title`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validFS(t)
			for _, ch := range tt.changes {
				ch(t, m)
			}
			c, err := Load(m)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load accepted the course, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			if c != nil {
				t.Error("Load returned a course along with errors")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not an ErrorList: %v", err, err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(sortedLike(tt.want, got), "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// sortedLike orders want as got is ordered where they agree, so a test need not spell out the
// loader's sort order; any missing or extra error still makes the lists differ.
func sortedLike(want, got []string) []string {
	pos := map[string]int{}
	for i, g := range got {
		pos[g] = i
	}
	out := append([]string(nil), want...)
	rank := func(s string) int {
		if i, ok := pos[s]; ok {
			return i
		}
		return len(got)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && rank(out[j]) < rank(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestValidCourseIsClean(t *testing.T) {
	// The fixture itself must be valid, or every error test above proves nothing.
	mustLoad(t, validFS(t))
}

func TestErrorFormat(t *testing.T) {
	e := &Error{File: "a/b.yaml", Line: 3, Msg: "bad"}
	if e.Error() != "a/b.yaml:3: bad" {
		t.Error(e.Error())
	}
	e.Line = 0
	if e.Error() != "a/b.yaml: bad" {
		t.Error(e.Error())
	}
	l := ErrorList{{File: "x", Line: 1, Msg: "one"}, {File: "y", Line: 2, Msg: "two"}}
	if l.Error() != "x:1: one\ny:2: two" {
		t.Error(l.Error())
	}
	var target *Error
	if !errors.As(error(l), &target) || target.Msg != "one" {
		t.Error("errors.As through ErrorList")
	}
}
