/*
 * pingpong.h — the function you write for module2/pingpong (course-owned: do not edit).
 *
 * One process per GPU, started by mpirun; the driver owns main(), MPI_Init and the buffers.
 * Ranks pair up: (0, 1), (2, 3), ... With an odd number of ranks the last one has no partner.
 */
#ifndef MODULE2_PINGPONG_H
#define MODULE2_PINGPONG_H

#include <stddef.h>

#include <mpi.h>
#include <cuda_runtime.h>

#include "mgpu.h"

/* What your ping-pong measured, on this rank. */
typedef struct pp_stats {
  double one_way_us; /* half the average round trip, in microseconds */
  double gbps;       /* bytes / one_way time, in GB/s (1 GB = 1e9 bytes) */
} pp_stats;

#ifdef __cplusplus
extern "C" {
#endif

/* Yours. `reps` round trips of `bytes` bytes between this rank and its partner, over `comm`
 * (the driver's duplicate of MPI_COMM_WORLD; errors are returned, so wrap calls in MGPU_MPI).
 * One round trip: the even rank of the pair sends `bytes` bytes from its `send` into the odd
 * rank's `recv`; then the odd rank sends `bytes` bytes from ITS `send` into the even rank's
 * `recv`. A rank without a partner returns {0, 0} at once and touches nothing.
 *
 * `send` and `recv` are device pointers on this rank's GPU; hand them to MPI as they are (the
 * MPI is CUDA-aware). `send` is input only. The driver fills `send` with a kernel queued on
 * `stream` just before the call: it may not have run yet when you are called.
 *
 * Return the figures you measured with MPI_Wtime over the `reps` round trips (not counting
 * anything before the first send): one_way_us = elapsed / reps / 2, gbps = bytes / one_way.
 * When you return, the bytes your partner sent must be in `recv`. */
pp_stats pingpong(const void *send, void *recv, size_t bytes, int reps, cudaStream_t stream,
                  MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* MODULE2_PINGPONG_H */
