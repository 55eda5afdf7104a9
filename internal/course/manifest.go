package course

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// Manifest is an exercise's exercise.yaml. docs/manifest.md documents every field; the loader
// rejects unknown keys and names the file and line of every problem.
type Manifest struct {
	ID    string `yaml:"id"`    // "module0/peer-copy": module id, slash, exercise name (the folder name)
	Title string `yaml:"title"` // one line
	// Lesson is the id of the lesson that teaches it ("module0/02-timing"); optional.
	Lesson string `yaml:"lesson"`
	// Kind is "cuda" (nvcc), "c" (cc; CPU fixtures), or "python".
	Kind string `yaml:"kind"`
	// Task is the markdown file (relative to the exercise folder) that states the task.
	Task string `yaml:"task"`
	// Files are the learner's files, by name. Starters live in starter/<name>, the reference
	// solution in solution/<name>; the learner's copy lives in the workspace.
	Files []string `yaml:"files"`
	// Driver is the course-owned file that owns main ("driver.cu", "driver.py").
	Driver string `yaml:"driver"`
	// Support are further course-owned files compiled or shipped with the driver (headers...).
	Support []string `yaml:"support"`

	// Verifier splits the check in two processes per rank (docs/protocol.md §4, "The
	// verifier"): the rank program computes and hands its outputs over; a verifier built from
	// the driver alone (-DMGPU_VERIFIER), which alone knows the run's seed, makes the expected
	// values and records the cases. Python drivers run as the verifier without the learner's
	// module.
	Verifier bool `yaml:"verifier"`

	Build    Build        `yaml:"build"`
	Launch   Launch       `yaml:"launch"`
	Requires Requirements `yaml:"requires"`
	Cases    []Case       `yaml:"cases"`
	Perf     *Perf        `yaml:"perf"`
	Forbid   []Forbidden  `yaml:"forbid"`
	// Ordering "system": the learner's device code signals and waits across GPUs, and the
	// policy stage reads its PTX for flag operations at system scope with relaxed order (a
	// signal no release or fence orders after the data; a spin wait no acquire or fence
	// orders before the reads). checker/ordering.go; "" checks nothing. On a python exercise
	// the PTX Triton compiled during the run is read, and a finding fails the case "ordering".
	Ordering string `yaml:"ordering"`
	// PTXRequires (cuda only): instructions the learner's PTX must hold, each one at least once
	// somewhere (checker/ptxrequire.go): the exercise's method, where a slower or older one
	// would also pass the other stages (plain stores where the TMA is asked for).
	PTXRequires []PTXRequirement `yaml:"ptx_requires"`
	Hints       []string         `yaml:"hints"`
	Timeout     Duration         `yaml:"timeout"`
	Starter     StarterOutcome   `yaml:"starter"`
	// Variants are adversarial or alternative versions of the learner's files used by
	// `course lint` and the acceptance suite: each must end as Expect says.
	Variants []Variant `yaml:"variants"`
}

// Build says how to compile a cuda or c exercise.
type Build struct {
	Flags []string `yaml:"flags"` // extra compiler flags, e.g. ["-O3"]
	// Libs are the libraries to link: "nccl", "mpi", "nvshmem", "cuda" (driver API), "pthread".
	Libs []string `yaml:"libs"`
	// RDC asks for relocatable device code (NVSHMEM).
	RDC bool `yaml:"rdc"`
}

// Launch says how to start the ranks.
type Launch struct {
	// Launcher: "local" (N processes, one per GPU), "single" (one process, all GPUs),
	// "mpirun", "torchrun" (Python; the runtime may spawn ranks directly with the same env).
	Launcher string `yaml:"launcher"`
	// Ranks: a number, or "all" (one per visible GPU). Ignored by "single".
	Ranks string `yaml:"ranks"`
	// CudaAwareMPI asks mpirun to use a CUDA-aware MPI installation.
	CudaAwareMPI bool `yaml:"cuda_aware_mpi"`
	// Env are extra environment variables for every rank (never the NVLS switches).
	Env map[string]string `yaml:"env"`
	// KeepGoing leaves the other ranks running when one rank dies (fault-tolerance exercises
	// judge how the survivors react); the timeout still applies.
	KeepGoing bool `yaml:"keep_going"`
	// CrossCheckRanks is the rank count of the CPU cross-check of a python exercise that needs
	// no GPU (checker.CrossRanks when 0): 4 where a mistake shows on 4 ranks only (an uneven
	// split whose sizes agree with the right ones on 2 and 3 ranks).
	CrossCheckRanks int `yaml:"cross_check_ranks"`
}

// Requirements are what the machine must have; unmet ones refuse the check with exit code 3.
type Requirements struct {
	GPUs int      `yaml:"gpus"` // minimum number of GPUs (0: none needed, e.g. CPU fixtures, gloo)
	Libs []string `yaml:"libs"` // "nccl", "mpi", "cuda-aware-mpi", "nvshmem", "torch", "nvcc", "cc"
	// PeerAccess requires every pair of GPUs used to have peer access.
	PeerAccess bool `yaml:"peer_access"`
	// MinCompute is the lowest compute capability, e.g. "9.0" for TMA.
	MinCompute string `yaml:"min_compute"`
}

// Case is one correctness case passed to the driver as MGPU_CASES.
type Case struct {
	Name string `yaml:"name"`
	N    int64  `yaml:"n"`
	// On: which ranks must report this case: "all" (default) or "0".
	On string `yaml:"on"`
	// CPU marks cases small enough for the CPU path (gloo); all cases run on GPUs.
	CPU *bool `yaml:"cpu"`
}

// Perf is the performance target, judged against a baseline timed in the same run.
type Perf struct {
	Case     string  `yaml:"case"`      // the headline case (one of PerfCases by name)
	Metric   string  `yaml:"metric"`    // "busbw", "algbw" (GB/s, higher is better) or "time" (µs, lower)
	Baseline string  `yaml:"baseline"`  // words for the report: "cudaMemcpyPeerAsync"
	MinRatio float64 `yaml:"min_ratio"` // yours/baseline (for time: baseline/yours) must reach this
	// SuspectAbove flags a ratio this high as suspect (e.g. 1.25: faster than the copy engine).
	SuspectAbove float64 `yaml:"suspect_above"`
	// FailHint is shown when the performance stage fails ("is peer access enabled?").
	FailHint string `yaml:"fail_hint"`
	// Cases are the sizes timed, passed as MGPU_PERF_CASES; the headline is Case.
	Cases []Case `yaml:"cases"`
	// MinReps and MaxReps bound the timed samples per (case, who); BudgetMS the timing time.
	MinReps  int `yaml:"min_reps"`
	MaxReps  int `yaml:"max_reps"`
	BudgetMS int `yaml:"budget_ms"`
	// Predict is the question the TUI asks before the first run ("bus bandwidth in GB/s").
	Predict string `yaml:"predict"`
}

// Forbidden is a library call the learner's code must not make.
type Forbidden struct {
	Symbol string `yaml:"symbol"` // C symbol (nm) or Python dotted name ("torch.distributed.all_reduce")
	Why    string `yaml:"why"`
}

// PTXRequirement is an instruction the learner's PTX must hold: Pattern is dot-separated parts
// that the opcode holds in this order, the first being the opcode's own
// ("cp.async.bulk.global.shared::cta" matches cp.async.bulk.global.shared::cta.bulk_group and
// cp.async.bulk.tensor.1d.global.shared::cta.bulk_group); Why tells the learner what it is for.
type PTXRequirement struct {
	Pattern string `yaml:"pattern"`
	Why     string `yaml:"why"`
}

// StarterOutcome is how the pristine starter must fail (checked by lint and acceptance).
type StarterOutcome struct {
	// FailsAt is the stage: "build", "policy", "run", "correctness" or "performance".
	FailsAt string `yaml:"fails_at"`
	// Hangs is true when the starter is expected to time out (a deadlock lesson).
	Hangs bool `yaml:"hangs"`
}

// Variant is a version of the learner's files kept with the course, under variants/<name>/.
type Variant struct {
	Name string `yaml:"name"`
	Why  string `yaml:"why"` // what mistake it makes
	// Expect: "pass", or the stage it must fail at.
	Expect string `yaml:"expect"`
	// Message are words the failure report must contain (case-insensitive).
	Message []string `yaml:"message"`
	// GPU marks variants that need GPUs (acceptance suite) as opposed to CPU fixtures.
	GPU bool `yaml:"gpu"`
	// MinRanks: the variant's expectation holds only when the run has at least this many
	// ranks (a mistake invisible on two ranks); verification skips it on smaller runs.
	MinRanks int `yaml:"min_ranks"`
	// CaughtAtRun: an expected policy failure that only shows when the program runs (NCCL's
	// watch, the harness's run-time checks); a build without a run must pass the policy stage.
	CaughtAtRun bool `yaml:"caught_at_run"`
	// Timed: the mistake shows only when the driver times the code (the check after timing,
	// new data in buffers the timed calls used); verification skips the variant where the
	// performance stage is off, since the variant can only pass there.
	Timed bool `yaml:"timed"`
	// Race: the mistake is a data race (a missing fence, a signal raised early, a buffer
	// reused too soon) that the driver provokes but cannot force. Whether it shows depends on
	// the hardware's ordering, so one caught run proves little: verification runs the variant
	// several times and requires the expected failure every time.
	Race bool `yaml:"race"`
}

// Duration is a time.Duration written as "90s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalYAML parses a Go duration string. A bad value is reported as a yaml.TypeError that
// names the line, so the strict loader keeps going and reports every problem of the file.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a duration must be a string such as \"90s\"", n.Line)}}
	}
	if n.ShortTag() == "!!null" || n.Value == "0" {
		d.Duration = 0
		return nil
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: bad duration %q: write it as \"90s\" or \"2m\"", n.Line, n.Value)}}
	}
	d.Duration = v
	return nil
}
