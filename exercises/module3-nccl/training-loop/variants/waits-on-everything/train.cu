/*
 * Variant waits-on-everything: correct, and no faster than the serialized loop. The
 * communication stream waits for one event recorded after the whole backward pass, so no
 * all-reduce overlaps any backward kernel: the two streams take turns. Must fail at
 * performance.
 */
#include "training-loop.h"

namespace {

struct Events {
  int device = -1;
  cudaEvent_t backward_done, sums_done;
};

Events &events() {
  static Events e;
  int dev = -1;
  MGPU_CUDA(cudaGetDevice(&dev));
  if (e.device != dev) {
    MGPU_CUDA(cudaEventCreateWithFlags(&e.backward_done, cudaEventDisableTiming));
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
    for (int l = m->layers - 1; l >= 0; l--) train_backward(m, l, t, compute);
    MGPU_CUDA(cudaEventRecord(ev.backward_done, compute));
    MGPU_CUDA(cudaStreamWaitEvent(comm_stream, ev.backward_done, 0));
    for (int l = m->layers - 1; l >= 0; l--)
      MGPU_NCCL(ncclAllReduce(m->grads[l], m->grads[l], m->params, ncclFloat, ncclSum, comm,
                              comm_stream));
    MGPU_CUDA(cudaEventRecord(ev.sums_done, comm_stream));
    MGPU_CUDA(cudaStreamWaitEvent(compute, ev.sums_done, 0));
    for (int l = m->layers - 1; l >= 0; l--) train_update(m, l, compute);
  }
}
