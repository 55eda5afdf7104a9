/*
 * allreduce.cu — module4/small-allreduce.
 *
 * A one-shot all-reduce for small buffers, built from puts with signals: every PE pushes its
 * whole input to every other PE, waits until all the other PEs' inputs have landed, and adds
 * them up itself. small-allreduce.h has the contract; TASK.md says how it is checked and timed.
 *
 * Plan:
 *   1. allreduce_setup: symmetric memory for the blocks that come in (a slot per source PE) and
 *      signal words (nvshmem_malloc / nvshmem_calloc). Fill in *ar.
 *   2. A kernel: put `in` into your slot on every other PE with a signal
 *      (nvshmemx_putmem_signal_block), wait for every other PE's signal
 *      (nvshmem_signal_wait_until), add the npes blocks into `out`. Several blocks, each with
 *      its own chunk and its own signal words, go faster than one.
 *   3. Repeated calls: the driver queues several calls back to back, and PEs drift apart. What
 *      does your signal word still hold from the last call? Can a fast PE's next call write
 *      into a slot that a slow PE is still adding up?
 *
 * As shipped, nothing is allocated: the driver finds no slots and every case fails at the
 * correctness stage.
 */
#include "small-allreduce.h"

void allreduce_setup(allreduce *ar, size_t max_n) {
  /* TODO: allocate slots and signals in the symmetric heap and fill in *ar. */
  (void)max_n;
  ar->slots = NULL;
  ar->slots_bytes = 0;
  ar->signals = NULL;
  ar->signals_count = 0;
  ar->scratch = NULL;
  ar->calls = 0;
}

void allreduce_small(allreduce *ar, const float *in, float *out, size_t n, cudaStream_t stream) {
  /* TODO: launch the one-shot all-reduce kernel on stream. */
  (void)ar;
  (void)in;
  (void)out;
  (void)n;
  (void)stream;
}

void allreduce_teardown(allreduce *ar) {
  /* TODO: free what allreduce_setup allocated (nvshmem_free is collective). */
  if (ar->signals) nvshmem_free(ar->signals);
  if (ar->slots) nvshmem_free(ar->slots);
}
