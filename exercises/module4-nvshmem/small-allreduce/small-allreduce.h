/*
 * small-allreduce.h — what you write for module4/small-allreduce (course-owned: do not edit).
 *
 * One process per GPU, each one NVSHMEM PE. The driver starts NVSHMEM, makes the data, calls
 * these functions on every PE, checks every element on every PE, and times your all-reduce
 * against ncclAllReduce on the same buffers.
 *
 * The algorithm asked for is the one-shot (push) all-reduce: every PE puts its whole input into
 * a slot of its own in every other PE's symmetric buffer, with a signal; every PE waits for the
 * signals of all the others and adds the npes blocks (its own input and the npes - 1 it
 * received) locally. One hop, one kernel: what it costs is latency, not bandwidth.
 */
#ifndef MODULE4_SMALL_ALLREDUCE_H
#define MODULE4_SMALL_ALLREDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The symmetric memory of the all-reduce, filled in by allreduce_setup. The driver checks that
 * both lie in NVSHMEM's symmetric heap (nvshmem_ptr) on every PE before the first call. */
typedef struct allreduce {
  float *slots;          /* where the other PEs' blocks land; symmetric */
  size_t slots_bytes;    /* its size in bytes */
  uint64_t *signals;     /* signal words the other PEs update; symmetric */
  size_t signals_count;  /* how many uint64_t */
  /* Yours, for anything you keep across calls (the driver never reads or writes them). */
  void *scratch;
  unsigned long long calls;
} allreduce;

/* Collective: every PE calls it once, after NVSHMEM has started, with the same max_n (the
 * largest n of the run, in floats). Allocate and initialise what the all-reduce needs. */
void allreduce_setup(allreduce *ar, size_t max_n);

/* out[i] = the sum over all PEs of their in[i], for i < n, on every PE. in and out are
 * ordinary device memory (not symmetric), n floats each, distinct; do not write to in.
 * Collective: every PE calls it with the same n, the same number of times.
 * Enqueue on `stream`, after the work already queued there, and return without waiting; the
 * driver reads out right behind your work on `stream` — and sometimes queues the next call
 * first. Calls come back to back, with different in and out each time, and PEs drift apart
 * (one may be a whole call ahead of another): a signal or a block left over from an earlier
 * call must never be taken for this call's. */
void allreduce_small(allreduce *ar, const float *in, float *out, size_t n, cudaStream_t stream);

/* Collective: releases what allreduce_setup allocated. */
void allreduce_teardown(allreduce *ar);

#ifdef __cplusplus
}
#endif

#endif /* MODULE4_SMALL_ALLREDUCE_H */
