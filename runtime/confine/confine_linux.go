//go:build linux

package confine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Every right that changes the file system. Reading, listing and running are not handled, so
// they stay allowed everywhere; so do device ioctls (the GPU's driver needs them).
const writeV1 = unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
	unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
	unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
	unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
	unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_MAKE_SYM

func abi() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// handled is what the ruleset restricts on a kernel of Landlock ABI a: linking or renaming
// across directories (2) and truncating (3) where the kernel knows them.
func handled(a int) (dirs, files uint64) {
	dirs, files = writeV1, unix.LANDLOCK_ACCESS_FS_WRITE_FILE
	if a >= 2 {
		dirs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if a >= 3 {
		dirs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
		files |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	return dirs, files
}

func probe() Status {
	a := abi()
	if a == 0 {
		return Status{Why: "the kernel offers no Landlock (Linux 5.13 or later, with Landlock among its security modules)"}
	}
	return Status{ABI: a, Applied: true}
}

// ruleset builds a Landlock ruleset that allows every change of the file system except
// beneath r.Protect (but for r.Writable). Landlock only grants, and a grant covers everything
// beneath the granted directory, so the grants go to every entry next to the path down to a
// protected directory ("/" lists /bin, /etc, ..., /work; /work lists ...), never to the
// directories on that path themselves: nothing new can be made directly in them either.
func ruleset(r *Rules, a int) (int, error) {
	dirs, files := handled(a)
	// The ABI 1 layout (only the file-system rights): the kernel takes a shorter attribute,
	// and nothing here restricts the network or scopes.
	attr := struct{ handledAccessFS uint64 }{dirs}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return -1, fmt.Errorf("confine: landlock_create_ruleset: %w", e)
	}
	grant := func(path string, allowed uint64) error {
		pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil // gone, or not ours to open: it stays ungranted
		}
		defer unix.Close(pfd)
		pb := unix.LandlockPathBeneathAttr{Allowed_access: allowed, Parent_fd: int32(pfd)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&pb)), 0, 0, 0); e != 0 {
			return fmt.Errorf("confine: landlock_add_rule %s: %w", path, e)
		}
		return nil
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil // unreadable: nothing beneath it is granted
		}
		for _, ent := range ents {
			p := filepath.Join(dir, ent.Name())
			switch {
			case beneathAny(p, r.Protect):
				// protected: only the writable exceptions, below
			case ancestorOfAny(p, r.Protect):
				if err := walk(p); err != nil {
					return err
				}
			case ent.Type()&os.ModeSymlink != 0:
				// A link needs no grant: Landlock judges the file it leads to where that lies.
			case ent.IsDir():
				if err := grant(p, dirs); err != nil {
					return err
				}
			default:
				if err := grant(p, files); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		unix.Close(int(fd))
		return -1, err
	}
	for _, w := range r.Writable {
		if err := grant(w, dirs); err != nil {
			unix.Close(int(fd))
			return -1, err
		}
	}
	return int(fd), nil
}

func ancestorOfAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if d != p && within(d, p) {
			return true
		}
	}
	return false
}

func start(cmd *exec.Cmd, r *Rules) (Status, error) {
	a := abi()
	if a == 0 {
		return probe(), cmd.Start()
	}
	fd, err := ruleset(r, a)
	if err != nil {
		return Status{ABI: a, Why: err.Error()}, cmd.Start()
	}
	defer unix.Close(fd)
	done := make(chan error, 1)
	go func() {
		// This goroutine keeps its thread and never gives it back: the thread's credentials
		// carry the restriction, and the runtime ends a thread whose goroutine exits locked.
		runtime.LockOSThread()
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			done <- fmt.Errorf("confine: no_new_privs: %w", err)
			return
		}
		if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); e != 0 {
			done <- fmt.Errorf("confine: landlock_restrict_self: %w", e)
			return
		}
		done <- cmd.Start() // forks from this thread: the child inherits the restriction
	}()
	if err := <-done; err != nil {
		return Status{ABI: a}, err
	}
	return Status{ABI: a, Applied: true}, nil
}

func protectMemory() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	return nil
}
