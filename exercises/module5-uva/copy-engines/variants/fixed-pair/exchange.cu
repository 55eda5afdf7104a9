// module5/copy-engines, variant fixed-pair: the reference exchange, except that it ends with
// cudaSetDevice(0) ("the caller works on GPU 0") instead of putting back the device it found.
// With two GPUs every call used to come from pair (0, 1) with GPU 0 current, so it passed;
// with four, pair (2, 3) is called with GPU 2 current and the driver's next work lands on the
// wrong GPU. The case swap-odd calls it with A = GPU 1 (current): the run must fail, naming the
// device exchange() left current.
#include "copy_engines.h"

// Per device: a second stream, and the events that fork it from and join it to the caller's
// stream. Created on first use; events belong to the device they are recorded on.
enum { kMaxDevices = 64 };
static cudaStream_t side[kMaxDevices];
static cudaEvent_t fork_ev[kMaxDevices], join_ev[kMaxDevices];

static void prepare(int dev) {
  if (side[dev]) return;
  MGPU_CUDA(cudaSetDevice(dev));
  MGPU_CUDA(cudaStreamCreateWithFlags(&side[dev], cudaStreamNonBlocking));
  MGPU_CUDA(cudaEventCreateWithFlags(&fork_ev[dev], cudaEventDisableTiming));
  MGPU_CUDA(cudaEventCreateWithFlags(&join_ev[dev], cudaEventDisableTiming));
}

void exchange(void *b_dst, const void *a_src, size_t n_ab, void *a_dst, const void *b_src,
              size_t n_ba, int dev_a, int dev_b, cudaStream_t stream) {
  prepare(dev_a);
  prepare(dev_b);

  // Fork: B's stream starts once `stream` has done what was queued before (it wrote b_src).
  MGPU_CUDA(cudaSetDevice(dev_a));
  MGPU_CUDA(cudaEventRecord(fork_ev[dev_a], stream));
  MGPU_CUDA(cudaStreamWaitEvent(side[dev_b], fork_ev[dev_a], 0));

  // One copy per direction, each on its own stream: two copy engines, both link directions.
  MGPU_CUDA(cudaMemcpyPeerAsync(b_dst, dev_b, a_src, dev_a, n_ab, stream));
  MGPU_CUDA(cudaMemcpyPeerAsync(a_dst, dev_a, b_src, dev_b, n_ba, side[dev_b]));

  // Join: whatever is queued on `stream` next waits for B's copy as well.
  MGPU_CUDA(cudaSetDevice(dev_b));
  MGPU_CUDA(cudaEventRecord(join_ev[dev_b], side[dev_b]));
  MGPU_CUDA(cudaSetDevice(dev_a));
  MGPU_CUDA(cudaStreamWaitEvent(stream, join_ev[dev_b], 0));
  MGPU_CUDA(cudaSetDevice(0));  // "the caller works on GPU 0"
}
