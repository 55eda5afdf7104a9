package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// rankEnd is what a launcher program said about one rank's failure.
type rankEnd struct {
	rank   int
	code   int            // exit code, when known (-1 otherwise)
	signal syscall.Signal // when it died of a signal
}

// failureParser reads the launcher's own lines and reports the first failed rank it names.
type failureParser interface {
	line(s string)
	first() (rankEnd, bool)
}

// mpiPlan builds the mpirun command line. Environment variables reach the ranks with -x
// (Open MPI) or -genv (MPICH); locally started ranks inherit mpirun's environment as well.
func mpiPlan(s *Spec, env *environ, names []string) (argv []string, tag func([]byte) (int, []byte, bool), rankVar string, fp failureParser, err error) {
	m := MPI{}
	if s.MPI != nil {
		m = *s.MPI
	}
	if m.Mpirun == "" {
		if m.Home != "" {
			m.Mpirun = filepath.Join(m.Home, "bin", "mpirun")
		} else if m.Mpirun, err = exec.LookPath("mpirun"); err != nil {
			return nil, nil, "", nil, fmt.Errorf("launch: mpirun: %w", err)
		}
	}
	if m.Dialect == "" {
		m.Dialect = mpiDialect(m.Mpirun)
	}
	if m.Home != "" {
		for _, lib := range []string{"lib64", "lib"} {
			if st, err := os.Stat(filepath.Join(m.Home, lib)); err == nil && st.IsDir() {
				env.prependPath("LD_LIBRARY_PATH", filepath.Join(m.Home, lib))
			}
		}
		env.prependPath("PATH", filepath.Join(m.Home, "bin"))
	}
	// The job must not look like part of another MPI job: a checker started from a shell
	// that mpirun or srun made inherits that job's identity, which would confuse this mpirun
	// and the ranks it starts.
	for _, k := range append([]string(nil), env.keys...) {
		if inheritedJobVar(k) {
			env.unset(k)
		}
	}
	if m.Dialect == "openmpi" {
		// An Open MPI installed in a prefix of its own (a CUDA-aware build unpacked in
		// /tmp/ompi-cuda, $MGPU_CUDA_MPI_HOME, a cluster module) finds its helper programs
		// and components through OPAL_PREFIX; one inherited from another MPI would send
		// mpirun and the ranks to the wrong tree.
		if ownOpenMPIPrefix(m.Home) {
			env.set("OPAL_PREFIX", m.Home)
			names = append(names, "OPAL_PREFIX")
		}
		if os.Geteuid() == 0 {
			// Open MPI refuses to start as root without both the flag and these two.
			env.set("OMPI_ALLOW_RUN_AS_ROOT", "1")
			env.set("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
		}
	}
	if env.get("LD_LIBRARY_PATH") != "" {
		names = append(names, "LD_LIBRARY_PATH")
	}
	names = dedupe(names)
	n := strconv.Itoa(s.Ranks)
	switch m.Dialect {
	case "openmpi":
		// No binding: the harness picks each rank's GPU from OMPI_COMM_WORLD_LOCAL_RANK, and
		// binding ranks to cores would pin every rank's host thread away from its GPU's NUMA
		// node on some machines.
		argv = []string{m.Mpirun, "-np", n, "--oversubscribe", "--bind-to", "none", "--tag-output"}
		if os.Geteuid() == 0 {
			argv = append(argv, "--allow-run-as-root")
		}
		for _, k := range names {
			argv = append(argv, "-x", k)
		}
		tag, rankVar, fp = openMPITag, "OMPI_COMM_WORLD_RANK", &openMPIFailures{}
	case "mpich":
		argv = []string{m.Mpirun, "-np", n, "-prepend-rank"}
		for _, k := range names {
			argv = append(argv, "-genv", k, env.get(k))
		}
		tag, rankVar, fp = mpichTag, "PMI_RANK", &mpichFailures{}
	default:
		return nil, nil, "", nil, fmt.Errorf("launch: unknown MPI dialect %q (want openmpi or mpich)", m.Dialect)
	}
	return append(argv, s.Argv...), tag, rankVar, fp, nil
}

// inheritedJobVar reports whether an inherited variable names the rank, job or server of an
// MPI job that launched the checker itself (Open MPI's, PMIx's, PMI's).
func inheritedJobVar(k string) bool {
	for _, p := range []string{"OMPI_COMM_WORLD_", "PMIX_", "PMI_", "OMPI_MCA_orte_", "OMPI_MCA_ess_",
		"OMPI_MCA_pmix", "OMPI_MCA_initial_wdir", "OMPI_UNIVERSE_SIZE", "OMPI_FILE_LOCATION",
		"OMPI_NUM_APP_CTX", "OMPI_FIRST_RANKS", "OMPI_APP_CTX_NUM_PROCS"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// ownOpenMPIPrefix reports whether home is an Open MPI installed in a prefix of its own (its
// lib folder holds libopen-pal), as opposed to a system MPI spread over /usr.
func ownOpenMPIPrefix(home string) bool {
	if home == "" || home == "/usr" || home == "/usr/local" || home == "/" {
		return false
	}
	for _, lib := range []string{"lib", "lib64"} {
		if m, _ := filepath.Glob(filepath.Join(home, lib, "libopen-pal.so*")); len(m) > 0 {
			return true
		}
	}
	return false
}

// mpiDialect asks mpirun --version which MPI it belongs to (Open MPI unless it says MPICH's
// Hydra); a second is plenty.
func mpiDialect(mpirun string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, mpirun, "--version").CombinedOutput()
	s := strings.ToLower(string(out))
	if strings.Contains(s, "hydra") || strings.Contains(s, "mpich") || strings.Contains(s, "intel(r) mpi") {
		return "mpich"
	}
	return "openmpi"
}

// torchrunPlan builds the torchrun command line: one node, c10d rendezvous on a free port,
// no restarts, every rank's output tee'd with a "[default<r>]:" prefix. The program runs as
// given (--no-python), so Argv chooses the interpreter.
func torchrunPlan(s *Spec, port, logDir string) ([]string, error) {
	bin := s.Torchrun
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("torchrun"); err != nil {
			return nil, fmt.Errorf("launch: torchrun: %w", err)
		}
	}
	argv := []string{bin,
		"--nnodes", "1",
		"--nproc-per-node", strconv.Itoa(s.Ranks),
		"--rdzv-backend", "c10d",
		"--rdzv-endpoint", "127.0.0.1:" + port,
		"--rdzv-id", "mgpu-" + strconv.Itoa(os.Getpid()) + "-" + port,
		"--max-restarts", "0",
		"--log-dir", logDir,
		"--tee", "3",
		"--no-python",
	}
	return append(argv, s.Argv...), nil
}

func dedupe(names []string) []string {
	seen := map[string]bool{}
	out := names[:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Open MPI:
//
//	mpirun noticed that process rank 1 with PID 0 on node x exited on signal 11 (Segmentation fault).
//	Process name: [[48006,1],1]      (Open MPI 4)   Process name: [prterun-x-123@1,1]   (5)
//	Exit code:    3
//
//	MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
//	with errorcode 5.
//	mpirun has exited due to process rank 1 with PID 0 on
//	node x exiting improperly.      (left without MPI_Finalize: exit code unknown)
var (
	ompiSignal   = regexp.MustCompile(`process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)`)
	ompiExitName = regexp.MustCompile(`Process name:\s*\[(?:\[\d+,\d+\],|[^\],]*,)(\d+)\]`)
	ompiExitCode = regexp.MustCompile(`Exit code:\s*(\d+)`)
	ompiAbort    = regexp.MustCompile(`MPI_ABORT was invoked on rank (\d+) in communicator`)
	ompiAbortErr = regexp.MustCompile(`^\s*with errorcode (-?\d+)`)
	ompiImproper = regexp.MustCompile(`exited due to process rank (\d+) with PID \d+ on`)
)

type openMPIFailures struct {
	found   bool
	end     rankEnd
	pending int // rank named by "Process name:", waiting for "Exit code:"
	abort   int // rank named by "MPI_ABORT was invoked", waiting for its error code
}

func (p *openMPIFailures) line(s string) {
	if p.found {
		return
	}
	if m := ompiSignal.FindStringSubmatch(s); m != nil {
		r, _ := strconv.Atoi(m[1])
		sig, _ := strconv.Atoi(m[2])
		p.end, p.found = rankEnd{rank: r, code: -1, signal: syscall.Signal(sig)}, true
		return
	}
	if m := ompiAbort.FindStringSubmatch(s); m != nil {
		p.abort, _ = strconv.Atoi(m[1])
		p.abort++
		return
	}
	if p.abort > 0 {
		code := -1
		if m := ompiAbortErr.FindStringSubmatch(s); m != nil {
			code, _ = strconv.Atoi(m[1])
		}
		p.end, p.found = rankEnd{rank: p.abort - 1, code: code}, true
		return
	}
	if m := ompiImproper.FindStringSubmatch(s); m != nil {
		r, _ := strconv.Atoi(m[1])
		p.end, p.found = rankEnd{rank: r, code: -1}, true
		return
	}
	if m := ompiExitName.FindStringSubmatch(s); m != nil {
		p.pending, _ = strconv.Atoi(m[1])
		p.pending++
		return
	}
	if m := ompiExitCode.FindStringSubmatch(s); m != nil && p.pending > 0 {
		c, _ := strconv.Atoi(m[1])
		p.end, p.found = rankEnd{rank: p.pending - 1, code: c}, true
	}
}

func (p *openMPIFailures) first() (rankEnd, bool) { return p.end, p.found }

// MPICH (Hydra):
//
//	=   RANK 1 PID 1234 RUNNING AT host
//	=   KILLED BY SIGNAL: 11 (Segmentation fault)      or      =   EXIT CODE: 3
var (
	hydraRank   = regexp.MustCompile(`RANK (\d+) PID \d+ RUNNING AT`)
	hydraSignal = regexp.MustCompile(`KILLED BY SIGNAL:\s*(\d+)`)
	hydraExit   = regexp.MustCompile(`EXIT CODE:\s*(\d+)`)
)

type mpichFailures struct {
	found   bool
	end     rankEnd
	pending int
}

func (p *mpichFailures) line(s string) {
	if p.found {
		return
	}
	if m := hydraRank.FindStringSubmatch(s); m != nil {
		p.pending, _ = strconv.Atoi(m[1])
		p.pending++
		return
	}
	if p.pending == 0 {
		return
	}
	if m := hydraSignal.FindStringSubmatch(s); m != nil {
		sig, _ := strconv.Atoi(m[1])
		p.end, p.found = rankEnd{rank: p.pending - 1, code: -1, signal: syscall.Signal(sig)}, true
	} else if m := hydraExit.FindStringSubmatch(s); m != nil {
		c, _ := strconv.Atoi(m[1])
		p.end, p.found = rankEnd{rank: p.pending - 1, code: c}, true
	}
}

func (p *mpichFailures) first() (rankEnd, bool) { return p.end, p.found }

// torchrun's summary of a failed job:
//
//	Root Cause (first observed failure):
//	[0]:
//	  rank      : 1 (local_rank: 1)
//	  exitcode  : -11 (pid: 12345)
var (
	torchRank = regexp.MustCompile(`^\s*rank\s*:\s*(\d+)`)
	torchExit = regexp.MustCompile(`^\s*exitcode\s*:\s*(-?\d+)`)
)

type torchrunFailures struct {
	inRoot  bool
	found   bool
	end     rankEnd
	pending int
}

func (p *torchrunFailures) line(s string) {
	if p.found {
		return
	}
	if strings.Contains(s, "Root Cause") {
		p.inRoot = true
		return
	}
	if !p.inRoot {
		return
	}
	if m := torchRank.FindStringSubmatch(s); m != nil {
		p.pending, _ = strconv.Atoi(m[1])
		p.pending++
		return
	}
	if m := torchExit.FindStringSubmatch(s); m != nil && p.pending > 0 {
		c, _ := strconv.Atoi(m[1])
		if c < 0 {
			p.end = rankEnd{rank: p.pending - 1, code: -1, signal: syscall.Signal(-c)}
		} else {
			p.end = rankEnd{rank: p.pending - 1, code: c}
		}
		p.found = true
	}
}

func (p *torchrunFailures) first() (rankEnd, bool) { return p.end, p.found }
