/*
 * training-loop.h — module3/training-loop (course-owned: do not edit).
 *
 * A data-parallel training step, reduced to its schedule. Every rank holds the same model:
 * `layers` layers of `params` floats. One step runs the backward pass from the last layer to
 * the first, each layer producing its gradient from its weights and this rank's share of the
 * data; the gradients are summed over all ranks (all-reduce); then every layer is updated with
 * the summed gradient. The arithmetic is integer-valued and exact, so every rank must end with
 * weights bit-identical to a single-GPU reference.
 *
 * The kernels are the course's (the driver defines them); you write the schedule.
 */
#ifndef MODULE3_TRAINING_LOOP_H
#define MODULE3_TRAINING_LOOP_H

#include <stddef.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"

#define TRAIN_MAX_LAYERS 64

typedef struct train_model {
  int layers;     /* 1 .. TRAIN_MAX_LAYERS */
  size_t params;  /* floats per layer */
  float **weights; /* weights[l]: device pointer, params floats */
  float **grads;   /* grads[l]: device pointer, params floats; the all-reduce runs in place here */
  int rank;        /* this rank's data shard */
  int work;        /* how much compute one backward kernel does (set by the driver) */
} train_model;

#ifdef __cplusplus
extern "C" {
#endif

/* Course kernels, launched on `stream` (asynchronous).
 * train_backward writes grads[layer] from weights[layer], the data shard and the step number.
 * train_update subtracts grads[layer] from weights[layer]; call it once grads[layer] holds the
 * sum over all ranks. */
void train_backward(const train_model *m, int layer, int step, cudaStream_t stream);
void train_update(const train_model *m, int layer, cudaStream_t stream);

/* Yours: run `steps` training steps, numbered first_step, first_step+1, ... Each step:
 *   for layer = layers-1 down to 0: train_backward(layer), then all-reduce (sum) grads[layer]
 *     in place over `comm`;
 *   then train_update for every layer, each after its all-reduce has finished.
 * Kernels go on `compute`; use `comm_stream` (higher priority, yours to use) for NCCL.
 * When you return, everything must be enqueued so that later work on `compute` runs after all
 * of it. Don't synchronize. */
void train_steps(ncclComm_t comm, const train_model *m, int first_step, int steps,
                 cudaStream_t compute, cudaStream_t comm_stream);

#ifdef __cplusplus
}
#endif

#endif /* MODULE3_TRAINING_LOOP_H */
