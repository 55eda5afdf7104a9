//go:build !linux

package launch

import "syscall"

// Warm ranks need Linux: SOCK_SEQPACKET socket pairs, SO_PEERCRED and the parent-death
// signal. Elsewhere every rank starts cold.
const warmSupported = false

func zygoteAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func zygoteSocketPair() ([2]int, error) { return [2]int{-1, -1}, syscall.ENOTSUP }
