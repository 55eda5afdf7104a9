/*
 * driver.cu: module6/one-shot (course-owned).
 *
 * The learner's one_shot_all_reduce against ncclAllReduce. Everything but the two small functions
 * below lives in ../shared/allreduce_bench.cuh (shared with module6/two-shot): symmetric buffers,
 * teams, epochs, the classified comparison, the rank that is slowed down on purpose, and the
 * timing. One-shot is for small messages: the cases stop at 4 MiB.
 * Split (`verifier: true`): the rank hands every epoch's output, the guard counts and, after
 * timing, its epoch count over (mgpu_hand_over(), in the shared file), and its verifier, which
 * alone knows the other ranks' inputs, compares on the CPU and records the cases.
 */
#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "one_shot.h"

#define AR_FN "one_shot_all_reduce"

static void learner_call(const ar_view *v, float *out, long long n, unsigned int epoch, cudaStream_t stream) {
  MGPU_LEARNER(one_shot_all_reduce(v, out, n, epoch, stream));
}

/* Many epochs where they are cheap; 12 (4 slowed-down members' turns) for the large cases. */
static int epochs_for(long long n) { return n <= 65536 ? 24 : 12; }

#include "allreduce_bench.cuh"

int main(int argc, char **argv) { return ar_main(argc, argv); }
