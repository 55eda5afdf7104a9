package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mgpu-learn/mgpu-learn/internal/workshop/server"
)

// The instructor's side of workshops: the class server and the classes in its database.
// docs/workshop.md is the run-book.

type serveOptions struct {
	DB            string
	Addr          string
	StuckAfter    time.Duration
	StuckAttempts int
	TLSCert       string
	TLSKey        string
}

func newWorkshopServeCmd(app *App) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve --db FILE [--addr ADDR]",
		Short: "Run the class server: learners' reports in, the live dashboard out",
		Long: `serve runs the class server on ADDR with its state in the SQLite file FILE (created
when missing). Learners join with the class's join code and their mgpu-learn posts every
check's report; the instructor opens the dashboard in a browser with the instructor token.
Create the class first with 'mgpu-learn workshop class create'. Ctrl-C stops the server
cleanly; nothing acknowledged is lost, even when the process is killed.`,
		Example: `  mgpu-learn workshop class create --db class.db "GPU day"
  mgpu-learn workshop serve --db class.db --addr :8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.serveWorkshop(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.DB, "db", "", "the class database `FILE` (SQLite)")
	f.StringVar(&o.Addr, "addr", ":8080", "listen on `ADDR` (host:port; \":8080\" is every interface)")
	f.DurationVar(&o.StuckAfter, "stuck-after", 20*time.Minute, "list a learner as stuck after this long on one exercise without a pass")
	f.IntVar(&o.StuckAttempts, "stuck-attempts", 6, "list a learner as stuck after this many failed attempts at one exercise")
	f.StringVar(&o.TLSCert, "tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM; with --tls-key)")
	f.StringVar(&o.TLSKey, "tls-key", "", "the certificate's private key `FILE` (PEM)")
	cmd.MarkFlagRequired("db")
	return cmd
}

func (a *App) serveWorkshop(cmd *cobra.Command, o serveOptions) error {
	if o.StuckAfter <= 0 || o.StuckAttempts <= 0 {
		return usageErrorf("--stuck-after and --stuck-attempts must be positive")
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return usageErrorf("--tls-cert and --tls-key go together")
	}
	cfg := server.Config{DB: o.DB, StuckAfter: o.StuckAfter, StuckAttempts: o.StuckAttempts}
	if c, err := a.Course(); err == nil { // the grid's columns follow the course where it knows them
		for _, e := range c.Exercises() {
			cfg.Exercises = append(cfg.Exercises, e.ID)
		}
	}
	s, err := server.Open(cfg)
	if err != nil {
		return usageErrorf("--db %v", err)
	}
	defer s.Close()

	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return usageErrorf("--addr %s: %v", o.Addr, err)
	}
	scheme := "http"
	if o.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(o.TLSCert, o.TLSKey)
		if err != nil {
			ln.Close()
			return usageErrorf("--tls-cert/--tls-key: %v", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	base := scheme + "://" + publicHostPort(ln.Addr())
	fmt.Fprintf(a.Out, "Class server on %s (database %s)\n", base+"/", o.DB)
	classes, err := s.Classes()
	if err != nil {
		return runnerErrorf("class database: %v", err)
	}
	if len(classes) == 0 {
		fmt.Fprintf(a.Out, "No class yet: create one with 'mgpu-learn workshop class create --db %s NAME' (the server sees it at once).\n", o.DB)
	}
	for _, c := range classes {
		fmt.Fprintf(a.Out, "  %s: learners join with  mgpu-learn workshop join %s %s\n", c.Name, base, c.JoinCode)
	}
	fmt.Fprintf(a.Out, "Dashboard: %s/ (log in with the instructor token). Ctrl-C stops the server.\n", base)

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Serve(ctx, ln); err != nil {
		return runnerErrorf("class server: %v", err)
	}
	fmt.Fprintln(a.Err, "Class server stopped.")
	return nil
}

// publicHostPort names a listening address the way others reach it: this machine's host name
// when it listens on every interface.
func publicHostPort(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "localhost"
		}
	}
	return net.JoinHostPort(host, port)
}

func newWorkshopClassCmd(app *App) *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "class",
		Short: "Create and list the classes of a class database",
		Long: `class manages the classes in the class server's database directly (safe while the
server runs). Each class has a join code for its learners and an instructor token for its
dashboard; the database keeps only the token's hash, so it is shown once, when made.`,
	}
	cmd.PersistentFlags().StringVar(&db, "db", "", "the class database `FILE` (SQLite)")
	cmd.MarkPersistentFlagRequired("db")

	open := func(mustExist bool) (*server.Server, error) {
		if mustExist {
			if _, err := os.Stat(db); err != nil {
				return nil, stateErrorf("--db %s: no such file (create a class first with 'mgpu-learn workshop class create --db %s NAME')", db, db)
			}
		}
		s, err := server.Open(server.Config{DB: db})
		if err != nil {
			return nil, usageErrorf("--db %v", err)
		}
		return s, nil
	}

	create := &cobra.Command{
		Use:     "create --db FILE NAME",
		Short:   "Create a class: prints its join code and, once, its instructor token",
		Example: `  mgpu-learn workshop class create --db class.db "GPU day, March"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open(false)
			if err != nil {
				return err
			}
			defer s.Close()
			c, err := s.CreateClass(args[0])
			if err != nil {
				if errors.Is(err, server.ErrClassName) {
					return stateErrorf("%v", err)
				}
				return runnerErrorf("creating the class: %v", err)
			}
			printClassSecret(app, db, c, "created")
			return nil
		},
	}
	list := &cobra.Command{
		Use:   "list --db FILE",
		Short: "List the classes with their join codes and counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open(true)
			if err != nil {
				return err
			}
			defer s.Close()
			classes, err := s.Classes()
			if err != nil {
				return runnerErrorf("class database: %v", err)
			}
			if len(classes) == 0 {
				fmt.Fprintf(app.Out, "No classes in %s.\n", db)
				return nil
			}
			tw := tabwriter.NewWriter(app.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "CLASS\tJOIN CODE\tLEARNERS\tREPORTS\tCREATED")
			for _, c := range classes {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", c.Name, c.JoinCode, c.Learners, c.Reports, c.Created.Local().Format("2006-01-02 15:04"))
			}
			return tw.Flush()
		},
	}
	token := &cobra.Command{
		Use:   "token --db FILE NAME",
		Short: "Give a class a new instructor token (the old one stops working)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := open(true)
			if err != nil {
				return err
			}
			defer s.Close()
			c, err := s.RotateToken(args[0])
			if errors.Is(err, server.ErrNoClass) {
				return usageErrorf("%v (see 'mgpu-learn workshop class list --db %s')", err, db)
			}
			if err != nil {
				return runnerErrorf("class database: %v", err)
			}
			printClassSecret(app, db, c, "has a new instructor token")
			return nil
		},
	}
	cmd.AddCommand(create, list, token)
	return cmd
}

func printClassSecret(app *App, db string, c server.ClassInfo, what string) {
	fmt.Fprintf(app.Out, "Class %q %s in %s.\n\n", c.Name, what, db)
	fmt.Fprintf(app.Out, "  Join code (hand it out):        %s\n", c.JoinCode)
	fmt.Fprintf(app.Out, "  Instructor token (keep secret): %s\n\n", c.InstructorToken)
	fmt.Fprintln(app.Out, "The token is shown only now: the database keeps its hash. It opens the dashboard,")
	fmt.Fprintln(app.Out, "the exports and 'mgpu-learn workshop status'; lose it and make a new one with")
	fmt.Fprintf(app.Out, "'mgpu-learn workshop class token --db %s NAME'.\n\n", db)
	fmt.Fprintf(app.Out, "Start the server:  mgpu-learn workshop serve --db %s --addr :8080\n", db)
	fmt.Fprintln(app.Out, "Dashboard:         http://SERVER:8080/ (paste the token into the login form)")
	fmt.Fprintf(app.Out, "Learners:          mgpu-learn workshop join http://SERVER:8080 %s\n", c.JoinCode)
}
