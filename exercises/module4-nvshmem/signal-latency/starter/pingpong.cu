/*
 * pingpong.cu — module4/signal-latency.
 *
 * A ping-pong between PE 2i (the initiator) and PE 2i+1 (the responder), entirely inside one
 * kernel per PE: each message is sent with a put that carries a signal, and the other side
 * waits for that signal before it reads the message. signal-latency.h describes the chain of
 * messages exactly; TASK.md says how it is checked and timed.
 *
 * Plan:
 *   1. pingpong_setup: allocate the symmetric memory (nvshmem_malloc / nvshmem_calloc): an
 *      inbox of max_bytes, a signal word that starts at 0, and whatever else you need (an
 *      outbox to assemble outgoing messages in, for instance). Fill in *pp.
 *   2. A kernel (one block is plenty) that runs all `rounds` round trips:
 *        - wait until the partner's message has landed: nvshmem_signal_wait_until on your
 *          signal word, then make the rest of the block wait for the thread that waited;
 *        - copy the message to received + r * bytes and build the next one (xor with your key);
 *        - send it: nvshmem_putmem_signal / nvshmemx_putmem_signal_block put the bytes into
 *          the partner's inbox and then update the partner's signal word, in that order.
 *   3. The driver calls pingpong_run over and over. Which signal value will the partner write
 *      for message r of call k, and what is your signal word still holding from call k-1?
 *   4. pingpong_run: work out the partner (and whether this PE has one), launch on `stream`.
 *
 * As shipped, nothing is allocated: the driver finds no inbox and every case fails at the
 * correctness stage.
 */
#include "signal-latency.h"

void pingpong_setup(pingpong *pp, size_t max_bytes) {
  /* TODO: allocate inbox (max_bytes), signal (one uint64_t, zero) and what else you need. */
  (void)max_bytes;
  pp->inbox = NULL;
  pp->inbox_bytes = 0;
  pp->signal = NULL;
  pp->scratch = NULL;
  pp->calls = 0;
  pp->sequence = 0;
}

void pingpong_run(pingpong *pp, const uint8_t *keys, uint8_t *received, size_t bytes, int rounds,
                  unsigned long long *elapsed_ns, cudaStream_t stream) {
  /* TODO: find the partner (nvshmem_my_pe, nvshmem_n_pes), launch the ping-pong kernel. */
  (void)pp;
  (void)keys;
  (void)received;
  (void)bytes;
  (void)rounds;
  (void)elapsed_ns;
  (void)stream;
}

void pingpong_teardown(pingpong *pp) {
  /* TODO: free what pingpong_setup allocated (nvshmem_free is collective, like the mallocs). */
  if (pp->signal) nvshmem_free(pp->signal);
  if (pp->scratch) nvshmem_free(pp->scratch);
  if (pp->inbox) nvshmem_free(pp->inbox);
}
