package course

import (
	"errors"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/course-bad/want-errors.txt")

// TestBadCourseFixture loads the repository's bad course and compares the whole report.
func TestBadCourseFixture(t *testing.T) {
	const dir = "../../testdata/course-bad"
	_, err := Load(os.DirFS(dir))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Load: %v, want an ErrorList", err)
	}
	got := list.Error() + "\n"
	if *update {
		if err := os.WriteFile(dir+"/want-errors.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(dir + "/want-errors.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("errors:\n%s\nwant:\n%s", got, want)
	}
}
