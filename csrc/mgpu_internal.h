/*
 * mgpu_internal.h — what the harness parts share with each other. Drivers never include it.
 *
 * mgpu_core.c owns the process-wide state (record file, rank, rendezvous counters); the CUDA,
 * NCCL and MPI parts reach it only through these functions.
 */
#ifndef MGPU_INTERNAL_H
#define MGPU_INTERNAL_H

#include "mgpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Hook the CUDA part defines (strongly) and the core references weakly, so the core links into
 * CPU-only programs. select != 0: set device local_rank % count. Fills ctx->device,
 * ctx->num_devices and gpu (name of the selected device, "" when none). */
int mgpu__cuda_setup(mgpu_ctx *ctx, int select, char *gpu, size_t gpu_len);

/* Hooks of the NCCL part (mgpu_nccl.cu), referenced weakly like mgpu__cuda_setup. setup: open
 * NCCL's watch named by MGPU_NCCL_WATCH, before any communicator exists; watch_json: its counts
 * as one JSON object for the done record (returns the length; 0 when no watch is active). */
void mgpu__nccl_setup(void);
size_t mgpu__nccl_watch_json(char *buf, size_t cap);

/* The context mgpu_init filled (NULL before). */
mgpu_ctx *mgpu__ctx(void);

/* File all-gather among the ranks (collective, same tag and len everywhere, same order):
 * all must hold world * len bytes; rank r's contribution lands at all + r * len. */
void mgpu__gather(mgpu_ctx *ctx, const char *tag, const void *mine, size_t len, void *all);

/* Environment flag: 1 when the variable is set to something other than "", "0". */
int mgpu__env_flag(const char *name);

/* The records channel (mgpu_chan.c, docs/protocol.md §4). active: connected to the checker;
 * seed: the run's seed the checker sent; send: one authenticated record (json without its
 * newline), -1 when the channel is gone; close: end of records; code_changed: the program's
 * code differs from what it was before main. */
int mgpu__chan_active(void);
uint64_t mgpu__chan_seed(void);
int mgpu__chan_send(const char *json, size_t n);
void mgpu__chan_close(void);
int mgpu__code_changed(void);

/* The verifier (docs/protocol.md §4). verifier: this process is a rank's verifier; split: this
 * rank's outputs are checked by one (then *rank_seed and *pattern_seed are its input keys);
 * submit: one output to the verifier (rank side); next/read: the next output's tag and size,
 * then its bytes (verifier side; -1 at the end of the stream, -2 for a malformed header). */
int mgpu__chan_verifier(void);
/* SHA-256-based one-way function of (tag, a, b) (mgpu_chan.c). */
uint64_t mgpu__oneway64(const char *tag, uint64_t a, uint64_t b);
int mgpu__chan_split(uint64_t *rank_seed, uint64_t *pattern_seed);
int mgpu__chan_submit(const char *tag, const void *data, size_t n);
int mgpu__chan_next(char *tag, size_t cap, size_t *n);
int mgpu__chan_read(void *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* MGPU_INTERNAL_H */
