package doctor

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/confine"
	"github.com/mgpu-learn/mgpu-learn/runtime/launch"
	"github.com/mgpu-learn/mgpu-learn/runtime/probe"
)

// Schema is the version of the JSON report (docs/doctor.md); it changes when a field changes
// meaning or goes away, not when one is added.
const Schema = 1

// Report is what doctor shows: the facts, and for each module of the course what runs here.
type Report struct {
	Schema  int          `json:"schema"`
	Facts   *probe.Facts `json:"facts"`
	Modules []ModuleRow  `json:"modules"`
	// Slurm is where this shell stands with Slurm and how checks start their ranks; nil when
	// there is no Slurm here at all (no srun, no allocation).
	Slurm *SlurmStatus `json:"slurm,omitempty"`
	// Isolation says whether the programs of C and CUDA checks run unable to write the build
	// cache (runtime/confine). Never cached: it belongs to the kernel and the cache's place.
	Isolation *Isolation `json:"isolation,omitempty"`
}

// Isolation is doctor's word on confining learner programs (docs/protocol.md §4).
type Isolation struct {
	Landlock int    `json:"landlock_abi"` // 0: none
	Cache    string `json:"cache"`
	Why      string `json:"why,omitempty"` // why checks run unconfined here ("" when they do not)
	// PtraceScope is Yama's kernel.yama.ptrace_scope (-1: no Yama). At 0 a rank could trace its
	// verifier, a process of the same user (docs/protocol.md §4, "The verifier").
	PtraceScope int `json:"ptrace_scope"`
}

// SlurmStatus is doctor's word on Slurm (docs/slurm.md). Unlike the facts it is never cached:
// it belongs to this shell (its SLURM_* variables), not to the machine.
type SlurmStatus struct {
	Found   bool   `json:"found"`             // srun is on PATH
	Version string `json:"version,omitempty"` // "" when unknown (no cluster configured here)
	// Job is the allocation this shell is inside; nil outside one.
	Job *launch.SlurmJob `json:"job,omitempty"`
	// Disabled: MGPU_LEARN_SLURM=off, ranks start here whatever Slurm says.
	Disabled bool `json:"disabled,omitempty"`
	// Launch says, in words, how a check starts its ranks from this shell.
	Launch string `json:"launch"`
	// Problem is why checks are refused here ("" when they are not).
	Problem string `json:"problem,omitempty"`
}

// ModuleRow is one module's verdict.
type ModuleRow struct {
	Module string `json:"module"` // "module2"
	Title  string `json:"title"`
	// Runnable: every exercise of the module can run here.
	Runnable          bool `json:"runnable"`
	ExercisesRunnable int  `json:"exercises_runnable"`
	ExercisesTotal    int  `json:"exercises_total"`
	// Missing are the unmet requirements of its exercises, one per need (the largest GPU count
	// and compute capability asked for), most basic first.
	Missing []Reason `json:"missing"`
	// Exercises are the exercises that cannot run, each with its own reasons.
	Blocked []ExerciseRow `json:"blocked"`
	// Uses names, in words, the C libraries found on this machine that the module's exercises
	// build with (version, pip wheel / system / $..._HOME, folders); empty when none.
	Uses []string `json:"uses,omitempty"`
}

// ExerciseRow is one exercise that cannot run here.
type ExerciseRow struct {
	ID      string   `json:"id"`
	Missing []Reason `json:"missing"`
}

// Build checks every exercise of c against f. c may be nil (facts only).
func Build(f *probe.Facts, c *course.Course) *Report {
	r := &Report{Schema: Schema, Facts: f, Modules: []ModuleRow{}}
	host, _ := os.Hostname()
	r.Slurm = slurmStatus(f, os.Environ(), host)
	r.Isolation = isolation()
	if c == nil {
		return r
	}
	for _, m := range c.Modules {
		row := ModuleRow{Module: m.ID, Title: m.Title, Missing: []Reason{}, Blocked: []ExerciseRow{}}
		for _, e := range m.Exercises {
			row.ExercisesTotal++
			for _, u := range usesLibraries(f, &e.Manifest) {
				if !slices.Contains(row.Uses, u) {
					row.Uses = append(row.Uses, u)
				}
			}
			rs := UnmetExercise(f, &e.Manifest)
			if len(rs) == 0 {
				row.ExercisesRunnable++
				continue
			}
			row.Blocked = append(row.Blocked, ExerciseRow{ID: e.ID, Missing: rs})
			row.Missing = merge(row.Missing, rs)
		}
		row.Runnable = row.ExercisesRunnable == row.ExercisesTotal
		r.Modules = append(r.Modules, row)
	}
	return r
}

// merge adds rs to into, one reason per need: for GPUs and compute capability the most
// demanding one wins.
func merge(into, rs []Reason) []Reason {
	for _, r := range rs {
		i := -1
		for j := range into {
			if into[j].Need == r.Need {
				i = j
			}
		}
		switch {
		case i < 0:
			into = append(into, r)
		case r.amount > into[i].amount:
			into[i] = r
		}
	}
	sortReasons(into)
	return into
}

// WriteJSON writes the report as indented JSON (docs/doctor.md describes it).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ptraceScope reads Yama's setting from path; -1 when there is none.
func ptraceScope(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return v
}

// isolation probes Landlock and the cache's place the way checks will use them.
func isolation() *Isolation {
	cache := os.Getenv("MGPU_LEARN_CACHE")
	if cache == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(d, "mgpu-learn")
		}
	}
	iso := &Isolation{Cache: cache, PtraceScope: ptraceScope("/proc/sys/kernel/yama/ptrace_scope")}
	st := confine.Probe()
	iso.Landlock = st.ABI
	if !st.Applied {
		iso.Why = st.Why
	} else if why := confine.ScratchAncestor(cache); why != "" {
		iso.Why = why
	}
	return iso
}
