package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the golden outputs in testdata/script")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"mgpu-learn": func() { os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the command-line scripts in testdata/script against the CPU fixture course.
func TestScripts(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("FIXTURE", filepath.Join(root, "testdata", "fixture-course"))
			env.Setenv("BADCOURSE", filepath.Join(root, "testdata", "course-bad"))
			env.Setenv("TESTCOURSE", filepath.Join(root, "internal", "course", "testdata", "course"))
			env.Setenv("MGPU_LEARN_CACHE", filepath.Join(env.WorkDir, ".cache", "mgpu"))
			env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
			env.Setenv("NO_COLOR", "1")
			env.Setenv("COLUMNS", "100")
			env.Setenv("PATH", os.Getenv("PATH"))
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exits N cmd args...: runs mgpu-learn and asserts its exact exit code.
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) < 1 {
					ts.Fatalf("usage: exits CODE args...")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exits: bad code %q", args[0])
				}
				err = ts.Exec("mgpu-learn", args[1:]...)
				got := 0
				if err != nil {
					if ee, ok := err.(interface{ ExitCode() int }); ok {
						got = ee.ExitCode()
					} else {
						ts.Fatalf("exits: %v", err)
					}
				}
				if (got == want) == neg {
					ts.Fatalf("mgpu-learn %v exited %d, want %d", args[1:], got, want)
				}
			},
		},
	})
}
