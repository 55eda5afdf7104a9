/*
 * driver.cu: module6/two-shot (course-owned).
 *
 * The learner's two_shot_all_reduce against ncclAllReduce. Everything but the two small functions
 * below lives in ../shared/allreduce_bench.cuh (shared with module6/one-shot): symmetric buffers,
 * teams, epochs, the classified comparison, the rank that is slowed down on purpose, and the
 * timing. Two-shot is for middle sizes: the cases go from 1 float to 64 MiB.
 * Split (`verifier: true`): the rank hands every epoch's output, the guard counts and, after
 * timing, its epoch count over (mgpu_hand_over(), in the shared file), and its verifier, which
 * alone knows the other ranks' inputs, compares on the CPU and records the cases.
 */
#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "two_shot.h"

#define AR_FN "two_shot_all_reduce"

static void learner_call(const ar_view *v, float *out, long long n, unsigned int epoch, cudaStream_t stream) {
  MGPU_LEARNER(two_shot_all_reduce(v, out, n, epoch, stream));
}

/* Many epochs where they are cheap, fewer for the large cases (each still gives every one of
 * the first two members a delayed and a slowed-down turn). */
static int epochs_for(long long n) { return n <= 65536 ? 24 : n <= (1LL << 20) ? 12 : 6; }

#include "allreduce_bench.cuh"

int main(int argc, char **argv) { return ar_main(argc, argv); }
