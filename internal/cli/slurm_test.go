package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// fakeSlurm puts an srun and a scancel on PATH that record their arguments in dir/srun.args and
// dir/scancel.args. srun behaves as FAKE_SRUN says: "ok N" prints the job's start line and
// exits N, "refuse" exits 1 as srun does when it cannot allocate, "hang" prints the start line
// and waits until it is terminated (writing dir/srun.term).
func fakeSlurm(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	srun := `#!/bin/sh
printf '%s\n' "$@" >"` + dir + `/srun.args"
set -- $FAKE_SRUN
case "$1" in
ok) echo "` + slurmMark + `fake, Slurm job 1" >&2; echo "report on stdout"
  [ "$2" -ne 0 ] && echo "srun: error: fake: task 0: Exited with exit code $2" >&2
  exit "$2" ;;
refuse) echo "srun: error: Unable to allocate resources: Invalid partition name specified" >&2; exit 1 ;;
hang) trap 'echo term >"` + dir + `/srun.term"; exit 143' TERM; echo "` + slurmMark + `fake, Slurm job 1" >&2
  while :; do sleep 0.05; done ;;
esac
`
	scancel := `#!/bin/sh
printf '%s\n' "$@" >>"` + dir + `/scancel.args"
`
	for name, body := range map[string]string{"srun": srun, "scancel": scancel} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, k := range []string{"SLURM_JOB_ID", "SLURM_JOBID"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	return dir
}

// slurmCheck runs a stand-in for `mgpu-learn [root flags] check ARGS` whose RunE goes through
// checkViaSlurm, the way check.go wires it.
func slurmCheck(t *testing.T, ctx context.Context, args ...string) (code int, handled bool, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	app := &App{Out: &out, Err: &errb}
	root := &cobra.Command{Use: "mgpu-learn", SilenceErrors: true, SilenceUsage: true}
	root.PersistentFlags().StringVar(&app.CourseDir, "course", "", "")
	var so slurmOptions
	var solution bool
	check := &cobra.Command{
		Use:  "check",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := app.checkViaSlurm(ctx, cmd, args, so)
			handled = h
			return err
		},
	}
	check.Flags().BoolVar(&solution, "solution", false, "")
	addSlurmFlags(check, &so)
	root.AddCommand(check)
	root.SetArgs(append([]string{"check"}, args...))
	err := root.Execute()
	return exitCode(err), handled, out.String(), errb.String()
}

func fixtureDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs("../../testdata/fixture-course")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

func TestCheckSlurmArgvAndExitCode(t *testing.T) {
	dir := fakeSlurm(t)
	fixture := fixtureDir(t)
	t.Setenv("FAKE_SRUN", "ok 1")
	code, handled, stdout, stderr := slurmCheck(t, context.Background(),
		"--course", fixture, "module0/sum", "--solution", "--slurm", "--partition", "debug", "--time", "5:00")
	if !handled || code != ExitFailed {
		t.Fatalf("handled %v, exit %d (want the job's 1); stderr:\n%s", handled, code, stderr)
	}
	if !strings.Contains(stdout, "report on stdout") || !strings.Contains(stderr, slurmMark) {
		t.Errorf("the job's output did not come through: stdout %q stderr %q", stdout, stderr)
	}
	if strings.Contains(stderr, "Exited with exit code") {
		t.Errorf("srun's echo of the check's exit code is shown: %q", stderr)
	}
	argv := readLines(t, filepath.Join(dir, "srun.args"))
	joined := strings.Join(argv, " ")
	for _, want := range []string{"--nodes=1", "--ntasks=1", "--cpus-per-task=2", "--partition=debug", "--time=5:00",
		"--export=ALL", "--job-name=mgpu-learn-check-"} {
		if !strings.Contains(joined, want) {
			t.Errorf("srun argv lacks %q: %q", want, joined)
		}
	}
	if strings.Contains(joined, "--gpus") {
		t.Errorf("a CPU exercise asks for GPUs: %q", joined)
	}
	wd, _ := os.Getwd()
	exe, _ := os.Executable()
	exe, _ = filepath.EvalSymlinks(exe)
	// srun ... /bin/sh -c SCRIPT CWD EXE check <flags> -- <args>
	i := 0
	for i < len(argv) && argv[i] != "/bin/sh" {
		i++
	}
	if i+3 >= len(argv) || argv[i+3] != wd || argv[i+4] != exe || argv[i+5] != "check" {
		t.Fatalf("remote command: %q", argv[i:])
	}
	rest := strings.Join(argv[i+6:], " ")
	if rest != "--course="+fixture+" --solution=true -- module0/sum" {
		t.Errorf("the check's own arguments: %q", rest)
	}
	for _, gone := range []string{"--slurm", "--partition", "--time"} {
		if strings.Contains(rest, gone) {
			t.Errorf("%s passed on to the job: %q", gone, rest)
		}
	}

	// --gpus wins over the exercise's requirement; the job's exit code passes through.
	t.Setenv("FAKE_SRUN", "ok 0")
	code, _, _, _ = slurmCheck(t, context.Background(), "--course", fixture, "module0", "--slurm", "--gpus", "2")
	if code != ExitPassed {
		t.Errorf("exit %d", code)
	}
	if joined := strings.Join(readLines(t, filepath.Join(dir, "srun.args")), " "); !strings.Contains(joined, "--gpus=2") || !strings.Contains(joined, "--cpus-per-task=2") {
		t.Errorf("--gpus 2: %q", joined)
	}
}

func TestCheckSlurmRefusals(t *testing.T) {
	fakeSlurm(t)
	fixture := fixtureDir(t)
	t.Setenv("FAKE_SRUN", "refuse")
	code, _, _, stderr := slurmCheck(t, context.Background(), "--course", fixture, "module0/sum", "--slurm")
	if code != ExitRunner {
		t.Errorf("srun refused the job: exit %d, want %d; stderr %q", code, ExitRunner, stderr)
	}
	if !strings.Contains(stderr, "Invalid partition") {
		t.Errorf("srun's message lost: %q", stderr)
	}
	code, handled, _, _ := slurmCheck(t, context.Background(), "--course", fixture, "module0/sum", "--partition", "x")
	if !handled || code != ExitUsage {
		t.Errorf("--partition without --slurm: handled %v exit %d", handled, code)
	}
	code, handled, _, _ = slurmCheck(t, context.Background(), "--course", fixture, "module0/sum")
	if handled {
		t.Errorf("without --slurm the check must run here (handled, exit %d)", code)
	}
	t.Setenv("SLURM_JOB_ID", "12")
	code, _, _, _ = slurmCheck(t, context.Background(), "--course", fixture, "module0/sum", "--slurm")
	if code != ExitUsage {
		t.Errorf("--slurm inside an allocation: exit %d", code)
	}
}

func TestCheckSlurmCancel(t *testing.T) {
	dir := fakeSlurm(t)
	t.Setenv("FAKE_SRUN", "hang")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancel once the job says it started.
		for i := 0; i < 200; i++ {
			if _, err := os.Stat(filepath.Join(dir, "srun.args")); err == nil {
				time.Sleep(200 * time.Millisecond)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		cancel()
	}()
	start := time.Now()
	code, _, _, stderr := slurmCheck(t, ctx, "--course", fixtureDir(t), "module0/sum", "--slurm")
	if code != ExitRunner || !strings.Contains(stderr, "cancelled") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "srun.term")); err != nil {
		t.Error("srun was not sent SIGTERM")
	}
	args := strings.Join(readLines(t, filepath.Join(dir, "scancel.args")), " ")
	if !strings.Contains(args, "--name=mgpu-learn-check-") {
		t.Errorf("scancel: %q", args)
	}
}
