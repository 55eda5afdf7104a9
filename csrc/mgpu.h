/*
 * mgpu.h — the harness every mgpu-learn exercise driver links.
 *
 * The course-owned driver owns main(); the learner writes the functions the driver calls.
 * The harness reads the run's environment (docs/protocol.md §1), writes JSON-lines records
 * (§2), and gives drivers exact data, poisoned and guarded buffers, exact comparisons,
 * a file rendezvous and honest timing.
 *
 * Parts:
 *   mgpu_core.c   pure C: context, records, rendezvous, exact host values. Links into CPU
 *                 programs too (the CPU fixture course uses it with cc).
 *   mgpu_cuda.cu  CUDA: error checks, device data, poison/guards, delays, comparisons, timing.
 *   mgpu_nccl.cu  mgpu_check_nccl, mgpu_nccl_unique_id (builds whose libs include nccl).
 *   mgpu_mpi.c    mgpu_check_mpi (builds whose libs include mpi).
 *   mgpu_fd.c     mgpu_share_fds: file descriptors between ranks (every cuda build).
 *   mgpu_cudrv.cu the driver-API table (mgpu_cu_api), symmetric buffers (mgpu_symm_*) and SM
 *                 limits (every cuda build).
 * Library checks (NCCL, MPI, NVSHMEM) are macros below, active when the driver includes the
 * library header before mgpu.h. docs/harness.md has the build lines and the rules.
 */
#ifndef MGPU_H
#define MGPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MGPU_MAX_CASES 32

typedef struct mgpu_case {
  char name[64];
  long long n; /* meaning defined by the driver: bytes, elements, ... */
} mgpu_case;

typedef struct mgpu_ctx {
  int rank, world;             /* this rank and the number of ranks */
  int local_rank, local_world; /* on this host */
  int device;                  /* CUDA device selected for this rank; -1 when none */
  int num_devices;             /* devices visible to this process (0 in CPU builds) */
  uint64_t seed;               /* fresh per run */
  const char *run_dir, *rdzv_dir, *exercise;
  int ncases;
  mgpu_case cases[MGPU_MAX_CASES];
  int perf; /* 1 when timing is wanted */
  int nperf_cases;
  mgpu_case perf_cases[MGPU_MAX_CASES];
  double perf_budget_ms;
  int min_reps, max_reps;
  const char *fault; /* MGPU_FAULT or NULL */
} mgpu_ctx;

/* ---- core (mgpu_core.c) -------------------------------------------------------------- */

/* Reads the environment, opens this rank's record file and writes the "start" record.
 * In CUDA builds mgpu_init also selects device local_rank % device_count;
 * mgpu_init_nodevice leaves the current device alone (single-process multi-GPU drivers).
 * A malformed environment is reported as a harness error (exit 1). */
void mgpu_init(mgpu_ctx *ctx, int argc, char **argv);
void mgpu_init_nodevice(mgpu_ctx *ctx, int argc, char **argv);

/* Writes the "done" record and closes the record file. Returns the process exit status the
 * driver should return from main: 0 when every case recorded by this rank was ok, else 0 too
 * (verdicts are the checker's job; a failed case is not a crash). */
int mgpu_finish(mgpu_ctx *ctx);

/* Writes an "error" record (where: "learner", "driver" or "harness"), prints a one-line
 * message to stderr naming rank, call, file:line and msg, and exits 1. */
void mgpu_fail(const char *where, const char *call, const char *file, int line, long code,
               const char *msg);
/* "learner" when basename(file) is listed in MGPU_LEARNER_FILES (comma-separated), else
 * "driver". The check functions below use it to fill `where`. */
const char *mgpu_where_for(const char *file);

/* Free-form records. */
void mgpu_note(const char *fmt, ...);
void mgpu_value(const char *name, double value, const char *unit);

/* One correctness case, as computed by the driver or by the mgpu_check_* helpers. */
typedef struct mgpu_mismatch {
  long long i;
  char got[32], want[32];
} mgpu_mismatch;

typedef struct mgpu_result {
  long long n, checked, bad, unwritten, guard_hits;
  double max_abs_err, max_rel_err;
  int nfirst;
  mgpu_mismatch first[8];
  char msg[512]; /* optional explanation; empty when none */
} mgpu_result;

void mgpu_result_init(mgpu_result *r, long long n);
/* Adds one compared element (used by drivers that compare by themselves). */
void mgpu_result_add(mgpu_result *r, long long i, double got, double want, double tol);
/* Writes the "case" record; ok = (bad == 0 && unwritten == 0 && guard_hits == 0 && !force_fail).
 * Returns ok. */
int mgpu_record_case(const char *case_name, const mgpu_result *r, int force_fail);

/* Timing record: n samples of µs per operation and host wall µs per operation. */
void mgpu_record_timing(const char *case_name, const char *who, double bytes, double factor,
                        const char *metric, const double *us, const double *wall_us, int n);

/* ---- the verifier (docs/protocol.md §4, "The verifier") ------------------------------------ *
 *
 * An exercise whose manifest says `verifier: true` is built twice: the rank program (driver,
 * learner's code, harness) and the verifier (the driver compiled with -DMGPU_VERIFIER, the
 * harness, no learner code). Each rank has a verifier process of its own. The rank computes
 * and hands its outputs over; the verifier, which alone knows the run's seed, makes the
 * expected values and records the cases. A driver splits its work with:
 *
 *   mgpu_computes(ctx)  1 in the rank program: allocate, fill inputs, call the learner's code,
 *                       read outputs back, time. 0 in the verifier (no GPU, no rendezvous).
 *   mgpu_verifies(ctx)  1 where expected values are made and compared: the verifier, and a
 *                       program run without one (standalone, or an exercise not split).
 *   mgpu_hand_over(ctx, tag, buf, bytes)
 *                       rank: sends bytes of buf to its verifier (returns 0); verifier: fills
 *                       buf with what the rank sent under the same tag, in the same order
 *                       (returns 1); without a verifier: returns 1 and leaves buf alone.
 *   MGPU_LEARNER(...)   a call into the learner's code; compiled out of the verifier.
 *
 * A split rank is sent the keys of its own inputs, not the seed: mgpu_exact_key for another
 * rank fails there, and mgpu_record_case is the verifier's. */
int mgpu_computes(const mgpu_ctx *ctx);
int mgpu_verifies(const mgpu_ctx *ctx);
int mgpu_hand_over(mgpu_ctx *ctx, const char *tag, void *buf, size_t bytes);
#ifdef MGPU_VERIFIER
#define MGPU_LEARNER(...) ((void)0)
#else
#define MGPU_LEARNER(...) __VA_ARGS__
#endif

/* Case lookup: returns the case's n, or `fallback` when the run has no case of that name. */
long long mgpu_case_n(const mgpu_ctx *ctx, const char *name, long long fallback);

/* File rendezvous among the ranks of this run (through MGPU_RDZV_DIR). */
void mgpu_barrier(mgpu_ctx *ctx, const char *tag);
/* Broadcast a small blob (<= 64 KiB) from `root` to every rank under a unique key. */
void mgpu_share(mgpu_ctx *ctx, const char *key, void *buf, size_t len, int root);

/* Exact data: integer-valued floats in [-64, 64], a function of (seed, rank, iter, i).
 * Sums of up to 2^17 of them are exact in float in any order; products are not used. */
float mgpu_exact_value(uint64_t seed, int rank, int iter, long long i);
/* Fine exact data: the same integer plus a fraction in 64ths from the same hash (13 significant
 * bits, in [-64, 65)): half (11 bits) and bfloat16 (8) cannot hold them, so a sum made in a
 * narrower type shows, and sums of up to 4000 of them are still exact in float in any order.
 * For exercises whose learner could otherwise move or add the data in a narrower type. */
float mgpu_fine_value(uint64_t seed, int rank, int iter, long long i);
/* A byte pattern for copies: a function of (seed, iter, i). */
uint8_t mgpu_pattern_byte(uint64_t seed, int iter, long long i);

/* The same values from a precomputed key (what the fill kernels use):
 * mgpu_exact_value(s, r, it, i) == mgpu_exact_value_k(mgpu_exact_key(s, r, it), i). */
uint64_t mgpu_exact_key(uint64_t seed, int rank, int iter);
float mgpu_exact_value_k(uint64_t key, long long i);
float mgpu_fine_value_k(uint64_t key, long long i); /* mgpu_fine_value from the same key */
uint64_t mgpu_pattern_key(uint64_t seed, int iter);
uint8_t mgpu_pattern_byte_k(uint64_t key, long long i);
/* Bytes [first, first + n) of pattern `key` into out, on the host, a word at a time:
 * out[j] == mgpu_pattern_byte_k(key, first + j). For verifiers comparing large copies. */
void mgpu_pattern_fill_host(void *out, size_t n, uint64_t key, long long first);
/* A rank's own byte pattern, for data whose sender matters (what one rank sends another):
 * bytes are mgpu_pattern_byte_k(mgpu_rank_pattern_key(seed, rank, iter), i). A split rank may
 * ask for its own rank's key only (like mgpu_exact_key): the run-wide mgpu_pattern_key is
 * known to every split rank, so expected bytes that another rank must deliver come from here. */
uint64_t mgpu_rank_pattern_key(uint64_t seed, int rank, int iter);

/* Passing file descriptors between ranks (mgpu_fd.c; docs/protocol.md §5). Every rank gives
 * n (0..MGPU_MAX_FDS, the same n on every rank) descriptors; afterwards
 * peer_fds[r * n + i] is rank r's descriptor i, copied into this process by the kernel
 * (SCM_RIGHTS over a Unix socket), this rank's own slots being dup()s: the caller owns and
 * closes all world * n of them. Collective: every rank calls it with the same key, in the same
 * order. A missing rank is a harness error after MGPU_RDZV_TIMEOUT_S, like a barrier's. */
#define MGPU_MAX_FDS 16
void mgpu_share_fds(mgpu_ctx *ctx, const char *key, const int *my_fds, int n, int *peer_fds);

/* Monotonic host clock in µs. */
double mgpu_now_us(void);

/* Fault injection (MGPU_FAULT = "kill:rank=R:after_ms=T"): returns R and sets *after_ms = T
 * (0 when absent), or returns -1 when the run has no fault. A malformed value is a harness
 * error. Fault-tolerance drivers kill rank R themselves after T ms. */
int mgpu_fault_kill_rank(const mgpu_ctx *ctx, double *after_ms);

/* ---- CUDA (mgpu_cuda.cu) ------------------------------------------------------------- */
#if defined(__CUDACC__) || defined(MGPU_WITH_CUDA)
#include <cuda_runtime.h>

void mgpu_check_cuda(cudaError_t err, const char *call, const char *file, int line);
#define MGPU_CUDA(call) mgpu_check_cuda((call), #call, __FILE__, __LINE__)
/* After a kernel launch: catches launch errors (and, with MGPU_SYNC_CHECK=1, execution errors). */
void mgpu_check_kernel(const char *file, int line);
#define MGPU_KERNEL() mgpu_check_kernel(__FILE__, __LINE__)

/* Waits until the work queued on `stream` so far has finished, for at most timeout_s seconds.
 * Work still running then is the learner's hang: an error record (where "learner", call `what`)
 * saying "<what> did not finish within N s on rank r of w: <hint>", and exit 1. Errors the
 * stream reports are checked like MGPU_CUDA. Call it after learner code whose kernels wait on
 * other ranks from the device (NVSHMEM signals, flags in peer memory), so that a wait that never
 * ends is named with the rank it hangs on instead of running into the job's timeout. */
void mgpu_wait_or_hang(const mgpu_ctx *ctx, cudaStream_t stream, double timeout_s,
                       const char *what, const char *hint);

/* Holds `stream` for `ns` nanoseconds: queues one kernel of one 1-thread block that sleeps on
 * the GPU's global timer (steps of about 1 µs) until ns have passed, so that work queued on
 * `stream` after it starts that much later. Drivers use it to make a rank or a stream late on
 * purpose, so that learner code missing a wait (an event, a signal, a barrier) reads stale data
 * every time instead of rarely. Occupies one block slot on one SM while it runs; never
 * synchronizes (not even with MGPU_SYNC_CHECK=1). `stream` belongs to the current device (or
 * is 0). More than 10 s is a driver error. Driver API: learner code may not call it. */
void mgpu_delay(cudaStream_t stream, unsigned long long ns);

/* Host memory for what a rank reads back from its GPU and hands over: pinned
 * (cudaMallocHost) in the rank, plain in its verifier, which has no GPU and where the
 * hand-over fills it. Ends the program when there is none. Free with mgpu_host_free. */
void *mgpu_host_alloc(const mgpu_ctx *ctx, size_t bytes);
void mgpu_host_free(const mgpu_ctx *ctx, void *p);

/* A device buffer with guard bands on both sides, poisoned when allocated. */
typedef struct mgpu_buf {
  void *ptr;    /* what the learner gets */
  size_t bytes; /* usable size */
  void *base;   /* allocation start */
  size_t guard; /* guard bytes each side */
  int device;
} mgpu_buf;

mgpu_buf mgpu_alloc(size_t bytes, int device); /* on `device`; restores the current device */
void mgpu_free(mgpu_buf *b);
/* Fills the usable part with 0xFF bytes (NaN for float) and re-arms the guards. */
void mgpu_poison(mgpu_buf *b, cudaStream_t s);
/* Counts guard bytes that changed since the last poison/alloc. Synchronizes. */
long long mgpu_guard_hits(const mgpu_buf *b);

/* Device fills (asynchronous on s; the buffer's device must be current or peer-accessible). */
void mgpu_fill_exact_f32(float *dev, long long n, uint64_t seed, int rank, int iter,
                         cudaStream_t s);
void mgpu_fill_fine_f32(float *dev, long long n, uint64_t seed, int rank, int iter,
                        cudaStream_t s); /* mgpu_fine_value */
void mgpu_fill_pattern(void *dev, size_t bytes, uint64_t seed, int iter, cudaStream_t s);
/* This rank's pattern `iter` (mgpu_rank_pattern_key). */
void mgpu_fill_rank_pattern(void *dev, size_t bytes, uint64_t seed, int rank, int iter,
                            cudaStream_t s);

/* Comparisons: synchronize, copy back, compare every element, fill *r (guards included,
 * poisoned-but-unwritten counted apart), write the "case" record. Return ok. */
int mgpu_check_f32(const char *case_name, const mgpu_buf *got, const float *want_host, long long n,
                   double tol, mgpu_result *r);
/* The same with the expected values in device memory (on got's device or peer-accessible from
 * it): the comparison runs on the GPU, nothing large comes back. */
int mgpu_check_f32_dev(const char *case_name, const mgpu_buf *got, const float *want_dev,
                       long long n, double tol, mgpu_result *r);
/* Expected values are mgpu_pattern_byte(seed, iter, i). */
int mgpu_check_pattern(const char *case_name, const mgpu_buf *got, uint64_t seed, int iter,
                       mgpu_result *r);

/* Timing. `fn` enqueues one operation on `stream` (iteration index `iter`, for inputs that
 * change per iteration). mgpu_time_pair times yours and baseline alternately (ABAB):
 * each sample = `iters` back-to-back operations queued behind a spin gate, released together,
 * timed with CUDA events on `stream` (µs per op) and with the host clock from the release to a
 * device-wide synchronize (wall µs per op). Every rank meets before each release (a file
 * rendezvous like mgpu_barrier) and all ranks release at the same host-clock instant.
 * Samples: until max_reps, or min_reps and the budget spent, or the median is stable
 * (decided from all ranks' samples, so every rank takes the same number).
 * Writes two "timing" records (yours, baseline). Warm-up: `warmup` untimed ops of each.
 * `stream` belongs to the current device. Collective: every rank calls it. Does nothing when
 * ctx->perf == 0 (mgpu_time_one then returns NaN). docs/harness.md has the full rules. */
typedef void (*mgpu_op)(void *arg, int iter, cudaStream_t stream);
typedef struct mgpu_timing {
  const char *case_name;
  double bytes;  /* bytes per operation, for GB/s */
  double factor; /* busbw factor (1 for copies; 2(n-1)/n for all-reduce) */
  const char *metric; /* "busbw", "algbw" or "time" */
  int warmup;    /* default 3 when 0 */
  int iters;     /* ops per sample; default chosen so a sample lasts >= 1 ms when 0 */
} mgpu_timing;

void mgpu_time_pair(mgpu_ctx *ctx, const mgpu_timing *t, mgpu_op yours, void *yours_arg,
                    mgpu_op baseline, void *baseline_arg, cudaStream_t stream);
/* Times one op alone (no baseline); returns the median µs per op and writes a "timing" record
 * with who = `who`. */
double mgpu_time_one(mgpu_ctx *ctx, const mgpu_timing *t, const char *who, mgpu_op op, void *arg,
                     cudaStream_t stream);
/* ---- the CUDA driver API without libcuda, and SM limits (mgpu_cudrv.cu) -------------- */
/* Driver-API entry points the harness resolves through the runtime
 * (cudaGetDriverEntryPointByVersion), so that no program links libcuda: build machines without
 * a GPU driver have none to link against. Drivers hand the table to learner functions that
 * need the driver API (virtual memory management); learner code may not resolve entry points
 * itself (the policy forbids it). Never any cuMulticast* entry: NVLink multicast stays off. */
#include <cuda.h>
typedef struct mgpu_cu {
  CUresult (*GetErrorName)(CUresult error, const char **name);
  CUresult (*DeviceGet)(CUdevice *device, int ordinal);
  CUresult (*MemGetAllocationGranularity)(size_t *granularity, const CUmemAllocationProp *prop,
                                          CUmemAllocationGranularity_flags option);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
                        const CUmemAllocationProp *prop, unsigned long long flags);
  CUresult (*MemRelease)(CUmemGenericAllocationHandle handle);
  CUresult (*MemExportToShareableHandle)(void *shareable, CUmemGenericAllocationHandle handle,
                                         CUmemAllocationHandleType type, unsigned long long flags);
  CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *handle, void *shareable,
                                           CUmemAllocationHandleType type);
  CUresult (*MemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                unsigned long long flags);
  CUresult (*MemAddressFree)(CUdeviceptr ptr, size_t size);
  CUresult (*MemMap)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                     unsigned long long flags);
  CUresult (*MemUnmap)(CUdeviceptr ptr, size_t size);
  CUresult (*MemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
} mgpu_cu;
/* The table, resolved on first use (a harness error names a missing entry point). */
const mgpu_cu *mgpu_cu_api(void);

/* MGPU_CU(call) checks a CUresult like MGPU_CUDA checks a cudaError_t. Inline, so learner code
 * may use it (it calls only mgpu_fail and mgpu_where_for). */
static inline const char *mgpu__cu_name(CUresult r) {
  switch (r) {
  case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
  case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
  case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
  case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
  case CUDA_ERROR_ALREADY_MAPPED: return "CUDA_ERROR_ALREADY_MAPPED";
  case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
  case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
  case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case CUDA_ERROR_NOT_PERMITTED: return "CUDA_ERROR_NOT_PERMITTED";
  case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
  default: return "see CUresult in cuda.h";
  }
}
static inline void mgpu__check_cu(CUresult r, const char *call, const char *file, int line) {
  char msg[160];
  if (r == CUDA_SUCCESS) return;
  snprintf(msg, sizeof msg, "CUDA driver call failed: %s (%d)", mgpu__cu_name(r), (int)r);
  mgpu_fail(mgpu_where_for(file), call, file, line, (long)r, msg);
}
#define MGPU_CU(call) mgpu__check_cu((call), #call, __FILE__, __LINE__)

/* An SM limit: a green context holding `sms` SMs of `device` (at least sms: the split keeps the
 * architecture's granularity; mgpu_sm_limit_sms says how many it got). Work launched while the
 * limit is entered runs on those SMs only, whatever stream the code uses: the limit's stream,
 * stream 0, cudaStreamPerThread or a stream created inside (docs/protocol.md §4, "SM limits").
 *   enter(l, after): makes every later piece of work of the green context wait for the work
 *     queued on `after` so far, then makes the green context current on this thread;
 *   leave(l, join, what): checks that the green context is still current (else a policy error
 *     naming `what`: the code left the limit, e.g. cudaSetDevice or a context of its own), makes
 *     `join` wait for everything queued in the green context, and restores the previous context.
 * Drivers wrap each call of limited learner code in enter/leave and hand it the limit's stream. */
typedef struct mgpu_smlimit mgpu_smlimit;
mgpu_smlimit *mgpu_sm_limit_create(int device, int sms);
int mgpu_sm_limit_sms(const mgpu_smlimit *l);
cudaStream_t mgpu_sm_limit_stream(const mgpu_smlimit *l);
void mgpu_sm_limit_enter(mgpu_smlimit *l, cudaStream_t after);
void mgpu_sm_limit_leave(mgpu_smlimit *l, cudaStream_t join, const char *what);
void mgpu_sm_limit_destroy(mgpu_smlimit *l);
/* Symmetric memory (docs/protocol.md §5, "Symmetric buffers"): every rank allocates `bytes` on
 * its own device with the VMM API, exports it as a file descriptor, receives everyone else's
 * through mgpu_share_fds and maps all of them read/write for its device. Afterwards
 * s->ptr[p] is rank p's buffer as this process addresses it (s->ptr[rank] is this rank's own),
 * zero-filled, s->bytes long (bytes rounded up to the allocation granularity). Loads and
 * stores through s->ptr[p] go over NVLink/PCIe peer access, or stay on the device when ranks
 * share one. Collective, in the same order on every rank, with the same key and bytes; at most
 * MGPU_SYMM_MAX_RANKS ranks, one host. mgpu_symm_free is collective too: nobody unmaps before
 * every rank has synchronized its device. */
#define MGPU_SYMM_MAX_RANKS 8
typedef struct mgpu_symm {
  int rank, world;
  size_t bytes;
  void *ptr[MGPU_SYMM_MAX_RANKS];
  unsigned long long handle[MGPU_SYMM_MAX_RANKS]; /* CUmemGenericAllocationHandle, internal */
} mgpu_symm;
void mgpu_symm_alloc(mgpu_ctx *ctx, const char *key, size_t bytes, mgpu_symm *s);
void mgpu_symm_free(mgpu_ctx *ctx, mgpu_symm *s);
#endif /* CUDA */

/* ---- library error checks (active when the library header is included first) -------- */
#ifdef NCCL_H_
void mgpu_check_nccl(ncclResult_t r, const char *call, const char *file, int line);
#define MGPU_NCCL(call) mgpu_check_nccl((call), #call, __FILE__, __LINE__)
/* Rank 0 creates the id, mgpu_share hands it to every rank. Collective. */
void mgpu_nccl_unique_id(mgpu_ctx *ctx, ncclUniqueId *id);
/* The driver's own NCCL call, such as its baseline, in an exercise whose manifest forbids that
 * collective to the learner: NCCL's watch (docs/protocol.md §4) counts it as the driver's.
 * Every collective NCCL sees outside MGPU_NCCL_OWN is the learner's. */
void mgpu_nccl_own(int enter);
#define MGPU_NCCL_OWN(call)                                                                    \
  do {                                                                                         \
    mgpu_nccl_own(1);                                                                          \
    MGPU_NCCL(call);                                                                           \
    mgpu_nccl_own(0);                                                                          \
  } while (0)
#endif
#if defined(MPI_VERSION)
void mgpu_check_mpi(int err, const char *call, const char *file, int line);
#define MGPU_MPI(call) mgpu_check_mpi((call), #call, __FILE__, __LINE__)
/* MPI aborts on errors by default; this makes MPI_COMM_WORLD return them to MGPU_MPI. */
void mgpu_mpi_errors_return(void);
#endif
#if defined(_NVSHMEM_H_) || defined(_NVSHMEMX_H_)
#define MGPU_NVSHMEM(call)                                                                   \
  do {                                                                                       \
    int mgpu_rc_ = (call);                                                                   \
    if (mgpu_rc_ != 0)                                                                       \
      mgpu_fail(mgpu_where_for(__FILE__), #call, __FILE__, __LINE__, mgpu_rc_,              \
                "NVSHMEM call failed");                                                      \
  } while (0)
#endif
#ifdef _NVSHMEMX_H_
/* nvshmemx_init_attr with a unique id made by rank 0 and handed out through mgpu_share.
 * Collective; call it after mgpu_init (which selected this rank's device). */
static inline void mgpu_nvshmem_init(mgpu_ctx *ctx) {
  nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  int rc;
  if (ctx->rank == 0 && (rc = nvshmemx_get_uniqueid(&id)) != 0)
    mgpu_fail("harness", "nvshmemx_get_uniqueid", __FILE__, __LINE__, rc, "NVSHMEM call failed");
  mgpu_share(ctx, "nvshmem-uid", &id, sizeof id, 0);
  if ((rc = nvshmemx_set_attr_uniqueid_args(ctx->rank, ctx->world, &id, &attr)) != 0)
    mgpu_fail("harness", "nvshmemx_set_attr_uniqueid_args", __FILE__, __LINE__, rc,
              "NVSHMEM call failed");
  if ((rc = nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr)) != 0)
    mgpu_fail("harness", "nvshmemx_init_attr", __FILE__, __LINE__, rc, "NVSHMEM call failed");
  if (nvshmem_my_pe() != ctx->rank || nvshmem_n_pes() != ctx->world) {
    char msg[160];
    snprintf(msg, sizeof msg, "NVSHMEM says PE %d of %d, the launcher rank %d of %d",
             nvshmem_my_pe(), nvshmem_n_pes(), ctx->rank, ctx->world);
    mgpu_fail("harness", "mgpu_nvshmem_init", __FILE__, __LINE__, 0, msg);
  }
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* MGPU_H */
