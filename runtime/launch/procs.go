package launch

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"
	"syscall"
)

// procInfo is one line of the process table (from /proc/<pid>/stat).
type procInfo struct {
	ppid, pgid int
	start      uint64 // clock ticks after boot
	zombie     bool
}

// procKey names a process across pid reuse.
type procKey struct {
	pid   int
	start uint64
}

// tracker follows the processes a job starts. The direct children are process-group leaders;
// their descendants may move to groups of their own (mpirun gives every rank its own group),
// so the process table is scanned now and then and every descendant and its group is
// remembered. Signals go to the groups (and to remembered processes outside them), never to
// the supervisor's own group. Without /proc only the children's own groups are known.
type tracker struct {
	selfPgid int
	minStart uint64           // processes started before the job are never ours
	roots    map[int]bool     // direct children not yet reaped (their pid is their pgid)
	known    map[procKey]bool // descendants seen
	groups   map[int]bool     // process groups of the job
	table    map[int]procInfo // last scan
	rankVar  string           // env variable holding the rank under a launcher, or ""
	ranks    map[int]procKey  // rank -> its process (the oldest carrying rankVar=rank)
	noRank   map[procKey]bool // descendants whose environment has no rankVar (settled)
	envSeen  map[procKey]int  // scans that found no rank yet, to stop re-reading
	haveProc bool
	// Processes that are not descendants but carry tagKey=tagVal in their environment are
	// the job's too (the tasks slurmstepd starts for srun); onTag sees each one's environment.
	tagKey, tagVal string
	onTag          func(env []byte)
	tagLooks       map[procKey]int  // scans that read a process's environment without the tag
	untagged       map[procKey]bool // settled: not the job's
}

func newTracker(rankVar string) *tracker {
	t := &tracker{
		selfPgid: syscall.Getpgrp(),
		roots:    map[int]bool{},
		known:    map[procKey]bool{},
		groups:   map[int]bool{},
		rankVar:  rankVar,
		ranks:    map[int]procKey{},
		noRank:   map[procKey]bool{},
		envSeen:  map[procKey]int{},
	}
	// Every process of the job starts after this one did: a cheap guard against pid reuse
	// that needs no clock.
	if self, ok := readStat(os.Getpid(), make([]byte, 0, 1024)); ok {
		t.minStart = self.start
	}
	return t
}

// add registers a direct child, which leads its own process group.
func (t *tracker) add(pid int) {
	t.roots[pid] = true
	if pid != t.selfPgid {
		t.groups[pid] = true
	}
}

// reaped tells the tracker a direct child was waited for: its pid may be reused now.
func (t *tracker) reaped(pid int) { delete(t.roots, pid) }

// readTable reads the process table; nil when /proc is not there.
func readTable() map[int]procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	tab := make(map[int]procInfo, len(ents))
	buf := make([]byte, 0, 1024)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if info, ok := readStat(pid, buf); ok {
			tab[pid] = info
		}
	}
	return tab
}

func readStat(pid int, buf []byte) (procInfo, bool) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	defer f.Close()
	n, _ := f.Read(buf[:cap(buf)])
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procInfo{}, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(string(fields[1]))
	pgid, _ := strconv.Atoi(string(fields[2]))
	start, _ := strconv.ParseUint(string(fields[19]), 10, 64)
	return procInfo{ppid: ppid, pgid: pgid, start: start, zombie: fields[0][0] == 'Z' || fields[0][0] == 'X'}, true
}

// scan refreshes the table and what the job owns.
func (t *tracker) scan() {
	tab := readTable()
	if tab == nil {
		t.haveProc = false
		return
	}
	t.haveProc = true
	t.table = tab
	children := map[int][]int{}
	for pid, p := range tab {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	// Walk down from the direct children and from every descendant still alive (an orphan
	// whose parent died is found through itself).
	var queue []int
	for pid := range t.roots {
		queue = append(queue, pid)
	}
	for k := range t.known {
		if p, ok := tab[k.pid]; ok && p.start == k.start {
			queue = append(queue, k.pid)
		}
	}
	if t.tagKey != "" {
		queue = append(queue, t.adopt(tab)...)
	}
	seen := map[int]bool{}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		p, ok := tab[pid]
		if !ok || p.start < t.minStart {
			continue
		}
		if !t.roots[pid] {
			t.known[procKey{pid, p.start}] = true
		}
		if p.pgid > 1 && p.pgid != t.selfPgid {
			t.groups[p.pgid] = true
		}
		queue = append(queue, children[pid]...)
	}
	// A group is ours while it has stayed non-empty since we saw it; once empty its number
	// may be handed out again.
	live := map[int]bool{}
	for _, p := range tab {
		live[p.pgid] = true
	}
	for g := range t.groups {
		if !live[g] && !t.roots[g] {
			delete(t.groups, g)
		}
	}
	if t.rankVar != "" {
		t.findRanks()
	}
}

// adoptTagged makes processes whose environment holds key=val part of the job, wherever they
// are in the process tree.
func (t *tracker) adoptTagged(key, val string, onTag func(env []byte)) {
	t.tagKey, t.tagVal, t.onTag = key, val, onTag
	t.tagLooks = map[procKey]int{}
	t.untagged = map[procKey]bool{}
}

// adopt looks at processes started since the job began that are not known yet and returns
// those that carry the tag. A process is read a few times before it is settled as not the
// job's: right after fork its environment is still its parent's, until it execs.
func (t *tracker) adopt(tab map[int]procInfo) []int {
	for k := range t.untagged {
		if p, ok := tab[k.pid]; !ok || p.start != k.start {
			delete(t.untagged, k)
		}
	}
	for k := range t.tagLooks {
		if p, ok := tab[k.pid]; !ok || p.start != k.start {
			delete(t.tagLooks, k)
		}
	}
	var found []int
	for pid, p := range tab {
		if p.start < t.minStart || p.zombie || t.roots[pid] || pid == os.Getpid() {
			continue
		}
		k := procKey{pid, p.start}
		if t.known[k] || t.untagged[k] {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			t.untagged[k] = true // gone, or another user's
			continue
		}
		if v, ok := envValue(env, t.tagKey); ok && v == t.tagVal {
			t.known[k] = true
			delete(t.tagLooks, k)
			if t.onTag != nil {
				t.onTag(env)
			}
			found = append(found, pid)
			continue
		}
		t.tagLooks[k]++
		if t.tagLooks[k] > 5 {
			t.untagged[k] = true
			delete(t.tagLooks, k)
		}
	}
	return found
}

// findRanks reads the environment of descendants not yet placed and records, per rank, the
// oldest process that carries rankVar (children of a rank inherit it).
func (t *tracker) findRanks() {
	for k := range t.known {
		if t.noRank[k] || !t.alive(k) {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(k.pid) + "/environ")
		if err != nil {
			continue
		}
		r, ok := envValue(env, t.rankVar)
		if !ok {
			// Right after fork the environment is still the launcher's; look again a few
			// times before settling.
			t.envSeen[k]++
			if t.envSeen[k] > 5 {
				t.noRank[k] = true
			}
			continue
		}
		t.noRank[k] = true // placed: no need to read it again
		rank, err := strconv.Atoi(r)
		if err != nil || rank < 0 {
			continue
		}
		if old, ok := t.ranks[rank]; !ok || k.start < old.start || k.start == old.start && k.pid < old.pid {
			t.ranks[rank] = k
		}
	}
}

func envValue(env []byte, key string) (string, bool) {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if len(kv) > len(key) && kv[len(key)] == '=' && string(kv[:len(key)]) == key {
			return string(kv[len(key)+1:]), true
		}
	}
	return "", false
}

// alive reports whether k is in the last scan and not a zombie.
func (t *tracker) alive(k procKey) bool {
	p, ok := t.table[k.pid]
	return ok && p.start == k.start && !p.zombie
}

// signal sends sig to every group of the job and to every remembered process outside them.
func (t *tracker) signal(sig syscall.Signal) {
	t.scan()
	for g := range t.groups {
		_ = syscall.Kill(-g, sig)
	}
	for k := range t.known {
		p, ok := t.table[k.pid]
		if ok && p.start == k.start && !t.groups[p.pgid] {
			_ = syscall.Kill(k.pid, sig)
		}
	}
}

// leftover lists the processes of the job that are still alive (zombies excluded: they are
// gone but for their parent's wait).
func (t *tracker) leftover() []int {
	t.scan()
	var out []int
	if !t.haveProc {
		for g := range t.groups {
			if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
				out = append(out, g)
			}
		}
		slices.Sort(out)
		return out
	}
	for pid, p := range t.table {
		if p.zombie || p.start < t.minStart {
			continue
		}
		if t.groups[p.pgid] || t.known[procKey{pid, p.start}] {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// groupsGone checks the job's groups with kill(-pgid, 0); zombie-only groups count as gone
// when /proc says so.
func (t *tracker) groupsGone() bool {
	for g := range t.groups {
		if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
			return false
		}
	}
	return true
}

// rankProcess returns the process found for rank, if any.
func (t *tracker) rankProcess(rank int) (procKey, bool) {
	k, ok := t.ranks[rank]
	return k, ok
}
