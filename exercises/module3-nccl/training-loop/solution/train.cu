/*
 * train.cu — reference solution for module3/training-loop.
 *
 * The backward kernels stay on `compute`, in order. After each one, an event marks "this
 * layer's gradient is ready"; the communication stream waits for that event and all-reduces the
 * layer while `compute` goes on with the next layer's backward. Another event per layer marks
 * "this layer's sum is ready"; the updates, queued on `compute` after the whole backward pass,
 * each wait for theirs. Only the last layer's all-reduce (layer 0) is left without compute to
 * hide behind.
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
  for (int t = first_step; t < first_step + steps; t++) {
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
