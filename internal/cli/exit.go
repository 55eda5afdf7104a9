package cli

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes, decided here and nowhere else (main calls os.Exit with what Main returns).
const (
	ExitPassed       = 0 // every check passed (or the command did its job)
	ExitFailed       = 1 // a check failed: the learner's code
	ExitUsage        = 2 // bad command line, unknown exercise, no workspace
	ExitUnsupported  = 3 // this machine can't run it (no GPU, missing library)
	ExitRunner       = 4 // mgpu-learn itself failed: not the learner's fault
	ExitInconclusive = 5 // the timing was too noisy to judge; run it again
)

const exitCodesHelp = `Exit codes:
  0  passed (or the command did its job)
  1  a check failed: something in your code
  2  usage error: bad arguments, unknown exercise, no workspace
  3  this machine can't run it (no GPU, a missing library): see 'mgpu-learn doctor'
  4  mgpu-learn itself failed: not your fault; please report it
  5  inconclusive: the machine was too noisy to judge the timing; run the check again`

// exitError carries an exit code with its error.
type exitError struct {
	code int
	err  error
	// complete: the message says what happened and what to do, and is not about how the
	// command was typed (no workspace, a locked solution, a taken name, a server out of
	// reach); Main adds neither its pointer to --help nor its line on whose fault it is.
	complete bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// stateErrorf is exit code 2 for a command typed right that cannot go ahead as things are (no
// workspace, a solution still locked, a class name taken): the message says what to do, and
// Main adds no pointer to --help.
func stateErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...), complete: true}
}

// completeErrorf ends a command with code and a message that says all there is to say.
func completeErrorf(code int, format string, args ...any) error {
	return &exitError{code: code, err: fmt.Errorf(format, args...), complete: true}
}

func runnerErrorf(format string, args ...any) error {
	return &exitError{code: ExitRunner, err: fmt.Errorf(format, args...)}
}

// silentExit ends the command with a code after it printed its own report.
func silentExit(code int) error { return &exitError{code: code, err: errSilent} }

var errSilent = errors.New("")

// isComplete reports whether err's message needs nothing from Main (see exitError.complete).
func isComplete(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.complete
}

// wantsHelp reports whether err is a usage error about the command line itself, which Main
// follows with a pointer to the command's --help.
func wantsHelp(err error) bool {
	return exitCode(err) == ExitUsage && !isComplete(err) && !strings.Contains(err.Error(), "--help")
}

// exitCode maps an error returned by a command to the process exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitPassed
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Cobra's own argument and flag errors are usage errors.
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "requires at most", "invalid argument", "flag needs an argument", "required flag"} {
		if strings.Contains(msg, p) {
			return ExitUsage
		}
	}
	return ExitRunner
}
