/*
 * Variant skip-back-to-back: grouped and correct whenever it does the work, but it skips a
 * call that comes within 10 µs of the previous call's return with the same tensor arrays, "as
 * the result is already there". Between two calls of the correctness cases the driver reads
 * recv back and computes sums on the host (far more than 10 µs), so every checked call does
 * the work. The timed calls are queued back to back behind the harness's gate: all but the
 * first of each sample do nothing, and the measured time per batch collapses. The driver's
 * after-timing check does not see it: the last timed call's result is right (its first call of
 * the sample wrote it), and the extra call comes long after, so it does the work. Only the
 * manifest's suspect_above catches the absurd ratio. Must fail at performance (suspect).
 */
#include <time.h>

#include "grouped-collectives.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

void allreduce_many(ncclComm_t comm, int count, const float *const *send, float *const *recv,
                    const size_t *n, cudaStream_t stream) {
  static const float *const *last_send = NULL;
  static double last_return = -1e300;
  int k;
  const int repeat = send == last_send && now_us() - last_return < 10.0;
  last_send = send;
  if (!repeat) {
    MGPU_NCCL(ncclGroupStart());
    for (k = 0; k < count; k++)
      MGPU_NCCL(ncclAllReduce(send[k], recv[k], n[k], ncclFloat, ncclSum, comm, stream));
    MGPU_NCCL(ncclGroupEnd());
  }
  last_return = now_us();
}
