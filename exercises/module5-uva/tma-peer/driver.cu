/*
 * driver.cu: module5/tma-peer (course-owned).
 *
 * The checks are module5/peer-stores' (below); what differs is the SM limit. The driver
 * creates, on every GPU, an SM limit of kSMs SMs (mgpu_sm_limit_create: a green context,
 * docs/protocol.md §4 "SM limits") and wraps every call of tma_copy in mgpu_sm_limit_enter /
 * mgpu_sm_limit_leave: while tma_copy runs, the green context is current, so every kernel it
 * launches (on the limit's stream, on stream 0, on a stream it creates) runs on those SMs
 * only; leave checks that the green context is still current (a cudaSetDevice would have
 * replaced it) and makes the driver's stream wait for everything queued in the green context.
 * The policy stage refuses the calls that could leave the limit unseen: cudaSetDevice,
 * cudaDeviceReset, threads, driver entry points.
 *
 * One process (launcher "single") drives every GPU; the driver enables peer access from each
 * GPU i to the next, (i + 1) mod n. A machine with one GPU copies within GPU 0.
 *
 * Correctness, per case (n = bytes; a name "offK-..." misaligns both pointers by K bytes):
 * every GPU i copies to GPU i+1 at the same time, with tma_copy on a non-blocking stream of i:
 *   1. src holds an old pattern; dst is guarded and poisoned (0xFF);
 *   2. on the stream: a 20 ms delay kernel, the fill of src with a new pattern, tma_copy, and a
 *      snapshot of dst (a copy-engine copy into a buffer of the driver's);
 *   3. the driver waits for each stream, then for every device, and compares the snapshot and
 *      dst with the new pattern, every byte.
 * Work that does not wait for the stream copies the old src; work the stream does not wait for
 * is still running when the snapshot is taken.
 *
 * Performance (GPU 0 -> GPU 1): tma_copy of 1 GiB from kSMs SMs against cudaMemcpyPeerAsync
 * of the same bytes, same run, alternating (mgpu_time_pair, algbw). Every timed call is checked
 * too: right behind it on the driver's stream (after the limit's join), a probe kernel of the
 * driver's checks that the call wrote again the 256 bytes of dst that the probe before it had
 * overwritten (places drawn afresh each time), then overwrites 256 others (peer_common.cuh; a
 * few µs per call against ~2.7 ms, the baseline's calls probed alike). A copy that does part
 * of the work when the calls come back to back fails there.
 * After the timing, "after-timing" records the probes' count and copies a new pattern over the
 * timed buffers (a copy that skips repeated work fails there).
 *
 * The comparisons are the verifier's (`verifier: true`, docs/protocol.md §4; the code is in
 * ../shared/peer_copy_bench.cuh): the rank hands over every snapshot and dst, in chunks, with
 * the number of GPUs, dst's misaligned head and its guard count; the verifier makes the
 * expected bytes on the CPU. SM limits are the rank's alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tma_peer.h"

enum { kMaxDevices = 64 };
static const long long kDelayNs = 20LL * 1000 * 1000;
static const size_t kStage = (size_t)64 << 20;
static const char *const kFn = "tma_copy";
static const int kSMs = 8;               /* the limit: SMs of each GPU that tma_copy may use */
static mgpu_smlimit *g_lim[kMaxDevices]; /* one per GPU */

#include "peer_copy_bench.cuh"

/* The learner's call, on GPU `dev` (current). */
static void learner_copy(int dev, void *dst, const void *src, size_t bytes, cudaStream_t stream) {
  mgpu_smlimit *l = g_lim[dev];
  (void)dst;
  (void)src;
  (void)bytes;
  mgpu_sm_limit_enter(l, stream);
  MGPU_LEARNER(tma_copy(dst, src, bytes, mgpu_sm_limit_sms(l), mgpu_sm_limit_stream(l)));
  expect_no_pending_error(kFn);
  mgpu_sm_limit_leave(l, stream, kFn);
  MGPU_CUDA(cudaSetDevice(dev));
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  ring g;
  mgpu_init_nodevice(&ctx, argc, argv);
  bench_open(&ctx, &g); /* the rank: GPUs, peer access, streams */
  if (mgpu_computes(&ctx)) {
    for (int i = 0; i < g.n; i++) g_lim[i] = mgpu_sm_limit_create(i, kSMs);
    mgpu_value("SMs tma_copy may use on each GPU (green context)", mgpu_sm_limit_sms(g_lim[0]), "SMs");
  }
  mgpu_hand_over(&ctx, "gpus", &g.n, sizeof g.n); /* how many GPUs the verifier hears about */
  bench_run(&ctx, &g);
  if (mgpu_computes(&ctx)) {
    sync_all(g.n);
    for (int i = 0; i < g.n; i++) mgpu_sm_limit_destroy(g_lim[i]);
  }
  bench_close(&ctx, &g);
  return mgpu_finish(&ctx);
}
