package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
)

func loadCourse(t *testing.T) *course.Course {
	t.Helper()
	c, err := course.Load(os.DirFS("../course/testdata/course"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestInitCreatesStarterFilesAndTask(t *testing.T) {
	c := loadCourse(t)
	dir := t.TempDir()
	created, skipped, err := Init(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"module0-basics/hello/TASK.md", "module0-basics/hello/hello.c",
		"module0-basics/sum/TASK.md", "module0-basics/sum/helper.py", "module0-basics/sum/sum.py",
		"module1-more/ring/TASK.md", "module1-more/ring/ring.cu",
	}
	sort.Strings(created)
	if !reflect.DeepEqual(created, want) || len(skipped) != 0 {
		t.Fatalf("created %v skipped %v, want %v", created, skipped, want)
	}
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	hello := c.Exercise("module0/hello")
	if got := readFile(t, w.FilePath(hello, "hello.c")); got != "int hello(int n){return 0;}\n" {
		t.Errorf("hello.c is not the starter: %q", got)
	}
	if got := readFile(t, w.TaskPath(hello)); got != "# Say hello\n" {
		t.Errorf("TASK.md %q", got)
	}
	if w.ExerciseDir(hello) != filepath.Join(w.Root, "module0-basics", "hello") {
		t.Errorf("ExerciseDir %s", w.ExerciseDir(hello))
	}
	files := w.Files(c.Exercise("module0/sum"))
	if len(files) != 2 || files["sum.py"] != filepath.Join(w.Root, "module0-basics", "sum", "sum.py") {
		t.Errorf("Files %v", files)
	}
	if _, err := os.Stat(w.StatePath("workspace.json")); err != nil {
		t.Errorf("no marker: %v", err)
	}
	// A solution's text must never reach the workspace.
	if strings.Contains(readFile(t, w.FilePath(hello, "hello.c")), "return n;") {
		t.Error("init copied the solution")
	}
}

func TestInitNeverOverwrites(t *testing.T) {
	c := loadCourse(t)
	dir := t.TempDir()
	mine := filepath.Join(dir, "module0-basics", "hello", "hello.c")
	writeFile(t, mine, "my work\n")
	task := filepath.Join(dir, "module1-more", "ring", "TASK.md")
	writeFile(t, task, "my notes\n")
	created, skipped, err := Init(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"module0-basics/hello/hello.c", "module1-more/ring/TASK.md"}; !reflect.DeepEqual(sorted(skipped), want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if len(created) != 5 {
		t.Errorf("created %v", created)
	}
	if readFile(t, mine) != "my work\n" || readFile(t, task) != "my notes\n" {
		t.Fatal("init overwrote the learner's files")
	}
	// A second init changes nothing and creates nothing.
	writeFile(t, filepath.Join(dir, "module0-basics", "sum", "sum.py"), "edited\n")
	created, skipped, err = Init(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 0 || len(skipped) != 7 {
		t.Errorf("second init: created %v skipped %v", created, skipped)
	}
	if readFile(t, filepath.Join(dir, "module0-basics", "sum", "sum.py")) != "edited\n" {
		t.Error("second init overwrote an edit")
	}
	// A file removed since is created again: that is how new exercises arrive.
	os.Remove(filepath.Join(dir, "module1-more", "ring", "ring.cu"))
	created, _, err = Init(dir, c)
	if err != nil || !reflect.DeepEqual(created, []string{"module1-more/ring/ring.cu"}) {
		t.Errorf("re-init: created %v, %v", created, err)
	}
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

func TestFindAndOpen(t *testing.T) {
	c := loadCourse(t)
	dir := t.TempDir()
	if _, err := Open(dir); !errors.Is(err, ErrNoWorkspace) {
		t.Fatalf("Open of a plain folder: %v", err)
	}
	if _, err := Find(filepath.Join(dir)); !errors.Is(err, ErrNoWorkspace) {
		// t.TempDir is not inside a workspace unless the machine has one above /tmp.
		if err != nil {
			t.Fatalf("Find: %v", err)
		}
	}
	if _, _, err := Init(dir, c); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "module0-basics", "hello")
	w, err := Find(deep)
	if err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.Abs(dir)
	if w.Root != real {
		t.Errorf("Find root %s, want %s", w.Root, real)
	}
	// A file named .mgpu-learn is not a workspace.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, StateDir), "not a folder")
	if _, err := Open(other); !errors.Is(err, ErrNoWorkspace) {
		t.Errorf("Open with a .mgpu-learn file: %v", err)
	}
}

func TestResetBacksUpThenRestores(t *testing.T) {
	c := loadCourse(t)
	dir := t.TempDir()
	if _, _, err := Init(dir, c); err != nil {
		t.Fatal(err)
	}
	w, _ := Open(dir)
	sum := c.Exercise("module0/sum")
	writeFile(t, w.FilePath(sum, "sum.py"), "def s(): return 42  # my answer\n")
	// helper.py is left as the starter; TASK.md is removed.
	os.Remove(w.TaskPath(sum))

	backups, err := w.Reset(sum)
	if err != nil {
		t.Fatal(err)
	}
	if len(backups) != 1 {
		t.Fatalf("backups %v, want one (only sum.py changed)", backups)
	}
	wantPrefix := filepath.Join(dir, StateDir, BackupDir, "module0-sum") + string(filepath.Separator)
	if !strings.HasPrefix(backups[0], wantPrefix) || filepath.Base(backups[0]) != "sum.py" {
		t.Errorf("backup path %s, want under %s", backups[0], wantPrefix)
	}
	if got := readFile(t, backups[0]); got != "def s(): return 42  # my answer\n" {
		t.Errorf("backup holds %q", got)
	}
	if got := readFile(t, w.FilePath(sum, "sum.py")); got != "def s(): pass\n" {
		t.Errorf("sum.py after reset %q", got)
	}
	if got := readFile(t, w.TaskPath(sum)); got != "# Sum\n" {
		t.Errorf("TASK.md not restored: %q", got)
	}
	// A second reset of a pristine exercise makes no backup; a reset after another edit in the
	// same second makes a second, separate one.
	if b, err := w.Reset(sum); err != nil || len(b) != 0 {
		t.Errorf("reset of pristine files: %v %v", b, err)
	}
	writeFile(t, w.FilePath(sum, "sum.py"), "second try\n")
	writeFile(t, w.FilePath(sum, "helper.py"), "helper edit\n")
	b2, err := w.Reset(sum)
	if err != nil || len(b2) != 2 {
		t.Fatalf("second reset: %v %v", b2, err)
	}
	if filepath.Dir(b2[0]) == filepath.Dir(backups[0]) {
		t.Error("the second backup reused the first one's folder")
	}
	if readFile(t, backups[0]) != "def s(): return 42  # my answer\n" {
		t.Error("the first backup was changed")
	}
	got := map[string]string{}
	for _, b := range b2 {
		got[filepath.Base(b)] = readFile(t, b)
	}
	if got["sum.py"] != "second try\n" || got["helper.py"] != "helper edit\n" {
		t.Errorf("second backups %v", got)
	}
	// A deleted learner file is restored without a backup.
	os.Remove(w.FilePath(sum, "sum.py"))
	if b, err := w.Reset(sum); err != nil || len(b) != 0 || readFile(t, w.FilePath(sum, "sum.py")) != "def s(): pass\n" {
		t.Errorf("restore of a deleted file: %v %v", b, err)
	}
	// No temporary files are left behind.
	entries, _ := os.ReadDir(w.ExerciseDir(sum))
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

func TestResetKeepsFileOnBackupFailure(t *testing.T) {
	c := loadCourse(t)
	dir := t.TempDir()
	if _, _, err := Init(dir, c); err != nil {
		t.Fatal(err)
	}
	w, _ := Open(dir)
	hello := c.Exercise("module0/hello")
	writeFile(t, w.FilePath(hello, "hello.c"), "precious\n")
	// A file where the backups folder should be makes every backup fail, even for root.
	writeFile(t, filepath.Join(dir, StateDir, BackupDir), "in the way")
	if _, err := w.Reset(hello); err == nil {
		t.Fatal("reset succeeded without a place for the backup")
	}
	if readFile(t, w.FilePath(hello, "hello.c")) != "precious\n" {
		t.Fatal("reset replaced a file it could not back up")
	}
}
