/*
 * Variant loop-bound: the reference schedule with an honest off-by-origin bug in the step
 * loop: `t < steps` instead of `t < first_step + steps`. The correctness cases call
 * train_steps(..., first_step = 0, steps = 3), where the two agree, so every weight matches.
 * The timed op calls train_steps(..., first_step = iter, steps = 1): from iter 1 on the loop
 * runs zero times and the "step" is free. The manifest has no suspect_above and no correctness
 * case calls train_steps with first_step > 0, so this passes with an absurd ratio unless one
 * of those is added. Must fail at correctness (a case that starts at first_step > 0).
 */
#include "training-loop.h"

namespace {

struct Events {
  int device = -1;
  cudaEvent_t grad_ready[TRAIN_MAX_LAYERS];
  cudaEvent_t sum_ready[TRAIN_MAX_LAYERS];
};

Events &events() {
  static Events e;
  int dev = -1;
  MGPU_CUDA(cudaGetDevice(&dev));
  if (e.device == dev) return e;
  if (e.device != -1)
    mgpu_fail("learner", "train_steps", __FILE__, __LINE__, dev,
              "called on a second device; the events belong to the first");
  for (int l = 0; l < TRAIN_MAX_LAYERS; l++) {
    MGPU_CUDA(cudaEventCreateWithFlags(&e.grad_ready[l], cudaEventDisableTiming));
    MGPU_CUDA(cudaEventCreateWithFlags(&e.sum_ready[l], cudaEventDisableTiming));
  }
  e.device = dev;
  return e;
}

} // namespace

void train_steps(ncclComm_t comm, const train_model *m, int first_step, int steps,
                 cudaStream_t compute, cudaStream_t comm_stream) {
  Events &ev = events();
  if (m->layers > TRAIN_MAX_LAYERS)
    mgpu_fail("learner", "train_steps", __FILE__, __LINE__, m->layers, "too many layers");
  for (int t = first_step; t < steps; t++) {  // the bug: should be first_step + steps
    for (int l = m->layers - 1; l >= 0; l--) {
      train_backward(m, l, t, compute);
      MGPU_CUDA(cudaEventRecord(ev.grad_ready[l], compute));
      MGPU_CUDA(cudaStreamWaitEvent(comm_stream, ev.grad_ready[l], 0));
      MGPU_NCCL(ncclAllReduce(m->grads[l], m->grads[l], m->params, ncclFloat, ncclSum, comm,
                              comm_stream));
      MGPU_CUDA(cudaEventRecord(ev.sum_ready[l], comm_stream));
    }
    // Updates in the order the sums arrive. Each waits only for its own layer, so the update
    // of layer L-1 can run while layer 0 is still being reduced. They also order the next
    // step's backward (and its overwrite of grads[l]) after this step's all-reduce.
    for (int l = m->layers - 1; l >= 0; l--) {
      MGPU_CUDA(cudaStreamWaitEvent(compute, ev.sum_ready[l], 0));
      train_update(m, l, compute);
    }
  }
}
