//go:build !unix

package probe

import "os/exec"

// ownGroup leaves the command as it is where there are no process groups.
func ownGroup(cmd *exec.Cmd) {}
