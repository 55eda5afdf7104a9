/*
 * nccl_dev.h: the function module6/nccl-device asks you to write (course-owned: the driver
 * includes it too, so do not change it).
 *
 * One process per GPU. The driver has made an NCCL communicator, allocated one buffer per rank
 * with ncclMemAlloc, registered it on every rank as a symmetric window
 * (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC) and created a device communicator
 * (ncclDevCommCreate) with ND_MAX_BLOCKS LSA barriers and no multimem. Everything your kernel
 * needs travels in nd_args.
 *
 * Include order matters: nccl.h before mgpu.h turns on MGPU_NCCL(call).
 */
#ifndef MODULE6_NCCL_DEV_H
#define MODULE6_NCCL_DEV_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include "mgpu.h"

/* The device communicator holds this many LSA barriers (indices 0 .. ND_MAX_BLOCKS-1): launch
 * at most this many blocks, so that every block can own one. */
#define ND_MAX_BLOCKS 64

typedef struct nd_args {
  /* The host communicator, for questions such as ncclCommCount. Its collectives are the
   * baseline of this exercise and may not be called (the policy stage refuses them). */
  ncclComm_t comm;
  /* The device communicator: pass it to your kernel by value. dev.lsaBarrier is the handle of
   * its ND_MAX_BLOCKS LSA barriers. */
  ncclDevComm dev;
  /* The window: the same registered buffer on every rank of the LSA team. Every rank's input
   * lies at byte offset in_offset of its own buffer. */
  ncclWindow_t win;
  size_t in_offset;
  /* This rank's input as an ordinary device pointer (the same bytes as offset in_offset of
   * its own buffer). Read-only for you: the driver fills it before each call. */
  const float *in;
  /* This rank's result, n floats outside the window: device memory, except on the iteration's
   * "late" rank, where it is pinned host memory mapped for the GPU (stores to it cross PCIe,
   * so that rank's kernel runs longer than the others'). Plain stores work for both. */
  float *out;
  size_t n;
  /* The ranks to reduce over; this rank is team.rank of team.nRanks. Team rank p's input is at
   * ncclGetPeerPointer(win, in_offset, team, p). Most calls get the whole LSA team (every
   * rank); some get a team of one rank, whose result is its own input. */
  ncclTeam_t team;
  /* = ND_MAX_BLOCKS. */
  int max_blocks;
} nd_args;

#ifdef __cplusplus
extern "C" {
#endif

/* out[i] = the sum over the team's ranks p of their input[i], for every i < n, on every rank of
 * the team. Enqueue one kernel on `stream` and return without waiting: the driver reads `out`,
 * and then writes new data into this rank's input, on the same stream right after your call.
 * Every rank of the team calls this at the same time with the same n and team.nRanks; launch
 * the same grid on every rank (block b's LSA barrier meets block b of every peer). */
void allreduce_device(const nd_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE6_NCCL_DEV_H */
