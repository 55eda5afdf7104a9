/*
 * Variant local-update: the single-GPU habit. Each layer is updated right after its backward
 * kernel, with this rank's own gradient, and only then all-reduced; the sums arrive after the
 * weights have already moved and are never used. The ranks' weights drift apart and none
 * matches the reference. Must fail at correctness.
 */
#include "training-loop.h"

namespace {

struct Events {
  int device = -1;
  cudaEvent_t ready[TRAIN_MAX_LAYERS];
  cudaEvent_t sums_done;
};

Events &events() {
  static Events e;
  int dev = -1;
  MGPU_CUDA(cudaGetDevice(&dev));
  if (e.device != dev) {
    for (int l = 0; l < TRAIN_MAX_LAYERS; l++)
      MGPU_CUDA(cudaEventCreateWithFlags(&e.ready[l], cudaEventDisableTiming));
    MGPU_CUDA(cudaEventCreateWithFlags(&e.sums_done, cudaEventDisableTiming));
    e.device = dev;
  }
  return e;
}

} // namespace

void train_steps(ncclComm_t comm, const train_model *m, int first_step, int steps,
                 cudaStream_t compute, cudaStream_t comm_stream) {
  Events &ev = events();
  for (int t = first_step; t < first_step + steps; t++) {
    for (int l = m->layers - 1; l >= 0; l--) {
      train_backward(m, l, t, compute);
      train_update(m, l, compute); /* the bug: the gradient is not summed yet */
      MGPU_CUDA(cudaEventRecord(ev.ready[l], compute));
      MGPU_CUDA(cudaStreamWaitEvent(comm_stream, ev.ready[l], 0));
      MGPU_NCCL(ncclAllReduce(m->grads[l], m->grads[l], m->params, ncclFloat, ncclSum, comm,
                              comm_stream));
    }
    MGPU_CUDA(cudaEventRecord(ev.sums_done, comm_stream));
    MGPU_CUDA(cudaStreamWaitEvent(compute, ev.sums_done, 0));
  }
}
