package launch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Warm Python ranks (docs/runtime.md). A Python rank spends most of its start importing torch;
// a WarmPool keeps a zygote — the exercise's interpreter running csrc/python/mgpu_zygote.py,
// which imported torch and never touched CUDA — and forks ranks from it. The supervisor treats
// a forked rank like one it started: its output pipe, its process group, its exit status (the
// zygote reaps it and reports), its pid (the records channel's peer check).

// ErrWarmLost is returned by Launch, with the Result, when the zygote that forked ranks died
// while they ran: how they ended is unknown, so the run proves nothing and should be repeated
// from cold (Spec.NoWarm).
var ErrWarmLost = errors.New("launch: the warm interpreter that started the ranks died during the run; their ends are unknown")

// errTooBig: a request (mostly the environment) does not fit one datagram; the rank starts
// cold and the zygote stays.
var errTooBig = fmt.Errorf("warm ranks: the rank's environment is over %d KiB", maxRequest>>10)

// Pool defaults.
const (
	defaultMaxForks     = 50
	defaultMaxAge       = 30 * time.Minute
	defaultStartTimeout = 3 * time.Minute
	// forkTimeout bounds one fork request; a zygote that takes longer is replaced.
	forkTimeout = 20 * time.Second
	// retryStartAfter: a zygote that could not start is not tried again for this long.
	retryStartAfter = time.Minute
	// maxRequest bounds one request (a datagram on the socket pair).
	maxRequest = 128 << 10
)

// WarmEnabled is false when MGPU_LEARN_WARM=off: every rank starts a fresh interpreter.
func WarmEnabled() bool {
	return !strings.EqualFold(strings.TrimSpace(os.Getenv("MGPU_LEARN_WARM")), "off")
}

type warmKey struct{}

// WithWarm returns a context whose launches may fork their Python ranks from pool. The pool
// travels in the context so that commands that keep one for their lifetime (watch, the TUI)
// hand it to every check they run.
func WithWarm(ctx context.Context, pool *WarmPool) context.Context {
	if pool == nil {
		return ctx
	}
	return context.WithValue(ctx, warmKey{}, pool)
}

// HasWarm says whether ctx already carries a WarmPool.
func HasWarm(ctx context.Context) bool { return warmFrom(ctx) != nil }

func warmFrom(ctx context.Context) *WarmPool {
	p, _ := ctx.Value(warmKey{}).(*WarmPool)
	return p
}

// WarmPool keeps one zygote (per interpreter and environment) to fork Python ranks from. Its
// methods are safe for concurrent use. Close it when the program ends; a zygote also dies with
// the process that started it (Linux's parent-death signal).
type WarmPool struct {
	script []byte
	// Preload are the modules the zygote imports (default torch, torch.distributed and,
	// where it imports, torch._dynamo, which torch imports on the first optimizer a rank or a
	// verifier makes: 0.8-1.5 s of it). A name written "?name" is optional: a failed import
	// of it is skipped, not an unfit zygote.
	Preload []string
	// MaxForks and MaxAge bound a zygote's life (defaults 50 forks, 30 minutes); the next
	// launch after that gets a fresh one.
	MaxForks int
	MaxAge   time.Duration
	// StartTimeout bounds how long a launch waits for a zygote's imports (default 3 minutes);
	// past it, the launch starts its ranks cold.
	StartTimeout time.Duration

	mu      sync.Mutex
	cur     *zygote
	all     map[*zygote]bool // every zygote not yet reaped
	failed  map[string]time.Time
	lastErr string
	closed  bool
	forks   int
}

// NewWarmPool returns a pool whose zygotes run script (csrc/python/mgpu_zygote.py). Nothing
// starts until the first Python launch asks for a rank.
func NewWarmPool(script []byte) *WarmPool {
	return &WarmPool{
		script:  slices.Clone(script),
		Preload: []string{"torch", "torch.distributed", "?torch._dynamo"},
		all:     map[*zygote]bool{},
		failed:  map[string]time.Time{},
	}
}

// WarmStats says what a pool did, for doctor-like reports.
type WarmStats struct {
	Forks   int    // ranks forked since the pool was made
	Ready   bool   // a zygote is up now
	PID     int    // its pid, 0 when none
	LastErr string // why the last zygote could not start or was dropped
}

// Stats reports the pool's state.
func (p *WarmPool) Stats() WarmStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := WarmStats{Forks: p.forks, LastErr: p.lastErr}
	if z := p.cur; z != nil && z.isReady() && z.fit() == "" {
		st.Ready, st.PID = true, z.pid()
	}
	return st
}

// Close stops every zygote (they kill the ranks they still have).
func (p *WarmPool) Close() error {
	p.mu.Lock()
	p.closed = true
	zs := make([]*zygote, 0, len(p.all))
	for z := range p.all {
		zs = append(zs, z)
	}
	p.cur = nil
	p.mu.Unlock()
	for _, z := range zs {
		z.shutdown()
	}
	for _, z := range zs {
		z.waitGone(3 * time.Second)
	}
	return nil
}

// warmEligible says whether a launch's ranks may come from the pool: ranks the supervisor
// starts itself, and the program is "python script.py args...".
func warmEligible(s *Spec) bool {
	if s.NoWarm || len(s.Argv) < 2 {
		return false
	}
	switch s.Launcher {
	case Local, Single:
	case Torchrun:
		if s.UseTorchrun {
			return false
		}
	default:
		return false
	}
	py, script := filepath.Base(s.Argv[0]), s.Argv[1]
	return strings.HasPrefix(py, "python") && strings.HasSuffix(script, ".py") && !strings.HasPrefix(script, "-")
}

// zygoteEnv is the environment a zygote for these ranks starts with: theirs without what
// changes from run to run or rank to rank (the protocol's MGPU_* variables, the rank
// variables, the rendezvous address, PYTHONPATH, which each rank's sys.path gets anew).
// Whatever else a rank's environment holds is the zygote's too, so the interpreter's start and
// torch's import saw the same settings a cold rank's would.
func zygoteEnv(base *environ) []string {
	var out []string
	for _, kv := range base.list() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MGPU_") || k == "PYTHONPATH" || k == "MASTER_ADDR" || k == "MASTER_PORT" ||
			slices.Contains(rankVars, k) {
			continue
		}
		out = append(out, kv)
	}
	slices.Sort(out)
	return out
}

// acquire returns a ready zygote for python with this environment, or nil: the caller starts
// its ranks cold. A first use (or a changed interpreter, environment or torch, or a zygote
// past its bounds) starts a zygote and waits for it; a zygote found dead is replaced in the
// background while this launch goes cold.
func (p *WarmPool) acquire(ctx context.Context, python string, env []string) *zygote {
	if !warmSupported || !WarmEnabled() {
		return nil
	}
	h := sha256.New()
	h.Write([]byte(python))
	for _, kv := range env {
		h.Write([]byte{0})
		h.Write([]byte(kv))
	}
	key := hex.EncodeToString(h.Sum(nil))

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	z := p.cur
	wait := true
	if z != nil && z.key == key {
		if why := z.fit(); why != "" {
			// Dead or broken: start another for next time, go cold now. Worn out (forks,
			// age, a changed installation): start another and wait for it.
			wait = !z.broken()
			p.lastErr = why
			p.retireLocked(z)
			z = nil
		}
	} else if z != nil {
		p.retireLocked(z)
		z = nil
	}
	if z == nil {
		if at, ok := p.failed[key]; ok && time.Since(at) < retryStartAfter {
			p.mu.Unlock()
			return nil
		}
		var err error
		z, err = p.startLocked(key, python, env)
		if err != nil {
			p.lastErr = err.Error()
			p.failed[key] = time.Now()
			p.mu.Unlock()
			return nil
		}
		p.cur = z
	}
	p.mu.Unlock()

	if !z.isReady() && (!wait || z.background) {
		return nil
	}
	limit := p.StartTimeout
	if limit <= 0 {
		limit = defaultStartTimeout
	}
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-z.ready:
	case <-ctx.Done():
		return nil
	case <-t.C:
		return nil
	}
	if z.startErr != nil {
		p.mu.Lock()
		p.lastErr = z.startErr.Error()
		p.failed[key] = time.Now()
		if p.cur == z {
			p.cur = nil
		}
		p.mu.Unlock()
		return nil
	}
	if why := z.fit(); why != "" {
		return nil
	}
	return z
}

// forked counts a fork and starts the next zygote in the background once this one is worn.
func (p *WarmPool) forked(z *zygote) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forks++
	if p.cur == z && z.worn() != "" && !p.closed {
		p.retireLocked(z)
		if nz, err := p.startLocked(z.key, z.python, z.env); err == nil {
			nz.background = true
			p.cur = nz
		} else {
			p.lastErr = err.Error()
		}
	}
}

// broke drops a zygote that failed a request; the next launch starts another.
func (p *WarmPool) broke(z *zygote, why string) {
	z.markBroken(why)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = why
	if p.cur == z {
		p.retireLocked(z)
		if !p.closed {
			if nz, err := p.startLocked(z.key, z.python, z.env); err == nil {
				nz.background = true
				p.cur = nz
			}
		}
	}
}

func (p *WarmPool) retireLocked(z *zygote) {
	if p.cur == z {
		p.cur = nil
	}
	z.retire()
}

// startLocked starts a zygote; its imports go on in the background (z.ready).
func (p *WarmPool) startLocked(key, python string, env []string) (*zygote, error) {
	// The script lives in a private directory only until the interpreter has read it: the
	// directory goes once the zygote says hello (or fails to), so a crash of mgpu-learn leaves
	// nothing behind but a zygote that the parent-death signal ends.
	dir, err := os.MkdirTemp("", "mgpu-zygote-")
	if err != nil {
		return nil, fmt.Errorf("warm ranks: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mgpu_zygote.py"), p.script, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("warm ranks: %w", err)
	}
	maxForks, maxAge := p.MaxForks, p.MaxAge
	if maxForks <= 0 {
		maxForks = defaultMaxForks
	}
	if maxAge <= 0 {
		maxAge = defaultMaxAge
	}
	z := &zygote{
		key: key, python: python, env: env, maxForks: maxForks, maxAge: maxAge,
		scriptDir: dir, ready: make(chan struct{}), gone: make(chan struct{}),
		replies: map[int]chan forkReply{}, exits: map[int]chan exitReport{},
	}
	if err := z.start(filepath.Join(dir, "mgpu_zygote.py"), p.Preload); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p.all[z] = true
	go func() {
		<-z.gone
		// startErr is written before ready closes (onHello); a zygote that died before hello
		// closes ready once its socket reports the end. Read startErr only past that point.
		readyAfterDeath := true
		select {
		case <-z.ready:
		case <-time.After(5 * time.Second):
			readyAfterDeath = false
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(p.all, z)
		if p.cur != z {
			return
		}
		p.cur = nil
		// A zygote that was serving and died (killed, out of memory) is replaced at once;
		// launches go cold until the new one is ready. One that never got ready is not
		// retried (acquire's failed map).
		if readyAfterDeath && z.startErr == nil && !p.closed {
			p.lastErr = "warm ranks: the zygote died" + outputNote(z.output())
			if nz, err := p.startLocked(z.key, z.python, z.env); err == nil {
				nz.background = true
				p.cur = nz
			}
		}
	}()
	return z, nil
}

// zygote is one pre-imported interpreter and its end of the socket pair.
type zygote struct {
	key, python   string
	env           []string
	maxForks      int
	maxAge        time.Duration
	cmd           *exec.Cmd
	conn          *net.UnixConn
	born          time.Time
	out           *ring // the zygote's own output (import errors), for messages
	outMu         sync.Mutex
	scriptDir     string        // removed once the zygote is ready
	background    bool          // started ahead of need: launches do not wait for it
	ready         chan struct{} // closed once hello came (or the start failed)
	startErr      error
	hello         zygoteHello
	stamps        []fileStamp
	gone          chan struct{} // closed when the process has been reaped
	sendMu        sync.Mutex    // one request at a time
	mu            sync.Mutex
	nextID        int
	forks         int
	inflight      int
	replies       map[int]chan forkReply
	exits         map[int]chan exitReport
	dead, retired bool
	brokenWhy     string
	closeOnce     sync.Once
}

type zygoteHello struct {
	T          string   `json:"t"`
	PID        int      `json:"pid"`
	Python     string   `json:"python"`
	Executable string   `json:"executable"`
	Files      []string `json:"files"`
	Threads    int      `json:"threads"`
	Error      string   `json:"error"`
}

type zygoteMsg struct {
	T      string `json:"t"`
	ID     int    `json:"id"`
	PID    int    `json:"pid"`
	Status int    `json:"status"`
	Msg    string `json:"msg"`
}

type forkRequest struct {
	T    string   `json:"t"`
	ID   int      `json:"id"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
}

type forkReply struct {
	pid  int
	exit <-chan exitReport
	err  error
}

// exitReport is how a forked rank ended; lost when the zygote died before it could say.
type exitReport struct {
	ws   syscall.WaitStatus
	lost bool
}

// fileStamp is what a file looked like when the zygote imported it.
type fileStamp struct {
	path string
	size int64
	mod  time.Time
	ino  uint64
}

func stampOf(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{path: path}
	}
	fs := fileStamp{path: path, size: st.Size(), mod: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fs.ino = sys.Ino
	}
	return fs
}

func (z *zygote) start(script string, preload []string) error {
	fds, err := zygoteSocketPair()
	if err != nil {
		return fmt.Errorf("warm ranks: socketpair: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "zygote")
	theirs := os.NewFile(uintptr(fds[1]), "zygote-peer")
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		theirs.Close()
		return fmt.Errorf("warm ranks: %w", err)
	}
	z.conn = c.(*net.UnixConn)
	z.out = newRing(8 << 10)
	cmd := exec.Command(z.python, append([]string{script, "3"}, preload...)...)
	cmd.Env = z.env
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{theirs}
	w := &ringWriter{z: z}
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = zygoteAttr()
	cmd.WaitDelay = time.Second
	z.cmd = cmd
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the child ends, so
		// this goroutine keeps its thread until the zygote is reaped.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err != nil {
			return
		}
		_ = cmd.Wait()
		close(z.gone)
	}()
	if err := <-started; err != nil {
		theirs.Close()
		z.conn.Close()
		return fmt.Errorf("warm ranks: starting %s: %w", z.python, err)
	}
	theirs.Close()
	z.born = time.Now()
	go z.read()
	return nil
}

type ringWriter struct{ z *zygote }

func (w *ringWriter) Write(b []byte) (int, error) {
	w.z.outMu.Lock()
	w.z.out.write(b)
	w.z.outMu.Unlock()
	return len(b), nil
}

func (z *zygote) output() string {
	z.outMu.Lock()
	defer z.outMu.Unlock()
	s, _ := z.out.contents()
	return strings.TrimSpace(s)
}

func (z *zygote) pid() int { return z.cmd.Process.Pid }

func (z *zygote) isReady() bool {
	select {
	case <-z.ready:
		return z.startErr == nil
	default:
		return false
	}
}

// read takes the zygote's messages until its socket closes.
func (z *zygote) read() {
	buf := make([]byte, 64<<10)
	first := true
	for {
		n, _, _, _, err := z.conn.ReadMsgUnix(buf, nil)
		if err != nil || n == 0 {
			break
		}
		if first {
			first = false
			z.onHello(buf[:n])
			if z.startErr != nil {
				break
			}
			continue
		}
		var m zygoteMsg
		if json.Unmarshal(buf[:n], &m) != nil {
			continue
		}
		z.mu.Lock()
		switch m.T {
		case "forked":
			if ch := z.replies[m.ID]; ch != nil {
				delete(z.replies, m.ID)
				ex := make(chan exitReport, 1)
				z.exits[m.PID] = ex
				z.forks++
				z.inflight++
				ch <- forkReply{pid: m.PID, exit: ex}
			}
		case "refused":
			if ch := z.replies[m.ID]; ch != nil {
				delete(z.replies, m.ID)
				ch <- forkReply{err: fmt.Errorf("warm ranks: the zygote refused: %s", m.Msg)}
			}
		case "exit":
			if ex := z.exits[m.PID]; ex != nil {
				delete(z.exits, m.PID)
				ex <- exitReport{ws: syscall.WaitStatus(m.Status)}
				z.inflight--
			}
		}
		idle := z.retired && z.inflight == 0
		z.mu.Unlock()
		if idle {
			z.shutdown()
		}
	}
	if first {
		z.onHello(nil)
	}
	z.mu.Lock()
	z.dead = true
	for id, ch := range z.replies {
		ch <- forkReply{err: errors.New("warm ranks: the zygote is gone")}
		delete(z.replies, id)
	}
	for pid, ex := range z.exits {
		ex <- exitReport{lost: true}
		delete(z.exits, pid)
	}
	z.inflight = 0
	z.mu.Unlock()
	z.shutdown()
}

// onHello takes the zygote's first message (nil: it died first) and opens z.ready.
func (z *zygote) onHello(b []byte) {
	defer close(z.ready)
	os.RemoveAll(z.scriptDir)
	if b == nil {
		z.waitGone(2 * time.Second)
		msg := "it exited before it was ready"
		if out := z.output(); out != "" {
			msg += ": " + lastLine(out)
		}
		z.startErr = fmt.Errorf("warm ranks: %s %s", z.python, msg)
		return
	}
	if err := json.Unmarshal(b, &z.hello); err != nil || z.hello.T != "hello" {
		z.startErr = fmt.Errorf("warm ranks: the zygote said %q instead of hello", clipBytes(b, 80))
		return
	}
	if z.hello.Error != "" {
		z.startErr = fmt.Errorf("warm ranks: %s", z.hello.Error)
		return
	}
	if z.hello.PID != z.pid() {
		z.startErr = fmt.Errorf("warm ranks: the zygote says it is process %d, not %d", z.hello.PID, z.pid())
		return
	}
	z.stamps = append(z.stamps, stampOf(z.python))
	if z.hello.Executable != "" {
		z.stamps = append(z.stamps, stampOf(z.hello.Executable))
	}
	for _, f := range z.hello.Files {
		// The module's file, and the directory holding its package (site-packages): an
		// install or upgrade there changes it.
		z.stamps = append(z.stamps, stampOf(f))
		pkg := filepath.Dir(f)
		if filepath.Base(f) == "__init__.py" {
			pkg = filepath.Dir(pkg)
		}
		z.stamps = append(z.stamps, stampOf(pkg))
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// fit says why the zygote may not fork now ("" when it may).
func (z *zygote) fit() string {
	select {
	case <-z.ready:
		if z.startErr != nil {
			return z.startErr.Error()
		}
	default:
		return ""
	}
	z.mu.Lock()
	dead, retired, broken := z.dead, z.retired, z.brokenWhy
	z.mu.Unlock()
	switch {
	case dead:
		return "warm ranks: the zygote died" + outputNote(z.output())
	case broken != "":
		return broken
	case retired:
		return "warm ranks: the zygote was retired"
	}
	if why := z.worn(); why != "" {
		return why
	}
	for _, s := range z.stamps {
		if now := stampOf(s.path); now != s {
			return fmt.Sprintf("warm ranks: %s changed since the zygote imported it", s.path)
		}
	}
	return ""
}

func outputNote(out string) string {
	if out == "" {
		return ""
	}
	return ": " + lastLine(out)
}

// worn says whether the zygote reached its bounds.
func (z *zygote) worn() string {
	z.mu.Lock()
	forks := z.forks
	z.mu.Unlock()
	if forks >= z.maxForks {
		return fmt.Sprintf("warm ranks: the zygote forked %d ranks", forks)
	}
	if age := time.Since(z.born); age >= z.maxAge {
		return fmt.Sprintf("warm ranks: the zygote is %s old", age.Round(time.Second))
	}
	return ""
}

// broken: the zygote died or failed a request (as opposed to worn out or replaced).
func (z *zygote) broken() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.dead || z.brokenWhy != ""
}

func (z *zygote) markBroken(why string) {
	z.mu.Lock()
	if z.brokenWhy == "" {
		z.brokenWhy = why
	}
	z.mu.Unlock()
}

// retire takes the zygote out of service; it ends once its ranks have.
func (z *zygote) retire() {
	z.mu.Lock()
	z.retired = true
	idle := z.inflight == 0
	z.mu.Unlock()
	if idle {
		z.shutdown()
	}
}

// shutdown closes the socket: the zygote kills the ranks it still has and exits. A zygote
// that has not gone a few seconds later is killed.
func (z *zygote) shutdown() {
	z.closeOnce.Do(func() {
		z.conn.Close()
		go func() {
			if !z.waitGone(3 * time.Second) {
				_ = syscall.Kill(-z.pid(), syscall.SIGKILL)
				_ = syscall.Kill(z.pid(), syscall.SIGKILL)
			}
		}()
	})
}

func (z *zygote) waitGone(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-z.gone:
		return true
	case <-t.C:
		return false
	}
}

// fork asks the zygote for one rank. out becomes the rank's stdout and stderr; the caller
// closes its copy afterwards.
func (z *zygote) fork(argv, env []string, dir string, out *os.File) (int, <-chan exitReport, error) {
	z.sendMu.Lock()
	defer z.sendMu.Unlock()
	z.mu.Lock()
	if z.dead || z.retired && z.brokenWhy != "" {
		z.mu.Unlock()
		return 0, nil, errors.New("warm ranks: the zygote is gone")
	}
	z.nextID++
	id := z.nextID
	ch := make(chan forkReply, 1)
	z.replies[id] = ch
	z.mu.Unlock()
	drop := func() {
		z.mu.Lock()
		delete(z.replies, id)
		z.mu.Unlock()
	}
	msg, err := json.Marshal(forkRequest{T: "fork", ID: id, Argv: argv, Env: env, Cwd: dir})
	if err != nil {
		drop()
		return 0, nil, err
	}
	if len(msg) > maxRequest {
		drop()
		return 0, nil, errTooBig
	}
	var werr error
	rc, err := out.SyscallConn()
	if err != nil {
		drop()
		return 0, nil, err
	}
	if err := rc.Control(func(fd uintptr) {
		_, _, werr = z.conn.WriteMsgUnix(msg, syscall.UnixRights(int(fd)), nil)
	}); err != nil {
		werr = err
	}
	if werr != nil {
		drop()
		return 0, nil, fmt.Errorf("warm ranks: sending a request: %w", werr)
	}
	t := time.NewTimer(forkTimeout)
	defer t.Stop()
	var r forkReply
	select {
	case r = <-ch:
	case <-t.C:
		drop()
		return 0, nil, fmt.Errorf("warm ranks: no answer from the zygote in %s", forkTimeout)
	}
	if r.err != nil {
		return 0, nil, r.err
	}
	// The zygote is course code on a private socket; still, the pid it names must be its own
	// child leading its own group, since the records channel's peer check relies on it.
	if info, ok := readStat(r.pid, make([]byte, 0, 512)); ok && !info.zombie && (info.ppid != z.pid() || info.pgid != r.pid) {
		_ = syscall.Kill(r.pid, syscall.SIGKILL)
		return 0, nil, fmt.Errorf("warm ranks: process %d is not a rank of the zygote (parent %d, group %d)", r.pid, info.ppid, info.pgid)
	}
	return r.pid, r.exit, nil
}

// ForkSide starts a course-owned Python program that runs beside the ranks of s, such as a
// verifier (docs/protocol.md §4), from the warm pool in ctx: from the zygote the ranks of s
// are forked from, so one zygote serves both and neither retires the other. argv is the
// program (an interpreter and a script), env its whole environment (SideEnv), out its stdout
// and stderr (the caller closes its copy). The process leads its own process group; exit
// delivers its exit status once it ended (-1: killed or lost). ok is false when ctx has no
// pool, s's ranks could not be warm, or the zygote could not fork: the caller starts the
// program cold. The zygote imported torch with the ranks' settings: every variable of the
// ranks' environment that env lacks is added, so the program sees the settings its torch
// was imported with (one OpenMP thread per rank, for one).
func ForkSide(ctx context.Context, s *Spec, argv, env []string, dir string, out *os.File) (pid int, exit <-chan int, ok bool) {
	pool := warmFrom(ctx)
	if pool == nil || !warmEligible(s) || len(argv) < 2 || argv[0] != s.Argv[0] {
		return 0, nil, false
	}
	base, _ := rankBase(s, false)
	base.force() // as job.start does before it asks for the ranks' zygote
	key := zygoteEnv(base)
	child := newEnviron(env)
	for _, kv := range key {
		if k, v, ok := cutEnv(kv); ok && child.get(k) == "" {
			child.set(k, v)
		}
	}
	z := pool.acquire(ctx, s.Argv[0], key)
	if z == nil {
		return 0, nil, false
	}
	pid, rep, err := z.fork(argv, child.list(), dir, out)
	if err != nil {
		if !errors.Is(err, errTooBig) {
			pool.broke(z, err.Error())
		}
		return 0, nil, false
	}
	pool.forked(z)
	ch := make(chan int, 1)
	go func() {
		r := <-rep
		code := -1
		if !r.lost && r.ws.Exited() {
			code = r.ws.ExitStatus()
		}
		ch <- code
	}()
	return pid, ch, true
}

// forkRank starts rank r from the zygote, with its output on a fresh pipe like spawn.
func (j *job) forkRank(z *zygote, rank int, env []string, sk *sink) error {
	dir := j.spec.Dir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		dir = wd
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	pid, exit, err := z.fork(j.spec.Argv, env, dir, w)
	w.Close()
	if err != nil {
		r.Close()
		return err
	}
	p := &proc{rank: rank, pid: pid, sink: sk, out: r, read: make(chan struct{}), started: time.Now(), warm: true}
	j.procs = append(j.procs, p)
	j.tr.add(pid)
	go func() {
		defer close(p.read)
		splitLines(r, sk.line)
	}()
	go func() {
		rep := <-exit
		j.exits <- exitEvent{p: p, at: time.Now(), ws: rep.ws, lost: rep.lost}
	}()
	return nil
}

// startWarm starts the ranks from the pool where it can; it returns the ranks it started.
// A rank the zygote could not start is left to the caller (started cold).
func (j *job) startWarm(ctx context.Context, pool *WarmPool, base *environ, envs [][]string) []bool {
	started := make([]bool, len(envs))
	z := pool.acquire(ctx, j.spec.Argv[0], zygoteEnv(base))
	if z == nil {
		return started
	}
	for r, env := range envs {
		if err := j.forkRank(z, r, env, j.sinks[r]); err != nil {
			if !errors.Is(err, errTooBig) {
				pool.broke(z, err.Error())
			}
			break
		}
		started[r] = true
		j.warm++
		pool.forked(z)
	}
	return started
}
