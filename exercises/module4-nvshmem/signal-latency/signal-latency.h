/*
 * signal-latency.h — what you write for module4/signal-latency (course-owned: do not edit).
 *
 * One process per GPU, each one NVSHMEM PE. The driver starts NVSHMEM, makes the keys, calls
 * these functions on every PE, checks every message that travelled, and times your ping-pong
 * against NCCL's ncclSend/ncclRecv doing the same exchange.
 *
 * Pairs: PE 2i and PE 2i+1 play together; 2i is the initiator (it sends the first message),
 * 2i+1 the responder. With an odd number of PEs the last one has no partner: it takes no part
 * (its calls must do nothing).
 *
 * The exchange, one call, `rounds` round trips, message size `bytes`. Let A be the initiator,
 * B the responder, key_X[r] the r-th `bytes`-byte key of PE X (the `keys` argument on that PE),
 * and ^ a byte-wise exclusive or:
 *     ping[0]   = key_A[0]                      A sends it to B
 *     pong[r]   = ping[r]   ^ key_B[r]          B sends it back, after ping[r] has landed
 *     ping[r+1] = pong[r]   ^ key_A[r+1]        A sends it, after pong[r] has landed
 * A message can only be computed once the previous one has arrived: the exchange is a chain,
 * and its latency is what is measured. Each PE copies every message it receives, in full, to
 * `received + r * bytes` (B: ping[r]; A: pong[r]); that is what the driver checks.
 */
#ifndef MODULE4_SIGNAL_LATENCY_H
#define MODULE4_SIGNAL_LATENCY_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The symmetric memory of the exchange, filled in by pingpong_setup. The driver checks that
 * inbox and signal lie in NVSHMEM's symmetric heap (nvshmem_ptr) on every PE before it calls
 * pingpong_run: a put can only target symmetric memory. */
typedef struct pingpong {
  void *inbox;        /* where the partner's messages land; symmetric */
  size_t inbox_bytes; /* its size: at least the max_bytes given to pingpong_setup */
  uint64_t *signal;   /* the signal word the partner updates when a message has landed; symmetric */
  /* Yours, for anything you keep across calls (the driver never reads or writes them). */
  void *scratch;
  unsigned long long calls;
  unsigned long long sequence;
} pingpong;

/* Collective: every PE calls it once, after NVSHMEM has started, with the same max_bytes
 * (the largest message of the run). Allocate and initialise what the exchange needs. */
void pingpong_setup(pingpong *pp, size_t max_bytes);

/* One call = `rounds` round trips (2 * rounds one-way messages) of `bytes` bytes between this
 * PE and its partner, inside your kernel(s), as described above. Collective: every PE calls it
 * with the same bytes and rounds (the idle PE of an odd count too).
 *   keys      rounds * bytes bytes, ordinary device memory, this PE's keys for this call
 *   received  rounds * bytes bytes, ordinary device memory: copy message r here once it landed
 *   elapsed_ns  one value in device memory: write the nanoseconds your kernel spent on the
 *               whole exchange (from %globaltimer), so the report can show your own figure;
 *               the driver sets it to 0 before the call. May be NULL: then skip it.
 * Enqueue on `stream`, after the work already queued there, and return without waiting; the
 * driver reads `received` right behind your work on `stream`. The driver calls this many times
 * (several cases, several calls each, then the timed loop) without resetting anything of yours
 * in between: a signal left over from an earlier call must not be taken for a new message. */
void pingpong_run(pingpong *pp, const uint8_t *keys, uint8_t *received, size_t bytes, int rounds,
                  unsigned long long *elapsed_ns, cudaStream_t stream);

/* Collective: releases what pingpong_setup allocated. */
void pingpong_teardown(pingpong *pp);

#ifdef __cplusplus
}
#endif

#endif /* MODULE4_SIGNAL_LATENCY_H */
