/*
 * hybrid.cu — module2/hybrid-control. Write hybrid_step; hybrid-control.h describes the step.
 *
 * What is here: the produce and consume calls. What is missing is everything in between:
 *
 *   1. The count hyb_produce's kernel writes to h->count_dev is on the GPU, and the kernel may
 *      still be running when hyb_produce returns. How do you get the value to the host, and
 *      when is it safe to read it?
 *   2. The ranks' counts differ. NCCL needs both ends of a transfer to agree on its size: agree
 *      on one count with MPI (host memory only: MPI carries no data in this exercise).
 *   3. Move `agreed` floats with NCCL: h->send to rank + 1, h->recv from rank - 1 (wrapping
 *      around), in one group, on `stream`.
 *
 * As shipped the count stays 0: nothing moves and every case fails at correctness.
 */
#include "hybrid-control.h"

int hybrid_step(const hyb_state *h, int step, cudaStream_t stream, MPI_Comm comm,
                ncclComm_t nccl) {
  (void)comm;
  (void)nccl;
  hyb_produce(h, step, stream);
  int agreed = 0; /* TODO: steps 1 and 2 */
  /* TODO: step 3 */
  hyb_consume(h, agreed, stream);
  return agreed;
}
