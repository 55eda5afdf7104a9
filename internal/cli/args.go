package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// explainArgs replaces cobra's argument-count errors ("accepts 1 arg(s), received 0") in c and
// every command below it with ones that name the arguments the command takes, from its Use
// line, and show its first example.
func explainArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageErrorf("%s", argsProblem(cmd, args))
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		explainArgs(sub)
	}
}

// argsProblem says what is wrong with args for cmd: too few (what it needs, with an example),
// or too many (what it takes).
func argsProblem(cmd *cobra.Command, args []string) string {
	required, optional := useArgs(cmd.Use)
	all := append(append([]string(nil), required...), optional...)
	// Main prefixes the message with the program's name: say the command without it.
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	switch {
	case len(args) < len(required):
		msg := fmt.Sprintf("%s needs %s", path, strings.Join(required, " "))
		if len(args) > 0 {
			msg += fmt.Sprintf(" (it got only %s)", quoteArgs(args))
		}
		if ex := firstExample(cmd); ex != "" {
			msg += "; for example: " + ex
		}
		return msg
	case len(all) == 0:
		return fmt.Sprintf("%s takes no arguments; it got %s", path, quoteArgs(args))
	default:
		return fmt.Sprintf("%s takes %s (%s); it got %d: %s", path, countArgs(len(required), len(all)),
			strings.Join(all, " "), len(args), quoteArgs(args))
	}
}

// useArgs splits a Use line ("create --db FILE NAME", "init [DIR]") into its required and
// optional arguments, leaving out the command's name and the flags shown with their values.
func useArgs(use string) (required, optional []string) {
	fields := strings.Fields(use)
	for i := 1; i < len(fields); i++ {
		f := fields[i]
		switch {
		case strings.HasPrefix(f, "-"):
			if i+1 < len(fields) && !strings.HasPrefix(fields[i+1], "-") && !strings.HasPrefix(fields[i+1], "[") && !strings.HasPrefix(fields[i+1], "<") {
				i++ // the flag's value
			}
		case strings.HasPrefix(f, "["):
			optional = append(optional, f)
		default:
			required = append(required, f)
		}
	}
	return required, optional
}

// countOf is "1 file", "2 files", "0 files".
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func countArgs(min, max int) string {
	n := func(k int) string {
		if k == 1 {
			return "one argument"
		}
		return fmt.Sprintf("%d arguments", k)
	}
	if min == max {
		return n(max)
	}
	return "at most " + n(max)
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// firstExample is the first line of cmd's examples without its comment, or "".
func firstExample(cmd *cobra.Command) string {
	line, _, _ := strings.Cut(strings.TrimSpace(cmd.Example), "\n")
	line, _, _ = strings.Cut(line, "#")
	return strings.TrimSpace(line)
}
