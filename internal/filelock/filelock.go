// Package filelock is an exclusive lock between processes on a file (flock), for work that one
// process at a time should do: a workshop client's sending, a probe of the machine.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Lock takes an exclusive flock on name (created, with its folder, when missing), waiting up
// to wait (0: one try) or until ctx ends. ok is false when another process still holds it.
func Lock(ctx context.Context, name string, wait time.Duration) (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(name), 0o700); err == nil {
			f, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
		}
	}
	if err != nil {
		return nil, false, err
	}
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, true, nil
		}
		if err != syscall.EWOULDBLOCK && err != syscall.EINTR {
			f.Close()
			return nil, false, fmt.Errorf("locking %s: %w", name, err)
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			f.Close()
			return nil, false, nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}
