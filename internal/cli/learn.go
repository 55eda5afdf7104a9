package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/doctor"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
)

// Exercise statuses shown by list and progress.
const (
	statusNotStarted = "not started"
	statusAttempted  = "attempted"
	statusCorrect    = "correct, speed not judged"
	statusPassed     = "passed"
)

func newListCmd(app *App) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List modules and exercises with their status and requirements",
		Example: `  mgpu-learn list
  mgpu-learn list --json | jq '.modules[].exercises[] | select(.runnable)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := app.Course()
			if err != nil {
				return err
			}
			out := app.listing(cmd.Context(), c, app.progressOrEmpty())
			if asJSON {
				return writeJSON(app.Out, out)
			}
			if writeListing(app.Out, out, app.columns()) {
				fmt.Fprintln(app.Err, "\n'mgpu-learn doctor' says what this machine lacks for each module, and how to get it.")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (schema in docs/cli.md)")
	return cmd
}

// listing builds the course map with statuses and whether this machine meets each
// exercise's requirements.
func (a *App) listing(ctx context.Context, c *course.Course, prog *workspace.Progress) listing {
	facts := a.Facts(ctx, false)
	out := listing{Schema: 1, Course: c.Title}
	for _, m := range c.Modules {
		lm := listedModule{ID: m.ID, Title: m.Title}
		for _, e := range m.Exercises {
			le := listedExercise{
				ID: e.ID, Title: e.Title, Status: exerciseStatus(prog, e.ID),
				GPUs: e.Requires.GPUs, Libs: e.Requires.Libs,
			}
			rs := doctor.UnmetExercise(facts, &e.Manifest)
			for _, r := range rs {
				le.Missing = append(le.Missing, r.What)
			}
			le.Runnable = len(le.Missing) == 0
			if !le.Runnable {
				lm.blocked++
				lm.needs = mergeNeeds(lm.needs, needsOf(facts, &e.Manifest, rs))
			}
			if le.Status == statusPassed {
				lm.Passed++
			}
			lm.Exercises = append(lm.Exercises, le)
		}
		out.Modules = append(out.Modules, lm)
	}
	return out
}

type listing struct {
	Schema  int            `json:"schema"`
	Course  string         `json:"course"`
	Modules []listedModule `json:"modules"`
}

type listedModule struct {
	ID        string           `json:"id"`
	Title     string           `json:"title"`
	Passed    int              `json:"passed"`
	Exercises []listedExercise `json:"exercises"`

	blocked int    // exercises that can't run here
	needs   []need // what they need that this machine lacks, merged
}

type listedExercise struct {
	ID       string   `json:"id"`
	Title    string   `json:"title"`
	Status   string   `json:"status"`
	GPUs     int      `json:"gpus"`
	Libs     []string `json:"libs"`
	Runnable bool     `json:"runnable"`
	Missing  []string `json:"missing,omitempty"`
}

// writeListing prints the course map: per module a heading, one line saying what its
// exercises need that this machine lacks (when something is; doctor says the rest), and one
// line per exercise: id, status, requirements, whether it runs here, title. With width > 0
// those lines are cut to width columns (an exercise's title gives way first); 0 leaves them
// whole. It returns whether some exercise can't run here.
func writeListing(w io.Writer, l listing, width int) bool {
	blocked := false
	fmt.Fprintln(w, l.Course)
	for _, m := range l.Modules {
		fmt.Fprintf(w, "\n%s  %s  (%d/%d passed)\n", m.ID, m.Title, m.Passed, len(m.Exercises))
		var buf strings.Builder
		switch {
		case m.blocked == 0:
		case m.blocked == len(m.Exercises):
			fmt.Fprintf(&buf, "  can't run here: needs %s\n", sayNeeds(m.needs))
		case m.blocked == 1:
			fmt.Fprintf(&buf, "  1 of its %d exercises can't run here: it needs %s\n", len(m.Exercises), sayNeeds(m.needs))
		default:
			fmt.Fprintf(&buf, "  %d of its %d exercises can't run here: they need %s\n", m.blocked, len(m.Exercises), sayNeeds(m.needs))
		}
		blocked = blocked || m.blocked > 0
		tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		for _, e := range m.Exercises {
			needs := fmt.Sprintf("%d GPU", e.GPUs)
			if e.GPUs != 1 {
				needs += "s"
			}
			if len(e.Libs) > 0 {
				needs += ", " + strings.Join(e.Libs, ", ")
			}
			here := "runs here"
			if !e.Runnable {
				here = "can't run"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.ID, e.Status, needs, here, e.Title)
		}
		tw.Flush()
		for _, line := range strings.SplitAfter(buf.String(), "\n") {
			if line == "" {
				continue
			}
			if width > 0 {
				line = cutLine(strings.TrimSuffix(line, "\n"), width) + "\n"
			}
			io.WriteString(w, line)
		}
	}
	return blocked
}

// cutLine cuts s to width columns, ending it with "…" when cut.
func cutLine(s string, width int) string {
	if ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "…")
}

func newShowCmd(app *App) *cobra.Command {
	var page int
	var all bool
	cmd := &cobra.Command{
		Use:   "show <module|lesson|exercise>",
		Short: "Read a lesson, a whole module's lessons, or an exercise's task",
		Long: `show prints lessons and tasks formatted for the terminal. In a terminal a module is shown
one page (one "##" section) at a time, starting where you last read; piped (to less, grep, a
file) or with --all it prints the whole module, every lesson and every page in order, as plain
text. Lines are wrapped at the terminal's width (COLUMNS, or 80, when piped).`,
		Example: `  mgpu-learn show module0             # the module's lessons, page by page in a terminal
  mgpu-learn show module0 --page 3    # page 3 of the module
  mgpu-learn show module0 | less      # the whole module (also: --all)
  mgpu-learn show module0 | grep -n NVLink
  mgpu-learn show module0/peer-copy   # the exercise's task and your files`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && page != 0 {
				return usageErrorf("--all and --page go one at a time: --all prints every page")
			}
			c, err := app.Course()
			if err != nil {
				return err
			}
			// Piped, a module prints whole (as man and gh do) unless a page is asked for.
			whole := all || (page == 0 && !isTerminal(app.Out))
			md, err := app.showMarkdown(c, args[0], page, whole)
			if err != nil {
				return err
			}
			out, err := course.Render(md, app.width(), app.plain())
			if err != nil {
				return runnerErrorf("rendering: %v", err)
			}
			fmt.Fprint(app.Out, out)
			return nil
		},
	}
	cmd.Flags().IntVar(&page, "page", 0, "show page `N` (1-based) of a module or lesson; 0 shows a module's first page and a lesson whole")
	cmd.Flags().BoolVar(&all, "all", false, "show a whole module, every lesson and page in order (what piped output gets)")
	return cmd
}

// showMarkdown finds what `show` prints for an id: with whole, all of a module's pages.
func (a *App) showMarkdown(c *course.Course, id string, page int, whole bool) (string, error) {
	if e := c.Exercise(id); e != nil {
		return a.exerciseMarkdown(e)
	}
	if m := c.Module(id); m != nil {
		pages := modulePages(m)
		if len(pages) == 0 {
			return fmt.Sprintf("# %s\n\n%s\n", m.Title, m.Summary), nil
		}
		if whole {
			return wholeModule(m, pages), nil
		}
		if page == 0 {
			page = 1
		}
		if page < 1 || page > len(pages) {
			return "", usageErrorf("%s has pages 1 to %d", m.ID, len(pages))
		}
		p := pages[page-1]
		var b strings.Builder
		// No emphasis around the footer: a title's underscores (init_process_group) would
		// pair up with it and print as stray asterisks where there is no color.
		fmt.Fprintf(&b, "%s\n\n---\n%s — page %d of %d: %s. ", p.Markdown, m.ID, page, len(pages), mdLiteral(p.Lesson.Title))
		if page < len(pages) {
			fmt.Fprintf(&b, "Next: `mgpu-learn show %s --page %d`", m.ID, page+1)
		} else if len(m.Exercises) > 0 {
			fmt.Fprintf(&b, "Now try `mgpu-learn show %s`", m.Exercises[0].ID)
		}
		b.WriteString("\n")
		a.rememberPage(m.ID, page)
		return b.String(), nil
	}
	for _, m := range c.Modules {
		for _, l := range m.Lessons {
			if l.ID != id {
				continue
			}
			if page == 0 {
				return withTitle(l, l.Body), nil
			}
			if page < 1 || page > len(l.Pages) {
				return "", usageErrorf("%s has pages 1 to %d", l.ID, len(l.Pages))
			}
			return l.Pages[page-1].Markdown, nil
		}
	}
	return "", usageErrorf("no module, lesson or exercise %q%s", id, suggest(c, id))
}

// wholeModule is every page of m in order, then its exercises.
func wholeModule(m *course.Module, pages []modulePage) string {
	var b strings.Builder
	for i, p := range pages {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(strings.TrimRight(p.Markdown, "\n"))
		b.WriteString("\n")
	}
	if len(m.Exercises) > 0 {
		fmt.Fprintf(&b, "\n---\n\n## Exercises of %s\n\n", m.ID)
		for _, e := range m.Exercises {
			fmt.Fprintf(&b, "- `%s`: %s\n", e.ID, e.Title)
		}
		fmt.Fprintf(&b, "\n`mgpu-learn show %s` shows the first one's task.\n", m.Exercises[0].ID)
	}
	return b.String()
}

// withTitle puts the lesson's title on top of md unless md starts with a title of its own.
func withTitle(l *course.Lesson, md string) string {
	if strings.HasPrefix(strings.TrimSpace(md), "# ") || l.Title == "" {
		return md
	}
	return "# " + l.Title + "\n\n" + md
}

type modulePage struct {
	Lesson   *course.Lesson
	Markdown string
}

func modulePages(m *course.Module) []modulePage {
	var out []modulePage
	for _, l := range m.Lessons {
		for i, p := range l.Pages {
			md := p.Markdown
			if i == 0 {
				md = withTitle(l, md)
			}
			out = append(out, modulePage{Lesson: l, Markdown: md})
		}
	}
	return out
}

func (a *App) exerciseMarkdown(e *course.Exercise) (string, error) {
	task, err := e.ReadFile(e.Task)
	if err != nil {
		return "", runnerErrorf("%s: %v", e.ID, err)
	}
	var b strings.Builder
	b.Write(task)
	b.WriteString("\n\n## Your files\n\n")
	if w, err := a.Workspace(false); err == nil {
		for _, f := range e.Files {
			fmt.Fprintf(&b, "- `%s`\n", w.FilePath(e, f))
		}
	} else {
		for _, f := range e.Files {
			fmt.Fprintf(&b, "- `%s` (run `mgpu-learn init` to get a workspace)\n", f)
		}
	}
	fmt.Fprintf(&b, "\nCheck with `mgpu-learn check %s`; `mgpu-learn hint %s` reveals one hint at a time (%d in all).\n", e.ID, e.ID, len(e.Hints))
	return b.String(), nil
}

func (a *App) rememberPage(moduleID string, page int) {
	w, err := a.Workspace(false)
	if err != nil {
		return
	}
	_ = w.UpdateProgress(func(p *workspace.Progress) error {
		if p.LessonPage == nil {
			p.LessonPage = map[string]int{}
		}
		p.LessonPage[moduleID] = page
		return nil
	})
}

// suggest lists the modules and exercises whose ids look like id, for an error message.
func suggest(c *course.Course, id string) string { return suggestIDs(c, id, true) }

// suggestExercise is suggest for a command that takes one exercise: no modules.
func suggestExercise(c *course.Course, id string) string { return suggestIDs(c, id, false) }

func suggestIDs(c *course.Course, id string, modules bool) string {
	var close []string
	low := strings.ToLower(id)
	add := func(s string) {
		if s != low { // never "did you mean" what was typed
			close = append(close, s)
		}
	}
	for _, m := range c.Modules {
		if modules && (strings.Contains(m.ID, low) || strings.Contains(low, m.ID)) {
			add(m.ID)
		}
		for _, e := range m.Exercises {
			name := e.ID[strings.Index(e.ID, "/")+1:]
			if strings.Contains(e.ID, low) || strings.Contains(low, name) {
				add(e.ID)
			}
		}
	}
	if len(close) == 0 {
		return " (see 'mgpu-learn list')"
	}
	if len(close) > 5 {
		close = close[:5]
	}
	return "; did you mean " + strings.Join(close, ", ") + "?"
}

func newInitCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "Create a workspace with every exercise's starter files",
		Long: `init creates a workspace (default ./` + defaultWorkspaceDir + `) laid out by module, with each
exercise's starter files and task. Files that already exist are never overwritten, so running
init again after a course update only adds what is new.`,
		Example: `  mgpu-learn init
  mgpu-learn init ~/gpu-course`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := app.Course()
			if err != nil {
				return err
			}
			dir, named := defaultWorkspaceDir, true
			switch {
			case len(args) == 1:
				dir = args[0]
			case app.WorkspaceDir != "":
				dir = app.WorkspaceDir
			default:
				named = false
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return runnerErrorf("init %s: %v", dir, err)
			}
			// A workspace inside another would hide the outer one from the commands run in
			// it: bring the enclosing workspace up to date instead.
			if w, err := workspace.Find(abs); err == nil && w.Root != abs {
				if named {
					fmt.Fprintf(app.Out, "%s is inside the workspace %s: updating that one instead of making a workspace in a workspace.\n", abs, w.Root)
				} else {
					fmt.Fprintf(app.Out, "You are in the workspace %s already: updating it with what is new in the course.\n", w.Root)
				}
				abs, dir = w.Root, w.Root
			}
			created, skipped, err := workspace.Init(abs, c)
			if err != nil {
				return runnerErrorf("init %s: %v", abs, err)
			}
			fmt.Fprintf(app.Out, "Workspace %s: %s created, %d already there (kept as they are).\n", abs, countOf(len(created), "file", "files"), len(skipped))
			if wd, err := os.Getwd(); err == nil && wd == abs {
				fmt.Fprintf(app.Out, "Next: mgpu-learn start   (or: mgpu-learn show %s)\n", firstModule(c))
			} else {
				fmt.Fprintf(app.Out, "Next: cd %s && mgpu-learn start   (or: mgpu-learn show %s)\n", dir, firstModule(c))
			}
			return nil
		},
	}
}

func firstModule(c *course.Course) string {
	if len(c.Modules) == 0 {
		return ""
	}
	return c.Modules[0].ID
}

func newHintCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:     "hint <exercise>",
		Short:   "Reveal the next hint of an exercise",
		Example: "  mgpu-learn hint module0/peer-copy",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := app.exercise(cmd.Name(), args[0])
			if err != nil {
				return err
			}
			if len(e.Hints) == 0 {
				fmt.Fprintf(app.Out, "%s has no hints. Re-read the task: mgpu-learn show %s\n", e.ID, e.ID)
				return nil
			}
			shown := 0
			if w, err := app.Workspace(false); err == nil {
				err = w.UpdateProgress(func(p *workspace.Progress) error {
					ep := exerciseProgress(p, e.ID)
					if ep.HintsShown < len(e.Hints) {
						ep.HintsShown++
					}
					shown = ep.HintsShown
					return nil
				})
				if err != nil {
					return runnerErrorf("saving progress: %v", err)
				}
			} else {
				shown = 1
				fmt.Fprintln(app.Err, "(no workspace: hints are not remembered)")
			}
			for i := 0; i < shown; i++ {
				fmt.Fprintf(app.Out, "Hint %d/%d: %s\n", i+1, len(e.Hints), strings.TrimSpace(e.Hints[i]))
			}
			if shown == len(e.Hints) {
				fmt.Fprintln(app.Out, "That was the last hint.")
			}
			return nil
		},
	}
}

func newSolutionCmd(app *App) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "solution <exercise>",
		Short: "Show the reference solution (after you passed, or with --force)",
		Example: `  mgpu-learn solution module0/peer-copy
  mgpu-learn solution module0/peer-copy --force   # before passing: spoils the exercise`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := app.exercise(cmd.Name(), args[0])
			if err != nil {
				return err
			}
			w, werr := app.Workspace(false)
			passed := false
			if werr == nil {
				p, _, _ := w.LoadProgress()
				// Correct code whose speed was never judged (no GPU here) unlocks it too.
				st := exerciseStatus(p, e.ID)
				passed = p != nil && (st == statusPassed || st == statusCorrect)
			}
			if !passed && !force {
				return stateErrorf("you haven't passed %s yet; the solution unlocks when you do (or use --force)", e.ID)
			}
			for _, f := range e.Files {
				b, err := fs.ReadFile(e.FS(), e.SolutionPath(f))
				if err != nil {
					return runnerErrorf("%s: %v", e.ID, err)
				}
				fmt.Fprintf(app.Out, "%s ===== %s (reference solution of %s) =====\n%s\n", commentMark(f), f, e.ID, b)
			}
			if werr == nil {
				_ = w.UpdateProgress(func(p *workspace.Progress) error {
					exerciseProgress(p, e.ID).SolutionViewed = true
					return nil
				})
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "show it even though you haven't passed yet")
	return cmd
}

// commentMark starts a line comment in the language of file name: "#" for Python, shell,
// Makefiles and CMake, "//" otherwise (C, C++, CUDA).
func commentMark(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".py", ".sh", ".cmake", ".mk", ".yaml", ".yml", ".toml":
		return "#"
	}
	if base := filepath.Base(name); base == "Makefile" || base == "CMakeLists.txt" {
		return "#"
	}
	return "//"
}

func newResetCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:     "reset <exercise>",
		Short:   "Restore an exercise's starter files (your files are backed up first)",
		Example: "  mgpu-learn reset module3/ring-allreduce",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := app.exercise(cmd.Name(), args[0])
			if err != nil {
				return err
			}
			w, err := app.Workspace(false)
			if err != nil {
				return err
			}
			backups, err := w.Reset(e)
			if err != nil {
				return runnerErrorf("reset %s: %v", e.ID, err)
			}
			for _, b := range backups {
				fmt.Fprintf(app.Out, "Your previous file was saved as %s\n", b)
			}
			fmt.Fprintf(app.Out, "%s is back to its starter files.\n", e.ID)
			return nil
		},
	}
}

func newProgressCmd(app *App) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "progress",
		Short:   "Show what you passed, your attempts and your best timings",
		Example: "  mgpu-learn progress\n  mgpu-learn progress --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := app.Course()
			if err != nil {
				return err
			}
			w, err := app.Workspace(false)
			if err != nil {
				return err
			}
			p, warnings, err := w.LoadProgress()
			for _, wmsg := range warnings {
				fmt.Fprintln(app.Err, "warning:", wmsg)
			}
			if err != nil {
				return runnerErrorf("reading progress: %v", err)
			}
			rep := progressReport{Schema: 1}
			for _, m := range c.Modules {
				pm := progressModule{ID: m.ID, Title: m.Title, Total: len(m.Exercises)}
				for _, e := range m.Exercises {
					pe := progressExercise{ID: e.ID, Status: exerciseStatus(p, e.ID)}
					if ep := p.Exercises[e.ID]; ep != nil {
						pe.Attempts = len(ep.Attempts)
						pe.Best = ep.Best
						if n := len(ep.Attempts); n > 0 {
							t := ep.Attempts[n-1].Time
							pe.LastAttempt = &t
						}
					}
					if pe.Status == statusPassed {
						pm.Passed++
					}
					pm.Exercises = append(pm.Exercises, pe)
				}
				rep.Modules = append(rep.Modules, pm)
			}
			if asJSON {
				return writeJSON(app.Out, rep)
			}
			writeProgress(app.Out, rep, app.width())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

type progressReport struct {
	Schema  int              `json:"schema"`
	Modules []progressModule `json:"modules"`
}

type progressModule struct {
	ID        string             `json:"id"`
	Title     string             `json:"title"`
	Passed    int                `json:"passed"`
	Total     int                `json:"total"`
	Exercises []progressExercise `json:"exercises"`
}

type progressExercise struct {
	ID          string             `json:"id"`
	Status      string             `json:"status"`
	Attempts    int                `json:"attempts"`
	LastAttempt *time.Time         `json:"last_attempt,omitempty"`
	Best        map[string]float64 `json:"best,omitempty"`
}

// writeProgress prints per module a heading (id, title, how many passed) and a row per
// exercise (id, status, attempts, best figures), exercise rows aligned across modules. Lines
// are cut to width columns (a module's title gives way first); 0 leaves them whole.
func writeProgress(w io.Writer, r progressReport, width int) {
	var idW, statusW, attemptsW int
	attempts := func(e progressExercise) string { return countOf(e.Attempts, "attempt", "attempts") }
	for _, m := range r.Modules {
		for _, e := range m.Exercises {
			idW = max(idW, len(e.ID))
			statusW = max(statusW, len(e.Status))
			attemptsW = max(attemptsW, len(attempts(e)))
		}
	}
	cut := func(s string) string {
		if width > 0 {
			return cutLine(s, width)
		}
		return s
	}
	for _, m := range r.Modules {
		count := fmt.Sprintf("  (%d/%d passed)", m.Passed, m.Total)
		title := m.Title
		if width > 0 {
			if room := width - ansi.StringWidth(m.ID+"  "+count); room < ansi.StringWidth(title) {
				title = cutLine(title, max(room, 1))
			}
		}
		fmt.Fprintln(w, cut(m.ID+"  "+title+count))
		for _, e := range m.Exercises {
			keys := make([]string, 0, len(e.Best))
			for k := range e.Best {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var best []string
			for _, k := range keys {
				best = append(best, fmt.Sprintf("%s %.3g", k, e.Best[k]))
			}
			row := fmt.Sprintf("  %-*s  %-*s  %-*s  %s", idW, e.ID, statusW, e.Status, attemptsW, attempts(e), strings.Join(best, "  "))
			fmt.Fprintln(w, cut(strings.TrimRight(row, " ")))
		}
	}
}

func newVersionCmd(app *App) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of mgpu-learn and its course",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(app.Out, "mgpu-learn %s\n", Version)
			if c, err := app.Course(); err == nil {
				n := 0
				for _, m := range c.Modules {
					n += len(m.Exercises)
				}
				src := "built in"
				if app.CourseDir != "" {
					src = app.CourseDir
				}
				fmt.Fprintf(app.Out, "course: %s (%d modules, %d exercises; %s)\n", c.Title, len(c.Modules), n, src)
			}
			return nil
		},
	}
}

// exercise loads the course and resolves exactly one exercise for the command named cmd.
func (a *App) exercise(cmd, id string) (*course.Exercise, error) {
	c, err := a.Course()
	if err != nil {
		return nil, err
	}
	return oneExercise(c, cmd, id)
}

// oneExercise resolves exactly one exercise for the command named cmd: its id
// ("module0/peer-copy"), or any one-exercise form Resolve takes ("peer-copy"). A module, a
// lesson or "all" is told apart from a typo.
func oneExercise(c *course.Course, cmd, id string) (*course.Exercise, error) {
	if e := c.Exercise(id); e != nil {
		return e, nil
	}
	a := strings.Trim(strings.TrimSpace(id), "/")
	if m := c.Module(a); m != nil {
		example := ""
		if len(m.Exercises) > 0 {
			example = ", e.g. " + m.Exercises[0].ID
		}
		return nil, usageErrorf("%s is a module; %s takes one exercise%s ('mgpu-learn list' shows them all)", a, cmd, example)
	}
	if a == "all" {
		return nil, usageErrorf("%s takes one exercise, not all of them ('mgpu-learn list' shows them)", cmd)
	}
	if l := c.Lesson(a); l != nil {
		return nil, usageErrorf("%s is a lesson; %s takes an exercise ('mgpu-learn list' shows them)", a, cmd)
	}
	if es, err := c.Resolve(a); err == nil && len(es) == 1 {
		return es[0], nil
	}
	return nil, usageErrorf("no exercise %q%s", id, suggestExercise(c, id))
}

func (a *App) progressOrEmpty() *workspace.Progress {
	w, err := a.Workspace(false)
	if err != nil {
		return &workspace.Progress{}
	}
	p, warnings, err := w.LoadProgress()
	for _, m := range warnings {
		fmt.Fprintln(a.Err, "warning:", m)
	}
	if err != nil || p == nil {
		return &workspace.Progress{}
	}
	return p
}

func exerciseStatus(p *workspace.Progress, id string) string {
	if p == nil || p.Exercises == nil || p.Exercises[id] == nil {
		return statusNotStarted
	}
	switch p.Exercises[id].Status {
	case "passed":
		return statusPassed
	case "correct":
		return statusCorrect
	case "attempted":
		return statusAttempted
	}
	return statusNotStarted
}

func exerciseProgress(p *workspace.Progress, id string) *workspace.ExerciseProgress {
	if p.Exercises == nil {
		p.Exercises = map[string]*workspace.ExerciseProgress{}
	}
	ep := p.Exercises[id]
	if ep == nil {
		ep = &workspace.ExerciseProgress{Status: "not_started"}
		p.Exercises[id] = ep
	}
	return ep
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// mdLiteral makes text literal in Markdown: its emphasis and code characters escaped.
func mdLiteral(text string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "\\`").Replace(text)
}
