package launch

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// forcedEnv is set in every child environment, overriding any other value: NVLink multicast
// must never be used on the machines this course runs on.
var forcedEnv = [][2]string{
	{"NCCL_NVLS_ENABLE", "0"},
	{"NVSHMEM_DISABLE_NVLS", "1"},
	{"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"},
}

// rankVars are the per-rank variables a launcher sets itself; inherited values are dropped
// when another program (mpirun, torchrun) assigns the ranks.
var rankVars = []string{
	"MGPU_RANK", "MGPU_WORLD_SIZE", "MGPU_LOCAL_RANK", "MGPU_LOCAL_WORLD_SIZE",
	"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
	"OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE",
}

// environ is an ordered environment where a later set replaces an earlier value.
type environ struct {
	keys []string
	vals map[string]string
}

func newEnviron(base []string) *environ {
	e := &environ{vals: map[string]string{}}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		e.set(k, v)
	}
	return e
}

func (e *environ) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

func (e *environ) unset(k string) {
	if _, ok := e.vals[k]; !ok {
		return
	}
	delete(e.vals, k)
	for i, key := range e.keys {
		if key == k {
			e.keys = append(e.keys[:i], e.keys[i+1:]...)
			break
		}
	}
}

func (e *environ) get(k string) string { return e.vals[k] }

func (e *environ) clone() *environ {
	c := &environ{keys: append([]string(nil), e.keys...), vals: make(map[string]string, len(e.vals))}
	for k, v := range e.vals {
		c.vals[k] = v
	}
	return c
}

func (e *environ) list() []string {
	out := make([]string, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

// force sets the variables no launch may go without.
func (e *environ) force() {
	for _, kv := range forcedEnv {
		e.set(kv[0], kv[1])
	}
}

// SideEnv is the environment of a course-owned process that runs beside rank `rank` of a
// `world`-rank job on this host, such as its verifier (docs/protocol.md §4): this process's
// environment without any launcher's rank variables, then extra, then the protocol's rank
// variables and, last, the variables no child may go without (forcedEnv).
func SideEnv(extra []string, rank, world int) []string {
	e := newEnviron(os.Environ())
	for _, k := range rankVars {
		e.unset(k)
	}
	for _, kv := range extra {
		if k, v, ok := cutEnv(kv); ok {
			e.set(k, v)
		}
	}
	r, w := strconv.Itoa(rank), strconv.Itoa(world)
	for _, kv := range [][2]string{
		{"MGPU_RANK", r}, {"MGPU_WORLD_SIZE", w}, {"MGPU_LOCAL_RANK", r}, {"MGPU_LOCAL_WORLD_SIZE", w},
	} {
		e.set(kv[0], kv[1])
	}
	e.force()
	return e.list()
}

// setRank sets the protocol's rank variables and torch's names for one rank on one host.
func (e *environ) setRank(rank, world int, port string) {
	r, w := strconv.Itoa(rank), strconv.Itoa(world)
	for _, kv := range [][2]string{
		{"MGPU_RANK", r}, {"MGPU_WORLD_SIZE", w}, {"MGPU_LOCAL_RANK", r}, {"MGPU_LOCAL_WORLD_SIZE", w},
		{"RANK", r}, {"WORLD_SIZE", w}, {"LOCAL_RANK", r}, {"LOCAL_WORLD_SIZE", w},
		{"GROUP_RANK", "0"}, {"ROLE_RANK", r},
		{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port},
	} {
		e.set(kv[0], kv[1])
	}
}

// prependPath puts dir in front of the list variable k.
func (e *environ) prependPath(k, dir string) {
	if old := e.get(k); old != "" {
		e.set(k, dir+":"+old)
	} else {
		e.set(k, dir)
	}
}

// freePort asks the kernel for a TCP port on the loopback that is free right now.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT", syscall.SIGALRM: "SIGALRM", syscall.SIGBUS: "SIGBUS",
	syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT", syscall.SIGFPE: "SIGFPE",
	syscall.SIGHUP: "SIGHUP", syscall.SIGILL: "SIGILL", syscall.SIGINT: "SIGINT",
	syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE", syscall.SIGPROF: "SIGPROF",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGSEGV: "SIGSEGV", syscall.SIGSTOP: "SIGSTOP",
	syscall.SIGSYS: "SIGSYS", syscall.SIGTERM: "SIGTERM", syscall.SIGTRAP: "SIGTRAP",
	syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN", syscall.SIGTTOU: "SIGTTOU",
	syscall.SIGURG: "SIGURG", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGWINCH: "SIGWINCH", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ",
}

// signalName returns "SIGSEGV" for 11 and so on ("SIG42" for ones without a name).
func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}
