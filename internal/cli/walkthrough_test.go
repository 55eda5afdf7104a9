package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// Rough edges a new learner met; each test pins the fix.

func TestSolutionHeaderIsACommentOfTheFilesLanguage(t *testing.T) {
	for file, want := range map[string]string{
		"first_allreduce.py": "#", "ring.cu": "//", "sum.c": "//", "mgpu.h": "//",
		"run.sh": "#", "Makefile": "#", "CMakeLists.txt": "#",
	} {
		if got := commentMark(file); got != want {
			t.Errorf("commentMark(%q) = %q, want %q", file, got, want)
		}
	}
}

// progress keeps every line within the width, a module's long title giving way, and does
// not pad exercise rows to the longest title.
func TestProgressFitsTheWidth(t *testing.T) {
	long := strings.Repeat("A very long module title, ", 5)
	r := progressReport{Modules: []progressModule{
		{ID: "module0", Title: long, Passed: 1, Total: 2, Exercises: []progressExercise{
			{ID: "module0/devices", Status: statusPassed, Attempts: 1, Best: map[string]float64{"busbw": 339.2}},
			{ID: "module0/peer-copy", Status: statusNotStarted},
		}},
		{ID: "module1", Title: "Short", Total: 1, Exercises: []progressExercise{{ID: "module1/first-allreduce", Status: statusAttempted, Attempts: 3}}},
	}}
	var b bytes.Buffer
	writeProgress(&b, r, 80)
	out := b.String()
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if w := ansi.StringWidth(line); w > 80 {
			t.Errorf("line is %d columns wide: %q", w, line)
		}
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing blanks: %q", line)
		}
	}
	for _, want := range []string{"module0  A very long", "…  (1/2 passed)\n", "module1  Short  (0/1 passed)\n",
		"  module0/devices          passed       1 attempt   busbw 339\n",
		"  module0/peer-copy        not started  0 attempts\n",
		"  module1/first-allreduce  attempted    3 attempts\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	b.Reset()
	writeProgress(&b, r, 0)
	if !strings.Contains(b.String(), long+"  (1/2 passed)") {
		t.Errorf("width 0 cut the title:\n%s", b.String())
	}
}

// The default --help shows for a flag must not depend on the environment.
func TestHelpDefaultsDoNotComeFromTheEnvironment(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	t.Setenv("MGPU_LEARN_COURSE", "/some/course")
	t.Setenv("MGPU_LEARN_WORKSPACE", "/some/ws")
	code, out, _ := mgpu(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, bad := range []string{"(default true)", "/some/course", "/some/ws"} {
		if strings.Contains(out, bad) {
			t.Errorf("--help shows %q from the environment:\n%s", bad, out)
		}
	}
	app := &App{}
	NewRootCmd(app)
	if !app.NoColor || app.CourseDir != "/some/course" || app.WorkspaceDir != "/some/ws" {
		t.Errorf("the environment no longer sets the defaults: %+v", app)
	}
}

func TestArgumentCountErrorsSayWhatIsExpected(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"hint"}, "mgpu-learn: hint needs <exercise>; for example: mgpu-learn hint module0/peer-copy\n"},
		{[]string{"hint", "a", "b"}, `hint takes one argument (<exercise>); it got 2: "a" "b"`},
		{[]string{"progress", "x"}, `progress takes no arguments; it got "x"`},
		{[]string{"init", "a", "b"}, `init takes at most one argument ([DIR]); it got 2`},
		{[]string{"workshop", "join", "http://x"}, `workshop join needs URL CODE (it got only "http://x")`},
		{[]string{"workshop", "class", "create", "--db", "x.db"}, "workshop class create needs NAME"},
	} {
		code, _, e := mgpu(t, tc.args...)
		if code != ExitUsage || !strings.Contains(e, tc.want) || strings.Contains(e, "arg(s)") {
			t.Errorf("%v: exit %d\n%s\nwant %q", tc.args, code, e, tc.want)
		}
		if want := "Run 'mgpu-learn " + strings.Join(tc.args[:1], " "); !strings.Contains(e, want) {
			t.Errorf("%v: no pointer to the command's help (%q):\n%s", tc.args, want, e)
		}
	}
}

// Only errors about how the command was typed point to --help; the others say what to do.
func TestHelpPointerOnlyForUsageErrors(t *testing.T) {
	ws, flags := workshopEnv(t)
	code, _, e := mgpu(t, append([]string{"solution", "module0/sum"}, flags...)...)
	if code != ExitUsage || !strings.Contains(e, "unlocks when you do") || strings.Contains(e, "--help") {
		t.Errorf("locked solution: exit %d\n%s", code, e)
	}
	code, _, e = mgpu(t, "--workspace", filepath.Join(ws, "nope"), "progress")
	if code != ExitUsage || strings.Contains(e, "for usage") {
		t.Errorf("no workspace: exit %d\n%s", code, e)
	}
	db := filepath.Join(t.TempDir(), "class.db")
	if code, _, e := mgpu(t, "workshop", "class", "create", "--db", db, "gpu-101"); code != 0 {
		t.Fatalf("class create: %d %s", code, e)
	}
	code, _, e = mgpu(t, "workshop", "class", "create", "--db", db, "gpu-101")
	if code != ExitUsage || !strings.Contains(e, "taken") || strings.Contains(e, "for usage") {
		t.Errorf("class name taken: exit %d\n%s", code, e)
	}
	code, _, e = mgpu(t, append([]string{"hint", "module0/nope"}, flags...)...)
	if code != ExitUsage || !strings.Contains(e, "Run 'mgpu-learn hint --help' for usage.") {
		t.Errorf("unknown exercise: exit %d\n%s", code, e)
	}
}

func TestOneExerciseCommandGivenAModule(t *testing.T) {
	_, flags := workshopEnv(t)
	code, _, e := mgpu(t, append([]string{"hint", "module0"}, flags...)...)
	if code != ExitUsage || !strings.Contains(e, "module0 is a module; hint takes one exercise, e.g. module0/sum") || strings.Contains(e, "did you mean") {
		t.Errorf("hint module0: exit %d\n%s", code, e)
	}
	code, _, e = mgpu(t, append([]string{"reset", "all"}, flags...)...)
	if code != ExitUsage || !strings.Contains(e, "reset takes one exercise, not all of them") {
		t.Errorf("reset all: exit %d\n%s", code, e)
	}
	// A typo is not answered with itself.
	code, _, e = mgpu(t, append([]string{"hint", "module0/sun"}, flags...)...)
	if code != ExitUsage || strings.Contains(e, "did you mean module0/sun") {
		t.Errorf("hint module0/sun: exit %d\n%s", code, e)
	}
	// An exercise name that one module has is enough, as for check.
	if code, out, e := mgpu(t, append([]string{"hint", "sum"}, flags...)...); code != 0 || !strings.Contains(out, "Hint 1/") {
		t.Errorf("hint sum: exit %d\n%s%s", code, out, e)
	}
}

// init run inside a workspace updates it instead of making a workspace in a workspace, and
// leaves the learner's files alone.
func TestInitInsideAWorkspaceUpdatesIt(t *testing.T) {
	ws, flags := workshopEnv(t)
	mine := filepath.Join(ws, "module0-fixtures", "sum", "sum.c")
	if err := os.WriteFile(mine, []byte("/* mine */\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(ws, "module0-fixtures", "timing", "TASK.md"))
	sub := filepath.Join(ws, "module0-fixtures")
	t.Chdir(sub)
	code, out, e := mgpu(t, "--course", flags[1], "init")
	if code != 0 || !strings.Contains(out, "You are in the workspace "+ws+" already") || !strings.Contains(out, "Workspace "+ws+": 1 file created") {
		t.Errorf("init in a workspace: exit %d\n%s%s", code, out, e)
	}
	if _, err := os.Stat(filepath.Join(sub, defaultWorkspaceDir)); !os.IsNotExist(err) {
		t.Errorf("init made a workspace inside the workspace: %v", err)
	}
	code, out, e = mgpu(t, "--course", flags[1], "init", "inner")
	if code != 0 || !strings.Contains(out, filepath.Join(sub, "inner")+" is inside the workspace "+ws) {
		t.Errorf("init DIR in a workspace: exit %d\n%s%s", code, out, e)
	}
	if _, err := os.Stat(filepath.Join(sub, "inner")); !os.IsNotExist(err) {
		t.Errorf("init made a workspace inside the workspace: %v", err)
	}
	if b, _ := os.ReadFile(mine); string(b) != "/* mine */\n" {
		t.Errorf("init changed the learner's file: %q", b)
	}
}

func TestWorkshopJoinUnreachableOrAlreadyJoined(t *testing.T) {
	_, flags := workshopEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	code, _, e := mgpu(t, append([]string{"workshop", "join", dead, "K7QM-2XPA", "--name", "Ada"}, flags...)...)
	if code != ExitUnsupported || !strings.Contains(e, "can't reach the class server at "+dead) ||
		!strings.Contains(e, "check the address with your instructor") || strings.Contains(e, "problem in mgpu-learn") || strings.Contains(e, "--help") {
		t.Errorf("join an unreachable server: exit %d\n%s", code, e)
	}
	f := newClassFake(t)
	if code, _, e := mgpu(t, append([]string{"workshop", "join", f.srv.URL, "K7QM-2XPA", "--name", "Ada"}, flags...)...); code != 0 {
		t.Fatalf("join: %d %s", code, e)
	}
	code, _, e = mgpu(t, append([]string{"workshop", "join", f.srv.URL, "K7QM-2XPA", "--name", "Ada"}, flags...)...)
	if code != ExitUsage || !strings.Contains(e, `already in class "gpu-101"`) || !strings.Contains(e, "workshop leave' first") ||
		strings.Contains(e, "problem in mgpu-learn") || strings.Contains(e, "--help") {
		t.Errorf("join twice: exit %d\n%s", code, e)
	}
}

// A lesson title in a page's footer stays literal: its underscores and asterisks are escaped,
// so they cannot pair up as emphasis (init_process_group printed as init_**process_**group).
func TestFooterTitleLiteral(t *testing.T) {
	if got, want := mdLiteral("init_process_group, *x* and `y`"), "init\\_process\\_group, \\*x\\* and \\`y\\`"; got != want {
		t.Errorf("mdLiteral = %q, want %q", got, want)
	}
}
