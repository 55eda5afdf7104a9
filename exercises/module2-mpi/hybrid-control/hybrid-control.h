/*
 * hybrid-control.h — module2/hybrid-control (course-owned: do not edit).
 *
 * MPI for control, NCCL for data. Every step each rank produces a message on its GPU whose
 * LENGTH is decided on the GPU too, by a kernel, and is different every step and on every
 * rank. The messages go round a ring: each rank sends its message to rank (rank + 1) % world
 * and receives the message of rank (rank - 1 + world) % world. NCCL needs both ends of a
 * transfer to agree on its size, so before the data moves the ranks agree on one count for the
 * step, the largest of their counts (shorter messages are padded with zeros, so sending more
 * than a rank's own count is harmless). That agreement is a few bytes of control: MPI's job.
 *
 * ONE STEP (hybrid_step, yours):
 *   1. hyb_produce(h, step, stream): a course kernel on `stream` writes this step's message
 *      into h->send (entries 0 .. count-1; zeros from count to h->cap) and its length into
 *      *h->count_dev, on the device. It may take a while.
 *   2. the count to the host, once the kernel has written it;
 *   3. MPI agrees on the step's count: the maximum over all ranks;
 *   4. NCCL moves `agreed` floats of h->send to the next rank's h->recv, and this rank's h->recv
 *      receives the previous rank's, on `stream` (one group of ncclSend and ncclRecv);
 *   5. hyb_consume(h, agreed, stream): a course kernel on `stream` adds h->recv[0 .. agreed-1]
 *      to this rank's running total (the driver checks it at the end, exactly).
 *   Return `agreed`: the driver checks it against the largest count of the step.
 *   A step whose agreed count is 0 moves nothing (skipping the NCCL calls is fine).
 *
 * THE RULES
 *   - MPI carries only control values from host memory: the driver watches the buffers handed
 *     to MPI and fails the case when one is device (or managed) memory.
 *   - The data travels by NCCL, on `stream`, the same stream as the kernels: NCCL calls queued
 *     there are ordered after hyb_produce and before hyb_consume without any synchronization.
 *   - `stream` is a non-blocking stream. Work on it is not finished until you wait for it.
 */
#ifndef MODULE2_HYBRID_CONTROL_H
#define MODULE2_HYBRID_CONTROL_H

#include <stddef.h>

#include <mpi.h>
#include <nccl.h>
#include <cuda_runtime.h>

#include "mgpu.h"

struct hyb_private; /* the driver's: running total, data key, the produce kernel's delay */

typedef struct hyb_state {
  int rank, world;  /* this rank and the number of ranks (the same in MPI and NCCL) */
  int cap;          /* floats in send and recv: no count is ever larger */
  float *send;      /* device: this step's message, written by hyb_produce */
  float *recv;      /* device: where the previous rank's message must land */
  int *count_dev;   /* device: this step's count, written by hyb_produce (0 .. cap) */
  struct hyb_private *priv;
} hyb_state;

#ifdef __cplusplus
extern "C" {
#endif

/* Course kernels (the driver defines them); both enqueue on `stream` and return at once. */
void hyb_produce(const hyb_state *h, int step, cudaStream_t stream);
void hyb_consume(const hyb_state *h, int count, cudaStream_t stream);

/* Yours: one step (see above). `comm` is the driver's duplicate of MPI_COMM_WORLD (errors are
 * returned: wrap calls in MGPU_MPI), `nccl` a communicator over the same ranks with the same
 * rank numbers. Return the count the ranks agreed on. Don't leave work for later: when the
 * driver has synchronized `stream` after your return, the step must be complete. */
int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl);

#ifdef __cplusplus
}
#endif

#endif /* MODULE2_HYBRID_CONTROL_H */
