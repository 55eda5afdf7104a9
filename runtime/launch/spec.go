// Package launch starts the ranks of a run under supervision: one process group per job,
// per-rank output tagged and bounded, teardown of every rank when one fails, SIGTERM then
// SIGKILL on timeout or cancel, and nothing left behind.
package launch

import (
	"time"

	"github.com/mgpu-learn/mgpu-learn/runtime/confine"
)

// Launchers by name (course manifests use these words).
const (
	Local    = "local"    // N processes, one per GPU
	Single   = "single"   // one process that drives all GPUs
	MPIRun   = "mpirun"   // mpirun -np N (Open MPI or MPICH dialect)
	Torchrun = "torchrun" // Python ranks with torchrun's environment (spawned directly or by torchrun)
	Srun     = "srun"     // a Slurm job step of N tasks on this node (SlurmLauncher picks it; docs/slurm.md)
)

// Spec is one launch.
type Spec struct {
	Launcher string
	Ranks    int      // ranks to start (1 for Single)
	Argv     []string // the program and its arguments ("python3 driver.py" for Python)
	Dir      string   // working directory
	// Env is added to the parent's environment for every rank (KEY=VALUE). The launcher adds
	// the rank variables of docs/protocol.md and always forces NCCL_NVLS_ENABLE=0,
	// NVSHMEM_DISABLE_NVLS=1 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1.
	Env    []string
	RunDir string // result directory (exists); the rendezvous directory is RunDir/rdzv
	// Timeout for the whole job; Grace between SIGTERM and SIGKILL (default 2s).
	Timeout time.Duration
	Grace   time.Duration
	// TeardownAfter is how long the other ranks may run on after one rank failed (default 2s
	// in total, grace included): they get SIGTERM at once and SIGKILL after
	// min(Grace, TeardownAfter/2), so they are gone well within TeardownAfter.
	TeardownAfter time.Duration
	MPI           *MPI // for MPIRun; nil: mpirun from PATH, dialect from its --version
	// KeepGoing: when a rank fails, do not tear the others down (they still get the Timeout).
	KeepGoing bool
	// UseTorchrun forces the torchrun binary for Torchrun (default: spawn ranks directly).
	UseTorchrun bool
	Torchrun    string // path of torchrun when UseTorchrun
	Srun        string // path of srun for the Srun launcher ("" = srun on PATH)
	// Output receives every line of every rank as it comes (may be nil). Called from
	// several goroutines; must not block for long. Lines of the launcher program itself
	// (mpirun's or torchrun's own messages, untagged lines) come with rank -1.
	Output func(rank int, line string)
	// OnRankExit, when set, is called as each rank process the supervisor started itself
	// exits (not for mpirun, torchrun or srun jobs, whose ranks it does not start), from the
	// supervising goroutine: it must not block. Its State is provisional for ranks that
	// exit during a teardown; the Result has the final word.
	OnRankExit func(RankResult)
	// TailBytes bounds the output kept per rank (default 64 KiB; the end is kept).
	TailBytes int
	// NoWarm starts every rank cold even when the context carries a WarmPool (WithWarm).
	NoWarm bool
	// Confine, when set, keeps the processes the supervisor starts (the ranks, or the mpirun
	// or torchrun that starts them) and all they start from writing beneath Confine.Protect
	// but for Confine.Writable (runtime/confine; docs/protocol.md §4). Ranks forked from a
	// warm interpreter and Slurm job steps are not confined.
	Confine *confine.Rules
}

// MPI is an MPI installation to launch with.
type MPI struct {
	Mpirun  string // path to mpirun
	Dialect string // "openmpi" or "mpich"
	// Home (optional) is the installation's prefix: its lib/ goes first on LD_LIBRARY_PATH and
	// its bin/ on PATH, and an Open MPI installed in a prefix of its own (lib/libopen-pal.so*)
	// gets OPAL_PREFIX=Home for mpirun and the ranks.
	Home string
}

// Rank states in a Result.
const (
	StateDone     = "done"     // exited 0
	StateFailed   = "failed"   // exited non-zero on its own
	StateSignaled = "signaled" // died of a signal it was not sent by us (segfault, abort)
	StateHung     = "hung"     // still running when the job timed out
	StateKilled   = "killed"   // torn down by the launcher after another rank failed, or on cancel
	StateUnknown  = "unknown"  // the launcher cannot tell (ranks under mpirun)
)

// Result is what happened to the job.
type Result struct {
	Ranks    []RankResult
	TimedOut bool
	Canceled bool
	// FirstFailed is the rank that failed first (exit non-zero or signal), -1 if none.
	FirstFailed int
	Elapsed     time.Duration
	// Leftover lists processes of the job still alive after teardown (should be empty).
	Leftover []int
	// Launcher is the launcher program's own end (mpirun, torchrun) with its untagged
	// output as Tail; nil when the ranks were started directly.
	Launcher *RankResult
	// Warm counts the ranks forked from a warm interpreter (WarmPool) instead of started cold.
	Warm int
	// Confined says whether Spec.Confine was applied to every process started (Landlock),
	// and ConfineWhy why not, when it was asked for and could not be.
	Confined   bool
	ConfineWhy string
}

// RankResult is one rank's end.
type RankResult struct {
	Rank     int
	PID      int
	State    string
	ExitCode int    // -1 when killed by a signal or unknown
	Signal   string // "SIGSEGV", ... when signaled or killed
	Started  time.Time
	Ended    time.Time
	Tail     string // last TailBytes of the rank's combined stdout and stderr
	Dropped  int64  // bytes of output not kept
	Warm     bool   // forked from a warm interpreter
}
