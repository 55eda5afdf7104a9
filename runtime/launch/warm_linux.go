package launch

import "syscall"

const warmSupported = true

// zygoteAttr puts the zygote in a process group of its own (the terminal's ^C and a job's
// teardown never reach it) and has the kernel kill it when mgpu-learn dies.
func zygoteAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// zygoteSocketPair is the zygote's channel: datagrams keep requests whole, close-on-exec keeps
// it out of every other child.
func zygoteSocketPair() ([2]int, error) {
	return syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
}
