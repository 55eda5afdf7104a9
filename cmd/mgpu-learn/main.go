// Command mgpu-learn teaches multi-GPU programming by doing: lessons, exercises that compile
// and run on real GPUs, and checks of their results and timings.
package main

import (
	"fmt"
	"os"

	"github.com/mgpu-learn/mgpu-learn/internal/cli"
	"github.com/mgpu-learn/mgpu-learn/runtime/confine"
)

func main() {
	// This process will hold every check's seed and channel keys while learner code runs as
	// the same user: nobody without CAP_SYS_PTRACE may read its memory.
	if err := confine.ProtectMemory(); err != nil {
		fmt.Fprintf(os.Stderr, "mgpu-learn: warning: %v\n", err)
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
