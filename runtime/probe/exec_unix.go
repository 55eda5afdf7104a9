//go:build unix

package probe

import (
	"os/exec"
	"syscall"
)

// ownGroup puts the command in its own process group and makes cancellation kill the group,
// so that a probe script's children (a hung `sleep`) die with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return cmd.Process.Kill()
	}
}
