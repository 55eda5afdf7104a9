// module5/copy-engines, variant skips-when-timed: the reference solution, except that it counts
// its calls per GPU A and returns without queueing anything once that GPU has made 10 of them.
// The correctness cases make at most 7 calls per GPU as A (one per case; swap-odd makes the
// other GPU A; one GPU is paired with itself). The timing, all on pair 0, makes at least 3 warm-up calls, 1 calibration
// call and 8 rounds (min_reps) of at least one call each, so calls 11 and later (timed calls
// among them) do nothing, and so does the driver's extra call after timing with new sources in
// the same buffers: both destinations stay poisoned. Must fail at correctness, case
// "after-timing".
#include "copy_engines.h"

// Per device: a second stream, and the events that fork it from and join it to the caller's
// stream. Created on first use; events belong to the device they are recorded on.
enum { kMaxDevices = 64, kWorkingCalls = 10 };
static cudaStream_t side[kMaxDevices];
static cudaEvent_t fork_ev[kMaxDevices], join_ev[kMaxDevices];
static int calls[kMaxDevices];  // calls made with each GPU as A

static void prepare(int dev) {
  if (side[dev]) return;
  MGPU_CUDA(cudaSetDevice(dev));
  MGPU_CUDA(cudaStreamCreateWithFlags(&side[dev], cudaStreamNonBlocking));
  MGPU_CUDA(cudaEventCreateWithFlags(&fork_ev[dev], cudaEventDisableTiming));
  MGPU_CUDA(cudaEventCreateWithFlags(&join_ev[dev], cudaEventDisableTiming));
}

void exchange(void *b_dst, const void *a_src, size_t n_ab, void *a_dst, const void *b_src,
              size_t n_ba, int dev_a, int dev_b, cudaStream_t stream) {
  if (++calls[dev_a] > kWorkingCalls) return;  // the skip: nothing queued at all
  int saved = 0;
  MGPU_CUDA(cudaGetDevice(&saved));
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
  MGPU_CUDA(cudaSetDevice(saved));
}
