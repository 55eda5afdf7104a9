// Package build compiles an exercise — the learner's files, the course-owned driver and the
// csrc harness — with nvcc or cc, through a content-addressed cache.
package build

import "time"

// Source roles.
const (
	RoleLearner = "learner"
	RoleDriver  = "driver"
	RoleHarness = "harness"
)

// Source is one file to compile.
type Source struct {
	Path string // on disk
	Role string
	// Show is the path to print in diagnostics (relative to the learner's workspace).
	Show string
	// Headers, when not nil, are this source's include directories instead of the Request's:
	// a source that includes nothing of the others' (the harness) gets a key of its own
	// headers only, so its object is shared by every build that compiles it alike.
	Headers []string
	// Flags are compile options for this source only, after the Request's (a -D that changes
	// one source, such as the verifier's driver). Not for learner sources.
	Flags []string
}

// Request is one build.
type Request struct {
	Kind      string   // "cuda" (nvcc) or "c" (cc)
	Sources   []Source // .cu/.c/.cpp files; each compiles to its own object
	Headers   []string // include directories (the harness dir, the exercise dir)
	Flags     []string // from the manifest
	Libs      []string // "nccl", "mpi", "nvshmem", "cuda", "pthread"
	RDC       bool
	Arch      string // "sm_90"; empty: from the toolchain's detected GPU, else a default
	Rebuild   bool   // ignore cache hits
	Toolchain *Toolchain
}

// Toolchain is the discovered compiler and libraries (runtime/probe fills it).
type Toolchain struct {
	NVCC    string // path
	CC      string // path
	Version string // compiler identity, part of the cache key
	// Arch is the detected GPU's architecture ("sm_90"), used when Request.Arch is empty.
	Arch string
	// Include/lib dirs per library name, and extra link args (e.g. "-l:libnvshmem_host.so.3").
	Libs map[string]Lib
}

// Lib is where one library lives.
type Lib struct {
	Include  []string
	LibDirs  []string
	LinkArgs []string
	// RuntimeDirs go on LD_LIBRARY_PATH when running (pip wheels have no ldconfig entry).
	RuntimeDirs []string
	// Version is the library's release as its headers give it ("2.28.9"; "" unknown).
	Version string
}

// Result is a build's outcome.
type Result struct {
	OK      bool
	Binary  string            // the linked program (in the cache)
	Objects map[string]string // learner source Show path -> its object file (for the policy stage)
	// Preprocessed maps a learner source's Show path to its preprocessed lines (the policy
	// stage reads the calls there too): "<base>:<line>\t<text>" per line, only lines from the
	// learner's directory, every compiler pass (nvcc's device and host passes) together.
	Preprocessed map[string]string
	// PTX maps a learner .cu source's Show path to the PTX nvcc made of it (every architecture's,
	// one after the other), for the policy stage's memory-ordering rule (docs/manifest.md,
	// ordering). Sources nvcc keeps no PTX of (C files) are absent.
	PTX map[string]string
	// CourseObjects are the driver's and the harness's objects (the policy stage reads which
	// symbols they use, so that a learner's object cannot replace one of them).
	CourseObjects []string
	Cached        bool // nothing was compiled or linked
	// Compiled counts the objects compiled by this build (0 when every object was cached).
	Compiled int
	Log      string // the whole compiler output, paths as in Source.Show
	// Diagnostics are the compiler's errors, first first.
	Diagnostics []Diagnostic
	Duration    time.Duration
	// RuntimeEnv is what the program needs to run (LD_LIBRARY_PATH additions).
	RuntimeEnv []string
}

// Diagnostic is one compiler message.
type Diagnostic struct {
	File     string
	Line     int
	Severity string // "error", "warning"
	Msg      string
}
