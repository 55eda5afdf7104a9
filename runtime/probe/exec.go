package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// maxOutput bounds what one probe command may print (ompi_info --all is about half a megabyte).
const maxOutput = 8 << 20

// capped is an io.Writer that keeps the first max bytes and drops the rest.
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// errTimeout marks a command that outlived its time limit.
var errTimeout = errors.New("timed out")

// command is one external program to run as a probe.
type command struct {
	path    string
	args    []string
	timeout time.Duration
	env     []string // added to the environment (KEY=VALUE)
}

// run starts c and waits for it at most c.timeout. The program and anything it started are
// killed at the deadline (the process group, where the platform has them) and its pipes are
// abandoned shortly after, so a child that keeps them open cannot hold the probe.
// The error is nil, errTimeout (wrapped), or describes a failed start or a non-zero exit.
func run(ctx context.Context, c command) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.path, c.args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	cmd.Env = append(cmd.Env, c.env...)
	cmd.Stdin = nil
	var out, errOut = &capped{max: maxOutput}, &capped{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.WaitDelay = 200 * time.Millisecond
	ownGroup(cmd)
	err = cmd.Run()
	stdout, stderr = out.buf.String(), errOut.buf.String()
	if ctx.Err() == context.DeadlineExceeded {
		return stdout, stderr, fmt.Errorf("%w after %s", errTimeout, c.timeout)
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			msg := firstLine(stderr)
			if msg == "" {
				msg = firstLine(stdout)
			}
			if msg != "" {
				return stdout, stderr, fmt.Errorf("%s: %s", exit, msg)
			}
		}
		return stdout, stderr, err
	}
	return stdout, stderr, nil
}

// firstLine is the first non-blank line of s, trimmed and bounded.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = l[:200] + "..."
			}
			return l
		}
	}
	return ""
}

// describe names a command for a problem report: "nvidia-smi topo -m".
func describe(c command) string {
	name := c.path
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return strings.TrimSpace(name + " " + strings.Join(c.args, " "))
}
