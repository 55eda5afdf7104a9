package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mgpu-learn/mgpu-learn/checker"
	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/internal/workshop/api"
	"github.com/mgpu-learn/mgpu-learn/internal/workshop/client"
	"github.com/mgpu-learn/mgpu-learn/internal/workspace"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// Environment of the workshop commands.
const (
	envWorkshopToken = "MGPU_WORKSHOP_TOKEN" // the instructor's token, for 'workshop status'
	envWorkshopURL   = "MGPU_WORKSHOP_URL"   // the class server, for 'workshop status'
	// envWorkshopSend=manual: checks queue their reports and start no background sender;
	// 'workshop flush' sends them (clusters that frown on detached processes, tests).
	envWorkshopSend = "MGPU_WORKSHOP_SEND"
)

// senderLinger is how long a background sender keeps retrying an unreachable server.
const senderLinger = 20 * time.Minute

// workshopHTTP makes the HTTP client of the workshop commands (tests replace it).
var workshopHTTP = client.DefaultHTTP

// startSender starts the detached background sender of the workspace's queue: this very
// program, 'workshop flush --background', in its own session (tests replace it).
var startSender = func(ws *workspace.Workspace, c *client.Client) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"mgpu-learn", "--workspace", ws.Root, "workshop", "flush", "--background"}
	return client.StartDetached(exe, args, ws.Root, c.Dir()+"/"+client.LogName)
}

// newWorkshopCmd groups the workshop commands: the class server's (serve, class) and the
// learner's (join, status, flush, leave).
func newWorkshopCmd(app *App) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workshop",
		Short: "Instructor-led workshops: a class server and its learners",
		Long: `In an instructor-led workshop, each learner joins the class once per workspace:

  mgpu-learn workshop join https://class.example.org:8443 ABCD-EFGH --name "Ada"

From then on every 'mgpu-learn check' of your own files also sends its report to the class:
the verdict, the stage and the figures, the attempt number and a summary of the machine
(GPU count and model, driver, CUDA, Slurm). Your code is sent only with 'check --share-code',
for that one check. Reports wait in the workspace when the server cannot be reached and are
sent later; a check never waits for the server. See docs/workshop.md.`,
	}
	cmd.AddCommand(newWorkshopServeCmd(app), newWorkshopClassCmd(app),
		newWorkshopJoinCmd(app), newWorkshopStatusCmd(app), newWorkshopFlushCmd(app), newWorkshopLeaveCmd(app))
	return cmd
}

// workshopClient is the workspace's class client.
func workshopClient(ws *workspace.Workspace) *client.Client {
	c := client.New(ws.StatePath("workshop"))
	c.HTTP = workshopHTTP()
	c.UserAgent = "mgpu-learn/" + Version
	return c
}

func newWorkshopJoinCmd(app *App) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:     "join URL CODE",
		Short:   "Join a class: every check of your files then reports to the instructor",
		Example: `  mgpu-learn workshop join https://gpu-class.example.org:8443 K7QM-2XPA --name "Ada Lovelace"`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := client.NormalizeURL(args[0]); err != nil {
				return usageErrorf("the class server's address: %v", err)
			}
			ws, err := app.Workspace(true)
			if err != nil {
				return err
			}
			if name == "" {
				name = defaultLearnerName()
			}
			if name == "" {
				return usageErrorf("say how the instructor sees you with --name NAME")
			}
			c := workshopClient(ws)
			if cfg, err := c.Config(); err == nil {
				return stateErrorf("this workspace is already in class %q at %s: run 'mgpu-learn workshop leave' first", cfg.Class, cfg.URL)
			} else if !errors.Is(err, client.ErrNotJoined) {
				fmt.Fprintf(app.Err, "warning: %v; joining replaces it\n", err)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), client.RequestTimeout+5*time.Second)
			defer cancel()
			cfg, err := c.Join(ctx, args[0], args[1], name)
			if err != nil {
				return joinError(args[0], err)
			}
			fmt.Fprintf(app.Out, "Joined class %q at %s as %q.\n", cfg.Class, cfg.URL, cfg.Name)
			fmt.Fprintln(app.Out, `From now on every 'mgpu-learn check' of your files sends its report to the class:
verdict, stage, figures, attempt number and a machine summary, not your code. Add
--share-code to a check to send your files with that one report.
'mgpu-learn workshop status' shows what was sent; 'mgpu-learn workshop leave' stops it.`)
			if strings.HasPrefix(cfg.URL, "http://") {
				fmt.Fprintf(app.Err, "note: %s is not https: your reports and your class token travel unencrypted.\n", cfg.URL)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "how the instructor sees you (default: your user name)")
	return cmd
}

// joinError says why joining the class server at rawURL failed, and whose move it is: a server
// out of reach (exit 3: the address, or this machine's network), a refusal (exit 2: a wrong
// join code, say), or a server in trouble (exit 4).
func joinError(rawURL string, err error) error {
	if u, nerr := client.NormalizeURL(rawURL); nerr == nil {
		rawURL = u
	}
	var se *client.StatusError
	var ue *neturl.Error
	switch {
	case errors.As(err, &se) && se.Permanent():
		return stateErrorf("the class server at %s refused to let you join: %v", rawURL, err)
	case errors.As(err, &se):
		return completeErrorf(ExitRunner, "the class server at %s could not take you in (%v): try again in a minute, and tell your instructor if it goes on", rawURL, err)
	case errors.As(err, &ue):
		return completeErrorf(ExitUnsupported, "can't reach the class server at %s (%v): check the address with your instructor, and that this machine can reach it (a VPN or a firewall may be in the way)", rawURL, ue.Err)
	}
	return runnerErrorf("joining: %v", err)
}

// defaultLearnerName is the login name, the only name this machine knows.
func defaultLearnerName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

func newWorkshopStatusCmd(app *App) *cobra.Command {
	var url, token string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "What was sent to the class (learners), or the class's progress (instructors, with a token)",
		Long: `For a learner: the class this workspace joined, the reports queued, rejected and sent,
and what the class server holds of yours.

For an instructor (with --token or MGPU_WORKSHOP_TOKEN, and --url or MGPU_WORKSHOP_URL):
the class as a grid of learners and exercises, and the learners who seem stuck.`,
		Example: `  mgpu-learn workshop status
  MGPU_WORKSHOP_TOKEN=... mgpu-learn workshop status --url https://gpu-class.example.org:8443`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if token == "" {
				token = os.Getenv(envWorkshopToken)
			}
			if token != "" {
				return app.classStatus(cmd.Context(), url, token, asJSON)
			}
			if url != "" {
				return usageErrorf("--url needs the instructor's token (--token or %s); a learner's status needs neither", envWorkshopToken)
			}
			return app.learnerStatus(cmd.Context(), asJSON)
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the class server, for the instructor's view (also "+envWorkshopURL+")")
	cmd.Flags().StringVar(&token, "token", "", "the instructor's `TOKEN` (better: "+envWorkshopToken+", which other users cannot see)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// classStatus prints the instructor's view.
func (a *App) classStatus(ctx context.Context, url, token string, asJSON bool) error {
	if url == "" {
		url = os.Getenv(envWorkshopURL)
	}
	if url == "" {
		// An instructor who also joined from this workspace: the same server.
		if ws, err := a.Workspace(false); err == nil {
			if cfg, err := workshopClient(ws).Config(); err == nil {
				url = cfg.URL
			}
		}
	}
	if url == "" {
		return usageErrorf("which class server? pass --url URL (or set %s)", envWorkshopURL)
	}
	ctx, cancel := context.WithTimeout(ctx, client.RequestTimeout+5*time.Second)
	defer cancel()
	cs, err := client.ClassStatus(ctx, workshopHTTP(), "mgpu-learn/"+Version, url, token)
	if err != nil {
		var se *client.StatusError
		if errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden) {
			return stateErrorf("the class server refused the instructor token: %v", err)
		}
		var ue *neturl.Error
		if errors.As(err, &ue) {
			return completeErrorf(ExitUnsupported, "can't reach the class server at %s (%v): check the address (--url or %s), and that this machine can reach it", url, ue.Err, envWorkshopURL)
		}
		return &exitError{code: ExitRunner, err: fmt.Errorf("asking %s for the class: %v", url, err)}
	}
	if asJSON {
		return writeJSONOut(a.Out, cs)
	}
	width := a.columns()
	if width <= 0 || width > 120 {
		width = 120
	}
	client.WriteClass(a.Out, cs, width, time.Now())
	return nil
}

// learnerStatus prints the learner's view.
func (a *App) learnerStatus(ctx context.Context, asJSON bool) error {
	ws, err := a.Workspace(false)
	if err != nil {
		return err
	}
	c := workshopClient(ws)
	cfg, err := c.Config()
	if err != nil {
		return a.workshopUsage(err.Error())
	}
	local, err := c.Local()
	if err != nil {
		return runnerErrorf("reading the report queue in %s: %v", c.Dir(), err)
	}
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	me, meErr := c.Me(mctx)
	if asJSON {
		out := struct {
			URL      string            `json:"url"`
			Class    string            `json:"class"`
			Name     string            `json:"name"`
			Joined   time.Time         `json:"joined"`
			Queued   []client.Item     `json:"queued"`
			Rejected []client.Rejected `json:"rejected"`
			Sent     []client.Sent     `json:"sent"`
			Retry    *client.Retry     `json:"retry,omitempty"`
			Warnings []string          `json:"warnings,omitempty"`
			Server   *api.MeResponse   `json:"server,omitempty"`
			Error    string            `json:"server_error,omitempty"`
		}{URL: cfg.URL, Class: cfg.Class, Name: cfg.Name, Joined: cfg.Joined, Queued: local.Queued,
			Rejected: local.Rejected, Sent: local.Sent, Warnings: local.Warnings, Server: me}
		if local.Retry.LastError != "" {
			out.Retry = &local.Retry
		}
		if meErr != nil {
			out.Error = meErr.Error()
		}
		return writeJSONOut(a.Out, out)
	}
	client.WriteLearner(a.Out, cfg, local, me, meErr, time.Now())
	return nil
}

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return runnerErrorf("writing JSON: %v", err)
	}
	return nil
}

func newWorkshopFlushCmd(app *App) *cobra.Command {
	var background bool
	cmd := &cobra.Command{
		Use:   "flush",
		Short: "Send the queued reports to the class now, and show what went wrong",
		Long: `flush sends the reports that wait in the workspace (the class server was unreachable, say)
and prints the error of any that could not be sent. Checks start a sender in the background
on their own; this is for doing it by hand.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := app.Workspace(false)
			if err != nil {
				return err
			}
			c := workshopClient(ws)
			if background {
				ctx, stop := context.WithTimeout(cmd.Context(), senderLinger+2*time.Minute)
				defer stop()
				if err := c.Background(ctx, app.Err, senderLinger); err != nil {
					return runnerErrorf("%v", err)
				}
				return nil
			}
			return app.flushNow(cmd.Context(), c)
		},
	}
	cmd.Flags().BoolVar(&background, "background", false, "run as the detached sender that checks start")
	_ = cmd.Flags().MarkHidden("background")
	return cmd
}

// flushNow sends the queue in the foreground and says what happened.
func (a *App) flushNow(ctx context.Context, c *client.Client) error {
	cfg, err := c.Config()
	if err != nil {
		return a.workshopUsage(err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	res, err := c.Flush(ctx, client.FlushOptions{Force: true, LockWait: 2 * time.Minute})
	if err != nil {
		return runnerErrorf("%v", err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(a.Err, "warning: %s\n", w)
	}
	if res.Busy {
		return runnerErrorf("another mgpu-learn has been sending this workspace's reports for over 2 minutes; try again later")
	}
	switch {
	case res.Sent+res.Duplicates+len(res.Rejected) == 0 && res.Err == nil:
		fmt.Fprintf(a.Out, "Nothing to send: no report is queued for class %q.\n", cfg.Class)
	case res.Sent+res.Duplicates > 0:
		fmt.Fprintf(a.Out, "Sent %d report(s) to class %q", res.Sent+res.Duplicates, cfg.Class)
		if res.Duplicates > 0 {
			fmt.Fprintf(a.Out, " (%d the server had already)", res.Duplicates)
		}
		fmt.Fprintln(a.Out, ".")
	}
	for _, r := range res.Rejected {
		fmt.Fprintf(a.Out, "Rejected by the server: %s attempt %d: %s\n  kept in %s\n", r.Submission.Exercise, r.Submission.Attempt, r.Reason, r.File)
	}
	if res.Err != nil {
		// Not a fault of mgpu-learn: say what happened rather than Main's runner line.
		fmt.Fprintf(a.Err, "%d report(s) stay queued: %v\nThey are sent later, by the next check or 'mgpu-learn workshop flush'.\n", res.Left, res.Err)
		return silentExit(ExitRunner)
	}
	return nil
}

func newWorkshopLeaveCmd(app *App) *cobra.Command {
	var discard bool
	cmd := &cobra.Command{
		Use:   "leave",
		Short: "Stop reporting to the class and forget it (queued reports are sent first)",
		Long: `leave forgets the class this workspace joined: its address, your token, and the report
queue. Reports still queued are sent first; when the server cannot be reached, leave stops
and says so, unless --discard says to drop them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := app.Workspace(false)
			if err != nil {
				return err
			}
			c := workshopClient(ws)
			cfg, cerr := c.Config()
			if errors.Is(cerr, client.ErrNotJoined) && c.Pending() == 0 {
				fmt.Fprintln(app.Out, "This workspace is in no class.")
				return c.Forget(cmd.Context(), 30*time.Second)
			}
			if n := c.Pending(); n > 0 && !discard {
				if cerr != nil {
					return app.workshopUsage(fmt.Sprintf("%v\n%d report(s) are queued and cannot be sent; 'mgpu-learn workshop leave --discard' drops them.", cerr, n))
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
				res, err := c.Flush(ctx, client.FlushOptions{Force: true, LockWait: 30 * time.Second})
				cancel()
				if err != nil {
					return runnerErrorf("%v", err)
				}
				if left := c.Pending(); left > 0 {
					why := "another mgpu-learn is sending them"
					if res.Err != nil {
						why = res.Err.Error()
					}
					return app.workshopUsage(fmt.Sprintf("%d report(s) for class %q are not sent yet (%s).\nRun 'mgpu-learn workshop flush' when the server can be reached, or 'mgpu-learn workshop leave --discard' to drop them.", left, cfg.Class, why))
				}
			}
			dropped := c.Pending()
			if err := c.Forget(cmd.Context(), 30*time.Second); err != nil {
				return runnerErrorf("forgetting the class: %v", err)
			}
			if cfg != nil {
				fmt.Fprintf(app.Out, "Left class %q: checks no longer report to %s.\n", cfg.Class, cfg.URL)
			} else {
				fmt.Fprintln(app.Out, "Forgot the class.")
			}
			if dropped > 0 {
				fmt.Fprintf(app.Out, "Dropped %d queued report(s) that were never sent.\n", dropped)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&discard, "discard", false, "drop queued reports that cannot be sent")
	return cmd
}

// workshopUsage ends a workshop command with exit code 2 and msg, without Main's pointer to
// --help (the message says what to run).
func (a *App) workshopUsage(msg string) error {
	fmt.Fprintf(a.Err, "mgpu-learn: %s\n", msg)
	return silentExit(ExitUsage)
}

// postToClass queues a check of the learner's files for the class this workspace joined, and
// starts the background sender. It never touches the network and never fails the check:
// problems are warnings. No class joined: it does nothing.
func (a *App) postToClass(ws *workspace.Workspace, e *course.Exercise, r *checker.Report, o checkOptions) {
	a.queueForClass(ws, e, r, a.facts, o.ShareCode, a.Err)
}

// queueForClass is postToClass for any caller (the terminal UI passes its facts and no
// writer: it must not print over the screen).
func (a *App) queueForClass(ws *workspace.Workspace, e *course.Exercise, r *checker.Report, facts *probe.Facts, shareCode bool, msgs io.Writer) {
	if msgs == nil {
		msgs = io.Discard
	}
	if ws == nil || r == nil || (r.Target != "" && r.Target != workspace.TargetYours) {
		return
	}
	c := workshopClient(ws)
	cfg, err := c.Config()
	if errors.Is(err, client.ErrNotJoined) {
		if shareCode {
			fmt.Fprintln(msgs, "note: --share-code: this workspace has joined no class, so nothing was shared.")
		}
		return
	}
	if err != nil {
		fmt.Fprintf(msgs, "warning: %v; this check's report is not sent to the class.\n", err)
		return
	}
	sub := client.NewSubmission(r, attemptNumber(ws, e.ID), client.MachineOf(facts, os.Getenv), Version)
	if shareCode {
		var skipped []string
		sub.Code, skipped = client.ReadCode(ws.Files(e))
		for _, s := range skipped {
			fmt.Fprintf(msgs, "note: --share-code: not shared: %s\n", s)
		}
	}
	_, notes, err := c.Enqueue(sub)
	for _, n := range notes {
		fmt.Fprintf(msgs, "note: --share-code: %s\n", n)
	}
	if err != nil {
		fmt.Fprintf(msgs, "warning: this check's report could not be queued for class %q: %v\n", cfg.Class, err)
		return
	}
	what := "report"
	if len(sub.Code) > 0 {
		what = fmt.Sprintf("report and your code (%d file(s))", len(sub.Code))
	}
	if os.Getenv(envWorkshopSend) == "manual" {
		fmt.Fprintf(msgs, "Class %q: %s queued; 'mgpu-learn workshop flush' sends it (%s=manual).\n", cfg.Class, what, envWorkshopSend)
		return
	}
	if !c.SenderRunning() {
		if err := startSender(ws, c); err != nil {
			fmt.Fprintf(msgs, "warning: could not start sending in the background (%v); 'mgpu-learn workshop flush' sends the queue.\n", err)
			return
		}
	}
	fmt.Fprintf(msgs, "Class %q: %s queued, sent in the background.\n", cfg.Class, what)
	if rt, n := c.Retry(), c.Pending(); rt.LastError != "" && n > 1 {
		fmt.Fprintf(msgs, "  %d reports wait: the last try failed (%s); see 'mgpu-learn workshop status'.\n", n, rt.LastError)
	}
}

// attemptNumber is how many checks of the learner's files the workspace's progress holds for
// the exercise (the check just recorded included; progress keeps the newest
// workspace.MaxAttempts).
func attemptNumber(ws *workspace.Workspace, id string) int {
	p, _, err := ws.LoadProgress()
	if err != nil || p == nil {
		return 0
	}
	ep := p.Exercises[id]
	if ep == nil {
		return 0
	}
	n := 0
	for _, a := range ep.Attempts {
		if a.Target == workspace.TargetYours {
			n++
		}
	}
	return n
}
