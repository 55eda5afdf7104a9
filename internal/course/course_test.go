package course

import (
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

func TestResolve(t *testing.T) {
	c := mustLoad(t, os.DirFS("testdata/course"))
	tests := []struct {
		arg     string
		want    []string
		wantErr string
	}{
		{arg: "all", want: []string{"module0/hello", "module0/sum", "module1/ring"}},
		{arg: "module0", want: []string{"module0/hello", "module0/sum"}},
		{arg: "module0-basics/", want: []string{"module0/hello", "module0/sum"}},
		{arg: "module1/ring", want: []string{"module1/ring"}},
		{arg: "module1-more/ring", want: []string{"module1/ring"}},
		{arg: "sum", want: []string{"module0/sum"}},
		{arg: "module0/hallo", wantErr: `no exercise or module "module0/hallo"; did you mean module0/hello?`},
		{arg: "module1/hello", wantErr: `did you mean module0/hello`},
		{arg: "modul0", wantErr: `did you mean module0`},
		{arg: "zzzzzzzzzzzz", wantErr: `no exercise or module "zzzzzzzzzzzz": use "all", a module id such as "module0" or an exercise id such as "module0/hello"`},
		{arg: "", wantErr: `no exercise given`},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			got, err := c.Resolve(tt.arg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Resolve(%q) error %v, want one containing %q", tt.arg, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range got {
				ids = append(ids, e.ID)
			}
			if !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("Resolve(%q) = %v, want %v", tt.arg, ids, tt.want)
			}
		})
	}
}

func TestResolveAmbiguousName(t *testing.T) {
	c := &Course{Modules: []*Module{
		{ID: "module0", Dir: "module0-a", Exercises: []*Exercise{{Manifest: Manifest{ID: "module0/x"}, Dir: "exercises/module0-a/x"}}},
		{ID: "module1", Dir: "module1-b", Exercises: []*Exercise{{Manifest: Manifest{ID: "module1/x"}, Dir: "exercises/module1-b/x"}}},
	}}
	_, err := c.Resolve("x")
	if err == nil || !strings.Contains(err.Error(), "module0/x, module1/x") {
		t.Fatalf("error %v", err)
	}
}

func TestNewFS(t *testing.T) {
	root := os.DirFS("testdata/course")
	lessons, err := fs.Sub(root, "lessons")
	if err != nil {
		t.Fatal(err)
	}
	exercises, err := fs.Sub(root, "exercises")
	if err != nil {
		t.Fatal(err)
	}
	extra := map[string]fs.FS{
		"csrc":        fstest.MapFS{"mgpu.h": {Data: []byte("// header\n")}, "python/h.py": {Data: []byte("x=1\n")}},
		"share/deep":  fstest.MapFS{"a.txt": {Data: []byte("a")}},
		"share/other": fstest.MapFS{"b.txt": {Data: []byte("b")}},
	}
	u := NewFS(lessons, exercises, extra)
	c := mustLoad(t, u)
	if c.Exercise("module0/sum") == nil {
		t.Fatal("course through NewFS lost an exercise")
	}
	if err := fstest.TestFS(u,
		"lessons/course.yaml", "exercises/module0-basics/hello/starter/hello.c",
		"csrc/mgpu.h", "csrc/python/h.py", "share/deep/a.txt", "share/other/b.txt"); err != nil {
		t.Fatal(err)
	}
	top, err := fs.ReadDir(u, ".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range top {
		if !de.IsDir() {
			t.Errorf("%s is not a directory", de.Name())
		}
		names = append(names, de.Name())
	}
	if want := []string{"csrc", "exercises", "lessons", "share"}; !reflect.DeepEqual(names, want) {
		t.Errorf("top level %v, want %v", names, want)
	}
	if _, err := fs.ReadFile(u, "lessons/nope.md"); err == nil || !strings.Contains(err.Error(), "lessons/nope.md") {
		t.Errorf("missing file error %v should name the union path", err)
	}
	if _, err := fs.Stat(u, "nowhere/x"); !errorsIsNotExist(err) {
		t.Errorf("stat outside the mounts: %v", err)
	}
	if fi, err := fs.Stat(u, "exercises"); err != nil || fi.Name() != "exercises" || !fi.IsDir() {
		t.Errorf("stat of a mount point: %v %v", fi, err)
	}
	// MapFS parts work as well as fs.Sub ones.
	m := validFS(t)
	lm, _ := fs.Sub(m, "lessons")
	em, _ := fs.Sub(m, "exercises")
	mustLoad(t, NewFS(lm, em))
}

func errorsIsNotExist(err error) bool { return err != nil && os.IsNotExist(err) }

func TestNewFSPanicsOnOverlap(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("overlapping mount points did not panic")
		}
	}()
	NewFS(fstest.MapFS{}, fstest.MapFS{}, map[string]fs.FS{"lessons/x": fstest.MapFS{}})
}

func TestSplitPages(t *testing.T) {
	tests := []struct {
		name   string
		md     string
		titles []string
		first  string // the first page's markdown
	}{
		{"no headings", "just text\n", []string{"T"}, "just text\n"},
		{"empty body", "\n\n", []string{"T"}, ""},
		{"starts with a section", "## A\n\naa\n## B\nbb\n", []string{"A", "B"}, "## A\n\naa\n"},
		{"fenced heading", "intro\n\n~~~\n## no\n~~~\n\n## Yes\n", []string{"T", "Yes"}, "intro\n\n~~~\n## no\n~~~\n"},
		{"indented code heading", "intro\n\n    ## no\n\n## Yes\n", []string{"T", "Yes"}, "intro\n\n    ## no\n"},
		{"h1 and h3 do not cut", "# One\n### Three\n## Two\n", []string{"T", "Two"}, "# One\n### Three\n"},
		{"setext h2 does not cut", "Title\n-----\n\n## Real\n", []string{"T", "Real"}, "Title\n-----\n"},
		{"inline markup in title", "## Use *`cudaMemcpy`* [fast](x)\n", []string{"Use cudaMemcpy fast"}, "## Use *`cudaMemcpy`* [fast](x)\n"},
		{"closing hashes", "## Closed ##\n", []string{"Closed"}, "## Closed ##\n"},
		{"heading in list", "- item\n\n  ## nested\n\n## Top\n", []string{"T", "Top"}, "- item\n\n  ## nested\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := splitPages(tt.md, "T")
			var titles []string
			for _, p := range pages {
				titles = append(titles, p.Title)
			}
			if !reflect.DeepEqual(titles, tt.titles) {
				t.Errorf("titles %q, want %q", titles, tt.titles)
			}
			if len(pages) > 0 && pages[0].Markdown != tt.first {
				t.Errorf("first page %q, want %q", pages[0].Markdown, tt.first)
			}
			// Nothing is lost: the pages hold all of the text.
			var all strings.Builder
			for _, p := range pages {
				all.WriteString(p.Markdown)
			}
			if strip(all.String()) != strip(tt.md) {
				t.Errorf("pages %q do not add up to %q", all.String(), tt.md)
			}
		})
	}
}

func strip(s string) string { return strings.Join(strings.Fields(s), " ") }

func TestLessonFrontMatter(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the errors, one per line; "" for none
	}{
		{"ok", "---\ntitle: A\n---\nbody\n", ""},
		{"crlf", "---\r\ntitle: A\r\n---\r\nbody\r\n", ""},
		{"not closed", "---\ntitle: A\nbody\n", "l.md:1: front matter is never closed: add a \"---\" line after it"},
		{"syntax error line", "---\ntitle: A\nexercises: [x\n---\n", "l.md:3: did not find expected ',' or ']'"},
		{"type error line", "---\ntitle: A\nexercises:\n  a: b\n---\n", "l.md:4: cannot unmarshal !!map into []string"},
		{"unknown key line", "---\n\ntitle: A\nweight: 3\n---\n", "l.md:4: unknown key \"weight\""},
		{"no title", "---\nexercises: []\n---\n", "l.md:1: front matter has no title"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs ErrorList
			l, _ := parseLesson("l.md", []byte(tt.src), &errs)
			if errs.Error() != tt.want {
				t.Errorf("errors %q, want %q", errs.Error(), tt.want)
			}
			if tt.want == "" && (l.Title != "A" || strings.TrimSpace(l.Body) != "body") {
				t.Errorf("lesson %+v", l)
			}
		})
	}
}

func TestYAMLSyntaxErrorLines(t *testing.T) {
	// yaml.v3 counts parser errors from 0 and scanner errors from 1; both must come out right.
	tests := []struct {
		src  string
		line int
	}{
		{"a: 1\nb: [x\nc: 2\n", 2},
		{"a: 1\nb: {x: 1\nc: 2\n", 2},
		{"a: 1\nb: 2\n- c\n", 3},
		{"a: 1\nb:\n  - x\n y: 2\n", 4},
		{"a: 1\n  b: 2\nc: 3\n", 2},
		{"a: 1\nb: @x\n", 2},
		{"a: 1\n\tb: 2\n", 2},
		{"[x\n", 2}, // the problem is found at the end of the text
	}
	for _, tt := range tests {
		var errs ErrorList
		var v map[string]any
		decodeYAML("f", []byte(tt.src), 0, &v, &errs)
		if len(errs) != 1 || errs[0].Line != tt.line {
			t.Errorf("%q: errors %v, want one at line %d", tt.src, errs, tt.line)
		}
	}
}
