// Command mgpu-learn teaches multi-GPU programming by doing: lessons, exercises that compile
// and run on real GPUs, and checks of their results and timings.
package main

import (
	"os"

	"github.com/mgpu-learn/mgpu-learn/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
