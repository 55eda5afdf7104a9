package cli

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
)

// slurmOptions are the flags of check --slurm (docs/slurm.md).
type slurmOptions struct {
	Enabled   bool
	Partition string
	Time      string
	GPUs      int // -1: the most any selected exercise requires
}

// slurmFlagNames are the flags that belong to --slurm; they are not passed on to the check
// that runs in the job.
var slurmFlagNames = []string{"slurm", "partition", "time", "gpus"}

// addSlurmFlags adds --slurm and its options to a check command.
func addSlurmFlags(cmd *cobra.Command, o *slurmOptions) {
	f := cmd.Flags()
	f.BoolVar(&o.Enabled, "slurm", false, "run the check as a Slurm job (srun) with GPUs of its own, from outside an allocation (docs/slurm.md)")
	f.StringVar(&o.Partition, "partition", "", "with --slurm: the Slurm `PARTITION` to run in (default: the cluster's)")
	f.StringVar(&o.Time, "time", "", "with --slurm: the job's time limit `T` in Slurm's words (30, 10:00, 1:00:00)")
	f.IntVar(&o.GPUs, "gpus", -1, "with --slurm: `N` GPUs for the job (default: the most the selected exercises require)")
}

// slurmMark is the first line the job prints on its node: the check has started there. A job
// that ends without it never ran (srun refused it, or it was cancelled while queued).
const slurmMark = "mgpu-learn check --slurm: running on "

// srunEcho is srun's word on the check's exit code (a failed check exits 1): the report above
// it and the exit code already say it.
var srunEcho = regexp.MustCompile(`^srun: (error: \S+: task 0: Exited with exit code [1-5]|launch/slurm: _step_signal: Terminating StepId=\S+)$`)

// slurmRemote runs as the job's task: it checks that the node sees the workspace and the
// mgpu-learn binary (a shared filesystem), says where it runs, and becomes the check.
// $0 is the working directory, "$@" the command.
const slurmRemote = `cd "$0" 2>/dev/null || { echo "mgpu-learn check --slurm: node $(hostname) cannot see $0: the workspace must be on a filesystem that the compute nodes share (home or project space, not /tmp)" >&2; exit 3; }; [ -x "$1" ] || { echo "mgpu-learn check --slurm: node $(hostname) cannot run $1: mgpu-learn itself must be on a filesystem that the compute nodes share" >&2; exit 3; }; echo "` + slurmMark + `$(hostname), Slurm job $SLURM_JOB_ID" >&2; exec "$@"`

// checkViaSlurm runs `mgpu-learn check` with the same arguments as a Slurm job when --slurm is
// given: srun asks for one node, one task and the GPUs the exercises need, the job's output
// streams here, and its exit code is the command's. Ctrl-C cancels the job, queued or running.
// handled is false when --slurm is not set and the check runs here as usual.
func (a *App) checkViaSlurm(ctx context.Context, cmd *cobra.Command, args []string, o slurmOptions) (handled bool, err error) {
	if !o.Enabled {
		for _, name := range slurmFlagNames[1:] {
			if cmd.Flags().Changed(name) {
				return true, usageErrorf("--%s goes with --slurm", name)
			}
		}
		return false, nil
	}
	if j := launch.SlurmFromEnv(os.Environ()); j != nil {
		return true, stateErrorf("--slurm starts a Slurm job of its own, but this shell is already inside job %s: run 'mgpu-learn check' without --slurm, which starts the ranks as a step of this job", j.JobID)
	}
	srun, err := exec.LookPath("srun")
	if err != nil {
		return true, &exitError{code: ExitUnsupported, err: errors.New("--slurm: srun is not on PATH: run mgpu-learn on a machine of the Slurm cluster (a login node), see docs/slurm.md")}
	}
	gpus := o.GPUs
	if gpus < 0 {
		if gpus, err = a.requiredGPUs(args); err != nil {
			return true, err
		}
	}
	cwd, err := os.Getwd()
	if err != nil {
		return true, runnerErrorf("--slurm: %v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return true, runnerErrorf("--slurm: cannot find the mgpu-learn program: %v", err)
	}
	if p, err := filepath.EvalSymlinks(exe); err == nil {
		exe = p
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	name := "mgpu-learn-check-" + randomHex(4)
	argv := slurmArgv(o, gpus, name, cwd, append([]string{exe, cmd.Name()}, passedFlags(cmd, args)...))
	return true, a.runSrun(ctx, srun, argv, name)
}

// slurmArgv is srun's command line for the job.
func slurmArgv(o slurmOptions, gpus int, name, cwd string, command []string) []string {
	argv := []string{
		"--job-name=" + name,
		"--nodes=1", "--ntasks=1",
		// The check's ranks run as steps inside this job (the srun launcher): at least two
		// CPUs, one per GPU beyond that.
		"--cpus-per-task=" + strconv.Itoa(max(2, gpus)),
		"--chdir=" + cwd,
		"--export=ALL",
		"--kill-on-bad-exit=1",
	}
	if gpus > 0 {
		argv = append(argv, "--gpus="+strconv.Itoa(gpus))
	}
	if o.Partition != "" {
		argv = append(argv, "--partition="+o.Partition)
	}
	if o.Time != "" {
		argv = append(argv, "--time="+o.Time)
	}
	argv = append(argv, "/bin/sh", "-c", slurmRemote, cwd)
	return append(argv, command...)
}

// passedFlags rebuilds the command line of the check minus --slurm and its options: the flags
// set on it and on the root (--course, --workspace, --no-color), then the arguments.
func passedFlags(cmd *cobra.Command, args []string) []string {
	var out []string
	skip := map[string]bool{}
	for _, n := range slurmFlagNames {
		skip[n] = true
	}
	add := func(f *pflag.Flag) {
		if skip[f.Name] || !f.Changed {
			return
		}
		skip[f.Name] = true
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return append(append(out, "--"), args...)
}

// requiredGPUs is the most GPUs any exercise selected by args requires.
func (a *App) requiredGPUs(args []string) (int, error) {
	if len(args) == 0 {
		return 0, nil
	}
	c, err := a.Course()
	if err != nil {
		return 0, err
	}
	exs, err := c.Resolve(args[0])
	if err != nil {
		return 0, usageErrorf("%v", err)
	}
	n := 0
	for _, e := range exs {
		n = max(n, e.Requires.GPUs)
	}
	return n, nil
}

// runSrun runs srun with argv, its output going to ours. Ctrl-C (ctx) ends srun with SIGTERM,
// which cancels the job, and asks scancel to cancel the job by its name in case it was still
// queued; srun is killed if it lingers.
func (a *App) runSrun(ctx context.Context, srun string, argv []string, name string) error {
	fmt.Fprintf(a.Err, "Running the check as Slurm job %s: srun %s ... (Ctrl-C cancels it)\n", name, strings.Join(argv[:slurmFlagsShown(argv)], " "))
	c := exec.Command(srun, argv...)
	c.Stdout = a.Out
	// srun in a process group of its own: a Ctrl-C at the terminal reaches us only, and we end
	// the job (srun alone would only print its status on one SIGINT).
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pr, pw := io.Pipe()
	c.Stderr = pw
	var started bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, slurmMark) {
				started = true
			}
			if started && srunEcho.MatchString(line) {
				continue // the check's own exit code, which is ours too
			}
			fmt.Fprintln(a.Err, line)
		}
		io.Copy(io.Discard, pr)
	}()
	if err := c.Start(); err != nil {
		pw.Close()
		wg.Wait()
		return runnerErrorf("--slurm: starting srun: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var werr error
	canceled := false
	select {
	case werr = <-done:
	case <-ctx.Done():
		canceled = true
		_ = c.Process.Signal(syscall.SIGTERM)
		scancelByName(name)
		select {
		case werr = <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			werr = <-done
		}
		scancelByName(name)
	}
	pw.Close()
	wg.Wait()
	if canceled {
		fmt.Fprintf(a.Err, "Interrupted: Slurm job %s was cancelled.\n", name)
		return silentExit(ExitRunner)
	}
	code := 0
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		code = ee.ExitCode()
		if code < 0 {
			code = ExitRunner
		}
	default:
		return runnerErrorf("--slurm: srun: %v", werr)
	}
	if !started {
		if code == ExitUnsupported {
			return silentExit(ExitUnsupported) // the node cannot see the workspace: said above
		}
		return runnerErrorf("--slurm: srun ended (exit status %d) before the check started on a node; its messages are above", code)
	}
	if code > ExitInconclusive {
		// The check itself was killed (time limit, node failure): not a verdict.
		fmt.Fprintf(a.Err, "The Slurm job ended with status %d: the check did not finish (time limit, or the job was killed).\n", code)
		return silentExit(ExitRunner)
	}
	return silentExit(code)
}

// slurmFlagsShown is how many of argv's leading words are srun's own options (shown to the
// user; the remote script and the command are left out).
func slurmFlagsShown(argv []string) int {
	for i, w := range argv {
		if w == "/bin/sh" {
			return i
		}
	}
	return len(argv)
}

// scancelByName cancels this user's jobs with the given (unique) name, bounded.
func scancelByName(name string) {
	bin, err := exec.LookPath("scancel")
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := []string{"--name=" + name}
	if u := os.Getenv("USER"); u != "" {
		args = append(args, "--user="+u)
	}
	_ = exec.CommandContext(ctx, bin, args...).Run()
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return strconv.FormatInt(time.Now().UnixNano(), 16)
	}
	return hex.EncodeToString(b)
}
