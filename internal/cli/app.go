// Package cli holds mgpu-learn's commands: small cobra constructors that share one App, which
// loads the course, finds the workspace, probes the machine and wires the checker.
package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mgpu-learn/mgpu-learn/csrc"
	"github.com/mgpu-learn/mgpu-learn/exercises"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
	"github.com/mgpu-learn/mgpu-learn/lessons"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// Version is set at link time (-ldflags "-X .../internal/cli.Version=v0.1.0").
var Version = "dev"

// App is what every command shares. Fields are set from flags and the environment; the
// course, workspace and machine facts are loaded on first use.
type App struct {
	In       io.Reader
	Out, Err io.Writer

	CourseDir    string // --course / MGPU_LEARN_COURSE; "" = embedded
	WorkspaceDir string // --workspace / MGPU_LEARN_WORKSPACE; "" = search upwards
	NoColor      bool

	course *course.Course
	facts  *probe.Facts
}

// Main runs the command line and returns the process exit code.
func Main(args []string, in io.Reader, out, errw io.Writer) int {
	app := &App{In: in, Out: out, Err: errw}
	root := NewRootCmd(app)
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errw)
	cmd, err := root.ExecuteC()
	code := exitCode(err)
	if err != nil && !errors.Is(err, errSilent) {
		fmt.Fprintf(errw, "mgpu-learn: %v\n", err)
		if wantsHelp(err) {
			path := "mgpu-learn"
			if cmd != nil {
				path = cmd.CommandPath()
			}
			fmt.Fprintf(errw, "Run '%s --help' for usage.\n", path)
		}
		if code == ExitRunner && !isComplete(err) {
			fmt.Fprintln(errw, "This is a problem in mgpu-learn or this machine, not in your code.")
		}
	}
	return code
}

// NewRootCmd builds the command tree.
func NewRootCmd(app *App) *cobra.Command {
	root := &cobra.Command{
		Use:   "mgpu-learn",
		Short: "Learn multi-GPU programming by doing",
		Long: `mgpu-learn teaches multi-GPU programming with lessons and exercises that compile and
run on real GPUs: PyTorch distributed, CUDA-aware MPI, NCCL, NVSHMEM and peer memory.

  mgpu-learn init            create a workspace with every exercise's starter files
  mgpu-learn start           open the course in the terminal UI
  mgpu-learn check module0   build, run and verify every exercise of module 0

` + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	// The defaults come from the environment after the flags are defined, so that --help shows
	// the same defaults whatever the environment holds; a flag on the command line still wins.
	root.PersistentFlags().StringVar(&app.CourseDir, "course", "", "load the course from `DIR`, not the built-in one (course authors; also MGPU_LEARN_COURSE)")
	root.PersistentFlags().StringVar(&app.WorkspaceDir, "workspace", "", "use the workspace in `DIR`, not the one found upwards from here (also MGPU_LEARN_WORKSPACE)")
	root.PersistentFlags().BoolVar(&app.NoColor, "no-color", false, "plain output without colours or styles (also NO_COLOR)")
	app.CourseDir = os.Getenv("MGPU_LEARN_COURSE")
	app.WorkspaceDir = os.Getenv("MGPU_LEARN_WORKSPACE")
	app.NoColor = os.Getenv("NO_COLOR") != ""
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%v (see '%s --help')", err, c.CommandPath())
	})

	root.AddCommand(
		newStartCmd(app),
		newListCmd(app),
		newShowCmd(app),
		newInitCmd(app),
		newCheckCmd(app),
		newBuildCmd(app),
		newHintCmd(app),
		newSolutionCmd(app),
		newResetCmd(app),
		newWatchCmd(app),
		newProgressCmd(app),
		newDoctorCmd(app),
		newCourseCmd(app),
		newWorkshopCmd(app),
		newVersionCmd(app),
	)
	explainArgs(root)
	return root
}

// Course loads the course once: from --course DIR, or the embedded one.
func (a *App) Course() (*course.Course, error) {
	if a.course != nil {
		return a.course, nil
	}
	var fsys fs.FS
	if a.CourseDir != "" {
		st, err := os.Stat(a.CourseDir)
		if err != nil || !st.IsDir() {
			return nil, usageErrorf("--course %s: not a directory", a.CourseDir)
		}
		fsys = os.DirFS(a.CourseDir)
	} else {
		les, err := fs.Sub(lessons.FS, ".")
		if err != nil {
			return nil, runnerErrorf("embedded lessons: %v", err)
		}
		fsys = course.NewFS(les, exercises.FS)
	}
	c, err := course.Load(fsys)
	if err != nil {
		if a.CourseDir != "" {
			return nil, stateErrorf("the course in %s has problems:\n%v", a.CourseDir, err)
		}
		return nil, runnerErrorf("the built-in course has problems:\n%v", err)
	}
	a.course = c
	return c, nil
}

// Harness is the csrc tree the checker compiles with: the course's own csrc/ when a course
// directory has one, else the built-in harness.
func (a *App) Harness() fs.FS {
	if a.CourseDir != "" {
		dir := filepath.Join(a.CourseDir, "csrc")
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return os.DirFS(dir)
		}
	}
	return csrc.FS
}

// Workspace finds the learner's workspace. With offer, an interactive terminal is asked
// whether to create one when none exists.
func (a *App) Workspace(offer bool) (*workspace.Workspace, error) {
	if a.WorkspaceDir != "" {
		w, err := workspace.Open(a.WorkspaceDir)
		if err != nil {
			return nil, stateErrorf("workspace %s: %v (create it with 'mgpu-learn init %s')", a.WorkspaceDir, err, a.WorkspaceDir)
		}
		return w, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, runnerErrorf("current directory: %v", err)
	}
	w, err := workspace.Find(wd)
	if err == nil {
		return w, nil
	}
	if !errors.Is(err, workspace.ErrNoWorkspace) {
		return nil, runnerErrorf("looking for a workspace: %v", err)
	}
	dir := filepath.Join(wd, defaultWorkspaceDir)
	if offer && a.interactive() {
		if a.confirm(fmt.Sprintf("No mgpu-learn workspace here or above. Create one in %s?", dir), true) {
			c, err := a.Course()
			if err != nil {
				return nil, err
			}
			created, _, err := workspace.Init(dir, c)
			if err != nil {
				return nil, runnerErrorf("creating workspace: %v", err)
			}
			fmt.Fprintf(a.Err, "Created %s with %s.\n", dir, countOf(len(created), "file", "files"))
			return workspace.Open(dir)
		}
	}
	return nil, stateErrorf("no mgpu-learn workspace in %s or above: create one with 'mgpu-learn init' (or pass --workspace DIR)", wd)
}

const defaultWorkspaceDir = "mgpu-workspace"

// Facts probes the machine (cached between runs unless refresh).
func (a *App) Facts(ctx context.Context, refresh bool) *probe.Facts {
	if a.facts != nil && !refresh {
		return a.facts
	}
	f, err := probe.Discover(ctx, probe.Options{Refresh: refresh})
	if err != nil || f == nil {
		f = &probe.Facts{Problems: []string{fmt.Sprintf("probing this machine failed: %v", err)}}
	}
	a.facts = f
	return f
}

// plain reports whether output must be plain text: NO_COLOR, --no-color, or not a terminal.
func (a *App) plain() bool {
	if a.NoColor {
		return true
	}
	return !isTerminal(a.Out)
}

func (a *App) interactive() bool {
	f, ok := a.In.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && isTerminal(a.Err)
}

func (a *App) confirm(question string, def bool) bool {
	choices := "[y/N]"
	if def {
		choices = "[Y/n]"
	}
	fmt.Fprintf(a.Err, "%s %s ", question, choices)
	line, err := bufio.NewReader(a.In).ReadString('\n')
	if err != nil && line == "" {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "":
		return def
	case "y", "yes":
		return true
	}
	return false
}

// width is the width to wrap text at: the terminal's, else COLUMNS, else 80.
func (a *App) width() int {
	if w := a.columns(); w > 0 {
		return w
	}
	return 80
}

// columns is the terminal's width, else COLUMNS when set; 0 when neither says.
func (a *App) columns() int {
	if f, ok := a.Out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 20 {
			return w
		}
	}
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c > 20 {
		return c
	}
	return 0
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
