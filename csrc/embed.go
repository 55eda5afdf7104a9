// Package csrc holds the C/CUDA harness that every exercise driver links (docs/harness.md).
// The sources are embedded so that builds can write them next to a learner's code.
package csrc

import "embed"

// FS holds mgpu.h, mgpu_internal.h and the harness sources (mgpu_core.c, mgpu_cuda.cu,
// mgpu_nccl.cu, mgpu_mpi.c, mgpu_fd.c, mgpu_cudrv.cu), the Python twin python/mgpu_harness.py and
// python/mgpu_zygote.py, which warm Python ranks are forked from (runtime/launch/warm.go).
//
//go:embed *.h *.c *.cu python/mgpu_harness.py python/mgpu_policy.py python/mgpu_zygote.py
var FS embed.FS
