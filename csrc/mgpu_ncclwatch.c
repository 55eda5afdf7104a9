//go:build ignore

// The line above keeps the Go tool from compiling this C file into package csrc, which only
// embeds the harness sources (embed.go).

/*
 * mgpu_ncclwatch.c — the course's NCCL profiler plugin: NCCL's own record of the collectives a
 * rank asked it for (docs/protocol.md §4, "NCCL's watch").
 *
 * Built on its own into a shared object (runtime/build SharedObject); the checker names it in
 * NCCL_PROFILER_PLUGIN and MGPU_NCCL_WATCH for the ranks of an exercise that forbids an NCCL
 * collective. The harness (mgpu_nccl.cu) opens it first, so that NCCL's dlopen of the same path
 * returns the same object and the counts outlive the communicators.
 *
 * NCCL 2.28 looks for the symbol ncclProfiler_v5 (src/plugin/profiler/profiler_v5.cc) and, when
 * a communicator is created, calls init with a pointer to its process-wide event mask. With
 * ncclProfileCollApi and ncclProfileP2pApi in that mask, every ncclAllReduce, ncclReduceScatter,
 * ncclAllGather, ncclReduce, ncclBroadcast, ncclSend and ncclRecv on a communicator of two or
 * more ranks starts an event whose descriptor names the API function, in the thread that made
 * the call, before the work is queued (src/enqueue.cc collTaskAppend, p2pTaskAppend). Two
 * things it does not see: a collective on a one-rank communicator (ncclLaunchOneRank skips the
 * events) and the all-to-all family (ncclAlltoAll, ncclGather, ncclScatter become Send and Recv
 * events).
 *
 * The counts are kept apart by who called: a thread inside the driver's own window
 * (mgpu_ncclwatch_own, reached through mgpu_nccl_own in the harness) or anyone else. Every
 * collective outside such a window is the learner's, whatever thread or callback issued it.
 *
 * Only the layout below is taken from NCCL's profiler_v5.h; no NCCL header is needed.
 */
#define _GNU_SOURCE

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- NCCL's profiler interface, v5 (the parts this plugin reads) ----------------------- */

enum {
  WATCH_COLL_API = 1 << 9,  /* ncclProfileCollApi */
  WATCH_P2P_API = 1 << 10,  /* ncclProfileP2pApi */
};
#define WATCH_MASK (WATCH_COLL_API | WATCH_P2P_API)

typedef struct {
  uint64_t type;
  void *parentObj;
  int rank;
  union {
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      int root;
      void *stream;
      _Bool graphCaptured;
    } collApi;
    struct {
      const char *func;
      size_t count;
      const char *datatype;
      void *stream;
      _Bool graphCaptured;
    } p2pApi;
    char reserve[128]; /* the other members of NCCL's union are not read */
  };
} watch_descr;

typedef int watch_result; /* ncclResult_t: 0 is ncclSuccess */

typedef struct {
  const char *name;
  watch_result (*init)(void **context, uint64_t commId, int *eActivationMask,
                       const char *commName, int nNodes, int nranks, int rank, void *logfn);
  watch_result (*startEvent)(void *context, void **eHandle, watch_descr *eDescr);
  watch_result (*stopEvent)(void *eHandle);
  watch_result (*recordEventState)(void *eHandle, int eState, void *eStateArgs);
  watch_result (*finalize)(void *context);
} watch_profiler_v5;

/* ---- the counts ------------------------------------------------------------------------ */

/* NCCL's names (ncclFuncToString); the last slot takes any other. */
static const char *const k_funcs[] = {"AllReduce", "ReduceScatter", "AllGather", "Reduce",
                                      "Broadcast", "AlltoAll",      "Gather",    "Scatter",
                                      "Send",      "Recv",          "other"};
#define NFUNCS ((int)(sizeof k_funcs / sizeof k_funcs[0]))

static struct {
  atomic_ullong own[NFUNCS];     /* inside the driver's windows */
  atomic_ullong learner[NFUNCS]; /* everywhere else */
  atomic_ullong comms;           /* init calls: communicators NCCL created with the plugin */
  atomic_ullong finalized;
  atomic_ullong windows; /* driver windows entered */
  atomic_int max_ranks;
  _Atomic(int *) mask; /* NCCL's event mask, as init was handed it */
} w;

static __thread int own_depth;

static int func_slot(const char *f) {
  int i;
  if (!f) return NFUNCS - 1;
  for (i = 0; i < NFUNCS - 1; i++)
    if (strcmp(f, k_funcs[i]) == 0) return i;
  return NFUNCS - 1;
}

static watch_result watch_init(void **context, uint64_t commId, int *mask, const char *commName,
                               int nNodes, int nranks, int rank, void *logfn) {
  int cur;
  (void)commId;
  (void)commName;
  (void)nNodes;
  (void)rank;
  (void)logfn;
  if (mask) {
    *mask = WATCH_MASK; /* API events only: nothing is timed or traced inside NCCL */
    atomic_store(&w.mask, mask);
  }
  cur = atomic_load(&w.max_ranks);
  while (nranks > cur && !atomic_compare_exchange_weak(&w.max_ranks, &cur, nranks)) {
  }
  atomic_fetch_add(&w.comms, 1);
  if (context) *context = &w;
  return 0;
}

static watch_result watch_start(void *context, void **handle, watch_descr *d) {
  (void)context;
  if (handle) *handle = NULL; /* nothing to stop */
  if (!d) return 0;
  if (d->type == WATCH_COLL_API || d->type == WATCH_P2P_API) {
    const char *f = d->type == WATCH_COLL_API ? d->collApi.func : d->p2pApi.func;
    int s = func_slot(f);
    atomic_fetch_add(own_depth > 0 ? &w.own[s] : &w.learner[s], 1);
  }
  return 0;
}

static watch_result watch_stop(void *handle) {
  (void)handle;
  return 0;
}

static watch_result watch_record(void *handle, int state, void *args) {
  (void)handle;
  (void)state;
  (void)args;
  return 0;
}

static watch_result watch_finalize(void *context) {
  (void)context;
  atomic_fetch_add(&w.finalized, 1);
  return 0;
}

__attribute__((visibility("default"))) watch_profiler_v5 ncclProfiler_v5 = {
    "mgpu-learn-watch", watch_init, watch_start, watch_stop, watch_record, watch_finalize,
};

/* ---- what the harness calls (through dlsym) -------------------------------------------- */

/* The interface version the harness expects. */
__attribute__((visibility("default"))) int mgpu_ncclwatch_abi(void) { return 1; }

/* enter != 0: the calling thread starts one of the driver's own NCCL calls; 0: it ends. */
__attribute__((visibility("default"))) void mgpu_ncclwatch_own(int enter) {
  if (enter) {
    if (own_depth++ == 0) atomic_fetch_add(&w.windows, 1);
  } else if (own_depth > 0) {
    own_depth--;
  }
}

static size_t put(char *buf, size_t cap, size_t n, const char *fmt, unsigned long long a,
                  const char *s) {
  int k;
  if (n >= cap) return n;
  k = s ? snprintf(buf + n, cap - n, fmt, s, a) : snprintf(buf + n, cap - n, fmt, a);
  return k < 0 ? cap : n + (size_t)k;
}

static size_t put_counts(char *buf, size_t cap, size_t n, const char *key, atomic_ullong *c) {
  int i, first = 1;
  n = put(buf, cap, n, ",\"%s\":{", 0, key);
  for (i = 0; i < NFUNCS; i++) {
    unsigned long long v = atomic_load(&c[i]);
    if (!v) continue;
    n = put(buf, cap, n, first ? "\"%s\":%llu" : ",\"%s\":%llu", v, k_funcs[i]);
    first = 0;
  }
  return put(buf, cap, n, "}", 0, NULL);
}

/* The counts as one JSON object. Returns its length; the object is complete only when that is
 * below cap. mask_ok: NCCL's event mask still holds the API events this plugin set. */
__attribute__((visibility("default"))) size_t mgpu_ncclwatch_json(char *buf, size_t cap) {
  size_t n = 0;
  int *mask = atomic_load(&w.mask);
  int mask_ok = mask && (*(volatile int *)mask & WATCH_MASK) == WATCH_MASK;
  if (!buf || cap == 0) return 0;
  buf[0] = 0;
  n = put(buf, cap, n, "{\"comms\":%llu", atomic_load(&w.comms), NULL);
  n = put(buf, cap, n, ",\"finalized\":%llu", atomic_load(&w.finalized), NULL);
  n = put(buf, cap, n, ",\"max_ranks\":%llu", (unsigned long long)atomic_load(&w.max_ranks), NULL);
  n = put(buf, cap, n, ",\"mask_ok\":%llu", (unsigned long long)mask_ok, NULL);
  n = put(buf, cap, n, ",\"windows\":%llu", atomic_load(&w.windows), NULL);
  n = put_counts(buf, cap, n, "own", w.own);
  n = put_counts(buf, cap, n, "learner", w.learner);
  n = put(buf, cap, n, "}", 0, NULL);
  return n;
}
