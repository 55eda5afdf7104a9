/*
 * mpi-vs-nccl.h — the functions you write for module2/mpi-vs-nccl (course-owned: do not edit).
 *
 * One process per GPU, started by mpirun with a CUDA-aware MPI. The driver owns main(),
 * MPI_Init/MPI_Finalize and the buffers; it has already selected this rank's GPU. You sum a
 * device buffer over all ranks twice: once with MPI_Allreduce on the device pointers, once
 * with an NCCL communicator that you build from MPI.
 *
 * Include order matters: mpi.h and nccl.h before mgpu.h turn on MGPU_MPI(call) and
 * MGPU_NCCL(call), which check a result and report the failing call with its file and line.
 */
#ifndef MODULE2_MPI_VS_NCCL_H
#define MODULE2_MPI_VS_NCCL_H

#include <stddef.h>

#include <mpi.h>
#include <nccl.h>
#include <cuda_runtime.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (a) recv[i] = the sum over all ranks of their send[i], for i < n, with MPI_Allreduce on
 * the device pointers as they are (the MPI is CUDA-aware), over `comm`.
 * `send` was written by work queued on `stream` (the driver's fill kernel, or an NCCL
 * all-reduce): it may not have run yet when you are called. MPI knows nothing about streams.
 * When you return, recv must hold the sum. `comm` returns errors: wrap calls in MGPU_MPI. */
void mpi_sum(const float *send, float *recv, size_t n, cudaStream_t stream, MPI_Comm comm);

/* (b) Build an NCCL communicator over the same ranks as `comm`, with the same rank numbers:
 * rank 0 of `comm` makes the unique id, every rank must get those same bytes, then every rank
 * joins. Called once, by every rank; the driver checks the communicator's size, rank and
 * device, and destroys it at the end. */
ncclComm_t nccl_from_mpi(MPI_Comm comm);

/* (b) recv[i] = the sum over all ranks of their send[i], for i < n, with NCCL, enqueued on
 * `stream`; return without waiting. The driver reads recv on `stream`. */
void nccl_sum(ncclComm_t nccl, const float *send, float *recv, size_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE2_MPI_VS_NCCL_H */
