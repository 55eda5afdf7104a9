package checker

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mgpu-learn/mgpu-learn/internal/course"
	"github.com/mgpu-learn/mgpu-learn/runtime/build"
)

// NCCL's watch (docs/protocol.md §4): for an exercise that forbids an NCCL collective, NCCL
// itself reports every collective a rank asked it for, through the course's profiler plugin
// (csrc/mgpu_ncclwatch.c). The policy stage finds forbidden calls among the symbols and the
// preprocessed lines of the learner's code; the watch finds the calls that reach NCCL without
// naming it (a function found by walking memory to the library's symbol table), since NCCL
// reports them from inside the call. Counted apart: the driver's own calls (its baseline, in
// MGPU_NCCL_OWN windows) and everyone else's.

// ncclWatchInfo is the "nccl" object of a rank's done record: what the plugin counted.
type ncclWatchInfo struct {
	EnvOK     int               `json:"env_ok"`    // NCCL_PROFILER_PLUGIN still named the watch at the end
	Comms     uint64            `json:"comms"`     // communicators NCCL created with the plugin
	Finalized uint64            `json:"finalized"` // and finalized
	MaxRanks  int               `json:"max_ranks"` // the largest communicator's size
	MaskOK    int               `json:"mask_ok"`   // NCCL's event mask still asks for API events
	Windows   uint64            `json:"windows"`   // the driver's own windows entered
	Own       map[string]uint64 `json:"own"`       // calls in those windows, by NCCL's name
	Learner   map[string]uint64 `json:"learner"`   // every other call
	Error     string            `json:"error"`
}

// watchedNames are the NCCL names this exercise's forbidden list puts under the watch, each
// with the function's name and the manifest's reason. Empty for exercises the watch does not
// apply to.
func (k *check) watchedNames() map[string]course.Forbidden {
	e := k.e
	if e.Kind != "cuda" || !slices.Contains(e.Build.Libs, "nccl") {
		return nil
	}
	names := course.WatchedNCCL(e.Forbid)
	if len(names) == 0 {
		return nil
	}
	return names
}

// sharedBuilder is a Builder that also makes shared objects (runtime/build's does).
type sharedBuilder interface {
	SharedObject(ctx context.Context, tc *build.Toolchain, name string, src []byte) (string, error)
}

// ncclWatchMinor is the NCCL release whose profiler interface (v5) reports API calls.
const ncclWatchMinor = 28

// prepareWatch builds the plugin for an exercise under the watch and returns its path; "" with
// a note when the watch cannot run here, or with a failure when it should and cannot be built.
func (k *check) prepareWatch(ctx context.Context, tc *build.Toolchain) (string, bool) {
	if len(k.watchedNames()) == 0 {
		return "", true
	}
	if v := tc.Libs["nccl"].Version; v != "" && !ncclAtLeast(v, 2, ncclWatchMinor) {
		k.rep.Notes = append(k.rep.Notes, fmt.Sprintf("NCCL %s cannot report the collectives it runs to the course (its profiler interface v5 came with NCCL 2.%d): the forbidden collectives were looked for in your code only", v, ncclWatchMinor))
		return "", true
	}
	sb, ok := k.c.Builder.(sharedBuilder)
	if !ok {
		k.rep.Notes = append(k.rep.Notes, "this builder makes no shared objects: NCCL's watch is off")
		return "", true
	}
	src, err := fs.ReadFile(k.c.Harness, "mgpu_ncclwatch.c")
	if err != nil {
		k.fail(StageBuild, FaultRunner, "NCCL's watch is missing", "csrc/mgpu_ncclwatch.c: "+err.Error())
		return "", false
	}
	so, err := sb.SharedObject(ctx, tc, "csrc/mgpu_ncclwatch.c", src)
	if err != nil {
		k.fail(StageBuild, FaultRunner, "NCCL's watch does not build", err.Error())
		return "", false
	}
	return so, true
}

// ncclAtLeast reports whether version "M.m.p" is at least M.m.
func ncclAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return true // unknown form: assume new enough, the run will tell
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma > major || (ma == major && mi >= minor)
}

// checkWatch judges what NCCL's watch saw on each rank, after a run that otherwise passed.
func (k *check) checkWatch(rr *runResult, watch string) bool {
	if watch == "" {
		return true
	}
	names := k.watchedNames()
	for _, recs := range rr.records {
		w := recs.NCCL
		r := recs.Rank
		switch {
		case w == nil:
			k.fail(StageRun, FaultRunner, fmt.Sprintf("rank %d: no report from NCCL's watch", r),
				fmt.Sprintf("Rank %d's done record carries no counts from NCCL's watch (%s), which the harness opens for this exercise: the harness and the checker do not match.", r, watch))
			return false
		case w.Error != "":
			k.fail(StageRun, FaultRunner, fmt.Sprintf("rank %d: NCCL's watch: %s", r, w.Error), fmt.Sprintf("Rank %d: NCCL's watch: %s.", r, w.Error))
			return false
		}
		var seen []course.Forbidden
		for name, f := range names {
			if n := w.Learner[name]; n > 0 {
				seen = append(seen, course.Forbidden{Symbol: fmt.Sprintf("%s %d time(s)", f.Symbol, n), Why: f.Why})
			}
		}
		if len(seen) > 0 {
			sort.Slice(seen, func(i, j int) bool { return seen[i].Symbol < seen[j].Symbol })
			calls := make([]string, len(seen))
			for i, f := range seen {
				calls[i] = f.Symbol
			}
			return k.watchViolation(r, calls, seen[0].Why)
		}
		var own uint64
		for _, n := range w.Own {
			own += n
		}
		blind := ""
		switch {
		case w.EnvOK == 0:
			blind = "NCCL_PROFILER_PLUGIN no longer named the course's plugin when the rank finished (the harness sets it at start-up; NCCL reads it when it creates a communicator)"
		case w.Comms == 0 && w.Windows > 0:
			blind = fmt.Sprintf("the driver made %d NCCL call(s) of its own, but NCCL created no communicator with the course's plugin", w.Windows)
		case w.Comms == 0:
			continue // no communicator, no call of the driver's: NCCL ran nothing to watch
		case w.MaskOK == 0:
			blind = "NCCL's event mask no longer asks for the API events the plugin set"
		case w.MaxRanks > 1 && w.Windows > 0 && own == 0:
			blind = fmt.Sprintf("the driver made %d call(s) of its own on a communicator of %d ranks and NCCL reported none of them", w.Windows, w.MaxRanks)
		}
		if blind == "" && r == 0 && len(w.Learner) > 0 {
			k.rep.Notes = append(k.rep.Notes, "NCCL's record of the calls your code made on rank 0 (the driver's own not counted): "+callList(w.Learner))
		}
		if blind != "" {
			k.rep.Policy = append(k.rep.Policy, Violation{Rule: ruleHarness, Symbol: "NCCL watch", Found: "NCCL watch", Why: blind})
			k.fail(StagePolicy, FaultYou, fmt.Sprintf("NCCL's watch went blind on rank %d", r),
				fmt.Sprintf("Rank %d: %s. The course cannot tell which NCCL calls ran, so the run is not trusted. Code that changes the environment, NCCL's memory or the harness's does this; if yours does not, report it with your NCCL version.", r, blind))
			return false
		}
	}
	return true
}

// watchViolation fails the policy stage for collectives NCCL ran for the learner.
func (k *check) watchViolation(rank int, calls []string, why string) bool {
	var files []string
	for _, name := range k.e.Files {
		if p, ok := k.t.Files[name]; ok {
			files = append(files, k.showPath(p))
		}
	}
	for _, c := range calls {
		sym, _, _ := strings.Cut(c, " ")
		k.rep.Policy = append(k.rep.Policy, Violation{Symbol: sym, Found: sym + " (reported by NCCL)", File: strings.Join(files, ", "), Why: why})
	}
	k.done(StageRun, StatusOK, "stopped by the policy check")
	var b strings.Builder
	fmt.Fprintf(&b, "NCCL reports that rank %d called %s outside the driver's own calls, and this exercise forbids it", rank, strings.Join(calls, ", "))
	if why != "" {
		b.WriteString(": " + why)
	}
	b.WriteString(sentenceEnd(why) + "\n")
	b.WriteString("Your code (" + strings.Join(files, ", ") + ") never names it, so it reached the function another way. NCCL counts its calls itself (docs/protocol.md §4, NCCL's watch): build the result from the calls the task allows.\n")
	k.fail(StagePolicy, FaultYou, fmt.Sprintf("forbidden call %s, reported by NCCL", strings.Join(calls, ", ")), b.String())
	return false
}

// callList says counts by NCCL's names as API calls, most first: "2400 ncclSend, 2400 ncclRecv".
func callList(counts map[string]uint64) string {
	type kv struct {
		name string
		n    uint64
	}
	var l []kv
	for name, n := range counts {
		if n > 0 {
			l = append(l, kv{course.NCCLFunction(name), n})
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || (l[i].n == l[j].n && l[i].name < l[j].name) })
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%d %s", e.n, e.name)
	}
	return strings.Join(parts, ", ")
}
