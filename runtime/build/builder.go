package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Builder compiles and links exercises through a content-addressed cache. It is safe for
// concurrent use, also by several processes sharing one cache directory.
type Builder struct {
	cache *cache
	// Jobs bounds the compilers running at once for one Build (default: the CPUs, at most 8).
	Jobs int
}

// DefaultCacheDir is $MGPU_LEARN_CACHE/build when that is set, else
// <user cache dir>/mgpu-learn/build.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("MGPU_LEARN_CACHE"); d != "" {
		return filepath.Join(d, "build"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("build: no cache directory: %w", err)
	}
	return filepath.Join(d, "mgpu-learn", "build"), nil
}

// NewBuilder returns a Builder caching in dir; an empty dir means DefaultCacheDir (or, when
// there is no user cache directory, one under the system's temporary directory).
func NewBuilder(dir string) *Builder {
	if dir == "" {
		var err error
		if dir, err = DefaultCacheDir(); err != nil {
			dir = filepath.Join(os.TempDir(), "mgpu-learn-build")
		}
	}
	return &Builder{cache: &cache{dir: dir, now: time.Now}}
}

// Dir is the cache directory.
func (b *Builder) Dir() string { return b.cache.dir }

// object is one source on its way to an object file.
type object struct {
	src     Source
	abs     string
	headers []string // absolute include directories: the source's own, else the request's
	key     key
	path    string // in the cache, once there
	pp      string // learner sources: the preprocessed learner lines, in the cache (preprocess.go)
	ptx     string // learner .cu sources: the PTX nvcc made of them, in the cache (preprocess.go)
	log     string // stored form (placeholders)
	cached  bool
	failed  bool
	display pathMap // stored form -> what the learner sees
}

// Build compiles every source to its own object (reusing cached objects), links them, and
// reports the outcome. A compile or link error is a Result with OK false; the error is for
// failures of the build machinery itself (no compiler, unreadable source, cache I/O).
func (b *Builder) Build(ctx context.Context, req Request) (*Result, error) {
	start := time.Now()
	if len(req.Sources) == 0 {
		return nil, errors.New("build: no sources")
	}
	p, err := newPlan(&req)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(b.cache.dir, 0o755); err != nil {
		return nil, fmt.Errorf("build: cache: %w", err)
	}
	_ = b.cache.maybeTrim() // best effort: a failed trim never fails a build

	objs, err := b.objectKeys(&req, p)
	if err != nil {
		return nil, err
	}
	res := &Result{Objects: map[string]string{}, Preprocessed: map[string]string{}, PTX: map[string]string{}}
	var misses []*object
	for _, o := range objs {
		if !req.Rebuild {
			if path, log, ok := b.cache.get(o.key, ".o"); ok {
				pp, _, ppOK := b.cache.get(ppKey(o.key), ".pp")
				ptx, _, ptxOK := b.cache.get(ptxKey(o.key), ".ptx")
				if p.keepArgs(o.abs, "") == nil {
					ptxOK = true // nvcc kept no PTX of this source: there is none to have
				}
				if o.src.Role != RoleLearner || ppOK && ptxOK {
					o.path, o.log, o.pp, o.ptx, o.cached = path, log, pp, ptx, true
					continue
				}
			}
		}
		misses = append(misses, o)
	}

	work, err := b.cache.workDir()
	if err != nil {
		return nil, fmt.Errorf("build: cache: %w", err)
	}
	defer os.RemoveAll(work)
	if err := b.compileAll(ctx, p, misses, work); err != nil {
		return nil, err
	}
	res.Compiled = len(misses)

	var log strings.Builder
	ok := true
	for _, o := range objs {
		log.WriteString(o.display.apply(o.log))
		if o.failed {
			ok = false
			continue
		}
		if o.src.Role == RoleLearner {
			res.Objects[o.src.Show] = o.path
			res.Preprocessed[o.src.Show] = o.pp
			if o.ptx != "" {
				res.PTX[o.src.Show] = o.ptx
			}
		} else {
			res.CourseObjects = append(res.CourseObjects, o.path)
		}
	}
	if ok {
		linked, linkLog, cached, err := b.link(ctx, &req, p, objs, work)
		if err != nil {
			return nil, err
		}
		log.WriteString(linkLog)
		res.Binary = linked
		ok = linked != ""
		res.Cached = cached && len(misses) == 0
	}
	res.OK = ok
	res.Log = log.String()
	res.Diagnostics = parseDiagnostics(res.Log)
	res.RuntimeEnv = runtimeEnv(p.runtimeDirs)
	res.Duration = time.Since(start)
	return res, nil
}

// objectKeys computes every source's action key: the compiler's identity, the options with
// include directories named by position, the include directories' contents, and the
// source's own bytes, directory contents and shown name. No absolute source path enters a
// key, so the same files elsewhere hit the same entries.
func (b *Builder) objectKeys(req *Request, p *plan) ([]*object, error) {
	sources := map[string]bool{}
	var objs []*object
	for _, s := range req.Sources {
		abs, err := filepath.Abs(s.Path)
		if err != nil {
			return nil, err
		}
		if s.Show == "" {
			s.Show = s.Path
		}
		sources[abs] = true
		objs = append(objs, &object{src: s, abs: abs})
	}
	trees := map[string]string{}
	tree := func(dir string) (string, error) {
		if d, ok := trees[dir]; ok {
			return d, nil
		}
		d, err := treeDigest(dir, sources)
		if err != nil {
			return "", fmt.Errorf("build: hashing headers: %w", err)
		}
		trees[dir] = d
		return d, nil
	}
	for _, o := range objs {
		o.headers = p.headers
		if o.src.Headers != nil {
			o.headers = nil
			for _, h := range o.src.Headers {
				abs, err := filepath.Abs(h)
				if err != nil {
					return nil, err
				}
				o.headers = append(o.headers, abs)
			}
		}
		if len(o.src.Flags) > 0 && o.src.Role == RoleLearner {
			return nil, fmt.Errorf("build: source %s: a learner source takes the request's flags only", o.src.Show)
		}
		var headerDigests []string
		for _, h := range o.headers {
			d, err := tree(h)
			if err != nil {
				return nil, err
			}
			headerDigests = append(headerDigests, d)
		}
		sum, err := fileDigest(o.abs)
		if err != nil {
			return nil, fmt.Errorf("build: source %s: %w", o.src.Show, err)
		}
		dir := filepath.Dir(o.abs)
		dirDigest, err := tree(dir)
		if err != nil {
			return nil, err
		}
		h := newHasher("compile")
		h.add("kind", p.kind)
		h.add("tool", p.toolID...)
		h.add("args", p.keyArgs(o.headers, o.src.Flags)...)
		h.add("language", p.language(o.abs)...)
		h.add("headers", headerDigests...)
		h.add("libs", p.libPrints...)
		h.add("source", sum, filepath.Base(o.abs), o.src.Show)
		h.add("source dir", dirDigest)
		o.key = h.sum()
		o.display = displayMap(o, o.headers)
	}
	return objs, nil
}

// Placeholders for paths in stored logs: a cache entry may be used from another place.
const (
	phSource = "\x01SRC\x01"
	phDir    = "\x01DIR\x01"
	phOut    = "\x01OUT\x01"
)

func phHeader(i int) string { return "\x01H" + strconv.Itoa(i) + "\x01" }
func phObject(i int) string { return "\x01O" + strconv.Itoa(i) + "\x01" }

// storeMap turns a compile log's real paths into placeholders.
func storeMap(o *object, headers []string, out string) pathMap {
	var m pathMap
	m.add(out, phOut)
	m.add(o.abs, phSource)
	m.add(filepath.Dir(o.abs)+"/", phDir+"/")
	for i, h := range headers {
		m.add(h+"/", phHeader(i)+"/")
	}
	return m
}

// displayMap turns placeholders into what the learner sees: the source's Show path, the
// directory of Show for files next to it, and the real paths of include directories.
func displayMap(o *object, headers []string) pathMap {
	var m pathMap
	m.add(phOut, filepath.Base(o.src.Show)+".o")
	m.add(phSource, o.src.Show)
	dir := filepath.Dir(o.abs) + "/"
	if filepath.Base(o.src.Show) == filepath.Base(o.abs) {
		if d := filepath.Dir(o.src.Show); d == "." {
			dir = ""
		} else {
			dir = d + "/"
		}
	}
	m.add(phDir+"/", dir)
	for i, h := range headers {
		m.add(phHeader(i)+"/", h+"/")
	}
	return m
}

// compileAll compiles the objects not in the cache, a few at a time.
func (b *Builder) compileAll(ctx context.Context, p *plan, objs []*object, work string) error {
	jobs := b.Jobs
	if jobs <= 0 {
		jobs = min(runtime.NumCPU(), 8)
	}
	sem := make(chan struct{}, jobs)
	var wg sync.WaitGroup
	errs := make([]error, len(objs))
	for i, o := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = b.compile(ctx, p, o, filepath.Join(work, strconv.Itoa(i)+".o"))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (b *Builder) compile(ctx context.Context, p *plan, o *object, out string) error {
	args := p.compileArgs(o, out)
	keep := ""
	if o.src.Role == RoleLearner {
		if ka := p.keepArgs(o.abs, out+".keep"); ka != nil {
			keep = out + ".keep"
			if err := os.Mkdir(keep, 0o755); err != nil {
				return fmt.Errorf("build: %w", err)
			}
			args = append(args, ka...)
		}
	}
	output, failed, err := run(ctx, p.compiler, args)
	if err != nil {
		return fmt.Errorf("build: compiling %s: %w", o.src.Show, err)
	}
	o.log = storeMap(o, o.headers, out).apply(output)
	if failed {
		o.failed = true
		return nil
	}
	if o.src.Role == RoleLearner {
		if err := b.preprocessed(ctx, p, o, out, keep); err != nil {
			return err
		}
	}
	if o.path, err = b.cache.put(o.key, ".o", out, o.log); err != nil {
		return fmt.Errorf("build: cache: %w", err)
	}
	return nil
}

// link links the objects, or finds the program in the cache. It returns the program's path
// ("" when the link failed) and the link log as the learner sees it.
func (b *Builder) link(ctx context.Context, req *Request, p *plan, objs []*object, work string) (string, string, bool, error) {
	h := newHasher("link")
	h.add("kind", p.kind)
	h.add("tool", p.toolID...)
	h.add("args", p.link...)
	h.add("libs", p.libPrints...)
	var display pathMap
	paths := make([]string, len(objs))
	for i, o := range objs {
		h.add("object", o.key.String(), o.src.Show)
		paths[i] = o.path
		display.add(phObject(i), o.src.Show+".o")
	}
	display.add(phOut, "program")
	k := h.sum()
	if !req.Rebuild {
		if path, log, ok := b.cache.get(k, ""); ok {
			return path, display.apply(log), true, nil
		}
	}
	out := filepath.Join(work, "program")
	output, failed, err := run(ctx, p.compiler, p.linkArgs(paths, out))
	if err != nil {
		return "", "", false, fmt.Errorf("build: linking: %w", err)
	}
	var store pathMap
	store.add(out, phOut)
	for i, path := range paths {
		store.add(path, phObject(i))
	}
	log := store.apply(output)
	if failed {
		return "", display.apply(log), false, nil
	}
	path, err := b.cache.put(k, "", out, log)
	if err != nil {
		return "", "", false, fmt.Errorf("build: cache: %w", err)
	}
	return path, display.apply(log), false, nil
}

// run runs a compiler in a process group of its own (nvcc starts cicc, ptxas, gcc: a
// cancel must stop them all) and returns its combined output and whether it failed. The
// error is for compilers that cannot run or die of a signal.
func run(ctx context.Context, bin string, args []string) (string, bool, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", false, ctx.Err()
	}
	if err == nil {
		return out.String(), false, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "", false, fmt.Errorf("%s died of signal %v\n%s", filepath.Base(bin), ws.Signal(), out.String())
		}
		return out.String(), true, nil
	}
	return "", false, err
}

// runtimeEnv is what a built program needs to find its libraries: LD_LIBRARY_PATH with the
// libraries' runtime directories before the current value.
func runtimeEnv(dirs []string) []string {
	seen := map[string]bool{}
	var list []string
	for _, d := range dirs {
		if d != "" && !seen[d] {
			seen[d] = true
			list = append(list, d)
		}
	}
	if len(list) == 0 {
		return nil
	}
	if cur := os.Getenv("LD_LIBRARY_PATH"); cur != "" {
		list = append(list, cur)
	}
	return []string{"LD_LIBRARY_PATH=" + strings.Join(list, ":")}
}

// lookPath finds a program and returns its absolute path.
func lookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", err
	}
	return filepath.Abs(path)
}
