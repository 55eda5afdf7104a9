// Package confine starts a learner's processes so that they cannot write where a verdict's
// inputs live: the build cache (the programs the next check will run), the course's
// materialized sources, a workspace's progress. Without it, native code in a check could
// rewrite its own cached program (or another exercise's) with a driver that checks nothing,
// and the next check would run it and sign its records honestly.
//
// On Linux it uses Landlock (5.13+, unprivileged): the process that starts the command
// restricts one OS thread of its own and starts the command from it, so the command and every
// process it starts inherit the restriction, and the thread is then discarded. Elsewhere, or
// where the kernel has no Landlock, Start starts the command unconfined and says so.
package confine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Rules says where the confined processes may not write.
type Rules struct {
	// Protect: no file or directory beneath these may be created, written, truncated, renamed
	// or removed (reading and running stay allowed).
	Protect []string
	// Writable: exceptions beneath Protect (a check's run directory).
	Writable []string
}

// Status is what Start (or Probe) found.
type Status struct {
	ABI     int    // the kernel's Landlock ABI version (0: none)
	Applied bool   // the command runs confined
	Why     string // why not, when not applied
}

func (r *Rules) clean() (*Rules, error) {
	out := &Rules{}
	for _, set := range []struct {
		in  []string
		out *[]string
	}{{r.Protect, &out.Protect}, {r.Writable, &out.Writable}} {
		for _, p := range set.in {
			a, err := filepath.Abs(p)
			if err != nil {
				return nil, err
			}
			if e, err := filepath.EvalSymlinks(a); err == nil {
				a = e
			}
			*set.out = append(*set.out, a)
		}
	}
	for _, w := range out.Writable {
		if !beneathAny(w, out.Protect) {
			return nil, fmt.Errorf("confine: writable %s is not beneath a protected directory", w)
		}
	}
	return out, nil
}

// beneathAny says whether p is one of dirs or lies beneath one.
func beneathAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !(len(rel) > 2 && rel[:3] == "../")
}

// Start starts cmd confined by r (nil r: unconfined). Where confinement is not possible it
// starts the command anyway and the Status says why.
func Start(cmd *exec.Cmd, r *Rules) (Status, error) {
	if r == nil || len(r.Protect) == 0 {
		return Status{Why: "nothing to protect"}, cmd.Start()
	}
	c, err := r.clean()
	if err != nil {
		return Status{}, err
	}
	if why := scratchAncestor(c.Protect); why != "" {
		return Status{Why: why}, cmd.Start()
	}
	return start(cmd, c)
}

// scratchAncestor says why confinement would break ordinary programs: nothing new can be made
// directly in a directory on the way down to a protected one, and in the system's scratch
// directories (/tmp, /dev/shm) MPI, NCCL and NVSHMEM must be free to create files.
func scratchAncestor(protect []string) string {
	scratch := []string{"/tmp", "/var/tmp", "/dev/shm", os.TempDir()}
	for _, p := range protect {
		for _, s := range scratch {
			if e, err := filepath.EvalSymlinks(s); err == nil {
				s = e
			}
			if s != p && within(p, s) {
				return fmt.Sprintf("%s lies in %s, where programs must be free to create files; "+
					"put the cache elsewhere (MGPU_LEARN_CACHE) to have it protected", p, s)
			}
		}
	}
	return ""
}

// ScratchAncestor says why a protected directory dir could not be protected (it lies in /tmp
// or another scratch directory), or "".
func ScratchAncestor(dir string) string {
	c, err := (&Rules{Protect: []string{dir}}).clean()
	if err != nil {
		return err.Error()
	}
	return scratchAncestor(c.Protect)
}

// Probe says whether this machine can confine processes (the Landlock ABI it offers).
func Probe() Status { return probe() }

// ProtectMemory keeps the user's other processes from reading or writing this one's memory
// (ptrace, /proc/<pid>/mem) unless they hold CAP_SYS_PTRACE: Linux's PR_SET_DUMPABLE 0. mgpu-learn
// calls it first thing, because it holds every run's seed and channel keys while learner code
// runs as the same user; where the kernel lets a user's processes trace each other (Yama
// ptrace_scope 0), a rank could otherwise read them out of it (docs/protocol.md §4). It lasts
// until the process execs; the processes it starts are not affected. Elsewhere than Linux it
// does nothing.
func ProtectMemory() error { return protectMemory() }
