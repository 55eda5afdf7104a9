/*
 * driver.cu — module4/halo-jacobi (course-owned).
 *
 * One process per GPU, one NVSHMEM PE per process (PE = rank). The driver sets the symmetric
 * heap's size, initializes NVSHMEM (and NCCL, for the baseline), makes the grids and checks.
 *
 * Correctness, per case (n = global interior rows; raised to the PE count when smaller, so that
 * every PE owns at least one row; columns: kCorrectNx = 1031, a prime, so no vector width or
 * chunk size divides it). The data are integers in [0, 65521), the update rule is exact
 * (halo-jacobi.h says why), so results are compared with tolerance 0.
 *   1. Symmetric slabs with a guard row before and after each; slab[0] filled (halos included),
 *      slab[1] NaN except the fixed boundary rows; guard rows and unused rows hold a pattern.
 *   2. halo_setup (collective). Its signal words must be in the symmetric heap: every PE checks
 *      with nvshmem_ptr and all PEs learn every verdict before anything runs (a non-symmetric
 *      word would fault or hang the first put, so the case fails here instead, cleanly).
 *   3. kCalls calls of halo_jacobi, kItersPerCall iterations each. Before call j, the PEs whose
 *      (pe + j) is odd queue a kDelayUs spin on their stream first: each call some PEs start
 *      late, in turn, so a PE that does not wait for the right signal value reads a halo that
 *      has not arrived — deterministically, not once in a while.
 *   4. A watchdog: the learner's work must finish within kWatchdogS, else the run fails with a
 *      message about signals that never arrive (a deadlock), instead of a silent time-out.
 *   5. Every PE meets (file rendezvous, then nvshmem_barrier_all: the last puts are complete),
 *      then compares its final buffer, rows 0 .. rows+1 (halos included), with a single-GPU
 *      reference of the whole grid that it computes itself on its GPU (course kernel, same
 *      update rule), and checks the guard and unused rows of both slabs.
 *
 * Performance (headline "8192x1024"; n = rows PER PE, so every PE has the same work whatever
 * the PE count; columns kPerfNx = 8192): one iteration of yours against one iteration of the
 * classic NCCL version, in the same run, ABAB (mgpu_time_pair, metric "time"): the course's
 * stencil kernel over the slab, then ncclGroupStart, ncclSend/ncclRecv of the edge rows with
 * each neighbour, ncclGroupEnd, all on the stream. Same grid size, same block shape, plain
 * device buffers. Afterwards both timed runs are checked against the reference for the number
 * of iterations each did: yours as case "timed-<perf case>", the baseline as a driver check.
 *
 * Why 8192 x 1024 per PE: one iteration then moves 32 MiB in and 32 MiB out of HBM per GPU
 * (tens of µs), while the halo exchange moves only 2 x 32 KiB per neighbour. The exchange is
 * pure latency: NCCL's launch and synchronization per iteration against a few signal round
 * trips inside the compute kernel. Much larger slabs hide any exchange behind the compute (the
 * ratio tends to 1); much smaller ones measure kernel launches rather than communication.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include "mgpu.h"
#include "halo-jacobi.h"

enum {
  kCorrectNx = 1031,
  kPerfNx = 8192,
  kCalls = 4,
  kItersPerCall = 25,
  kGuardRows = 1,
  kThreads = 256,
  kPerThread = 4,
  kChunk = kThreads * kPerThread
};
static const double kDelayUs = 2000.0; /* the late start of some PEs before each call */
static const double kWatchdogS = 20.0; /* the learner's work takes milliseconds */
static const char *kSymmetricSize = "1073741824"; /* 1 GiB per PE; the perf slabs need 64 MiB */

/* ---- data ---------------------------------------------------------------------------------- */

__host__ __device__ static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The initial value of global row grow, column col: an integer in [0, 65521). */
__device__ static inline float init_value(uint64_t key, long long grow, int col) {
  const uint64_t h = mix64(key ^ mix64((uint64_t)grow * 0x100000001B3ull + (uint64_t)col));
  return (float)(h % 65521ull);
}

/* dst rows 0 .. nrows-1 = global rows grow0 .. grow0+nrows-1. */
__global__ void init_rows(float *dst, int nx, long long grow0, int nrows, uint64_t key) {
  const long long n = (long long)nrows * nx;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] = init_value(key, grow0 + i / nx, (int)(i % nx));
}

/* One iteration of rows first .. last (inclusive) of `in` into `out`; one block per chunk of
 * kChunk columns of one row. The reference (the whole global grid) and the baseline (one slab)
 * both use it. */
__global__ void __launch_bounds__(kThreads)
    stencil_rows(const float *in, float *out, int nx, int first, int chunks) {
  const int r = first + (int)(blockIdx.x / chunks);
  const int c0 = (int)(blockIdx.x % chunks) * kChunk;
  float *dst = out + (size_t)r * nx;
#pragma unroll
  for (int j = 0; j < kPerThread; j++) {
    const int c = c0 + j * kThreads + threadIdx.x;
    if (c < nx) dst[c] = halo_point(in, nx, r, c);
  }
}

static void launch_stencil(const float *in, float *out, int nx, int first, int last,
                           cudaStream_t s) {
  const int chunks = (nx + kChunk - 1) / kChunk;
  if (last < first) return;
  stencil_rows<<<(unsigned)((last - first + 1) * chunks), kThreads, 0, s>>>(in, out, nx, first,
                                                                           chunks);
  MGPU_KERNEL();
}

static unsigned grid_for(long long n) {
  long long b = (n + kThreads - 1) / kThreads;
  if (b > 4096) b = 4096;
  return (unsigned)(b > 0 ? b : 1);
}

/* ---- layout -------------------------------------------------------------------------------- */

typedef struct layout {
  int pe, npes, nx, ny, rows, row0, max_rows;
  int top, bottom; /* neighbour PEs, -1 at the global boundary */
} layout;

static layout make_layout(const mgpu_ctx *ctx, int nx, int ny) {
  layout l;
  l.pe = ctx->rank;
  l.npes = ctx->world;
  l.nx = nx;
  l.ny = ny;
  l.rows = halo_rows_of(l.pe, l.npes, ny);
  l.row0 = halo_row0_of(l.pe, l.npes, ny);
  l.max_rows = halo_rows_of(0, l.npes, ny);
  l.top = l.pe > 0 ? l.pe - 1 : -1;
  l.bottom = l.pe < l.npes - 1 ? l.pe + 1 : -1;
  return l;
}

static uint64_t data_key(const mgpu_ctx *ctx, int c) {
  return mix64(ctx->seed ^ (0x6a61636fULL + (uint64_t)c));
}

/* Fills a slab pair the way the learner finds them: buf[0] complete with halos, buf[1] NaN
 * except the fixed boundary rows. */
static void fill_slabs(float *const buf[2], const layout *l, uint64_t key, cudaStream_t s) {
  const size_t row_bytes = (size_t)l->nx * sizeof(float);
  init_rows<<<grid_for((long long)(l->rows + 2) * l->nx), kThreads, 0, s>>>(
      buf[0], l->nx, l->row0 - 1, l->rows + 2, key);
  MGPU_KERNEL();
  MGPU_CUDA(cudaMemsetAsync(buf[1], 0xFF, (size_t)(l->rows + 2) * row_bytes, s));
  if (l->top < 0) {
    init_rows<<<grid_for(l->nx), kThreads, 0, s>>>(buf[1], l->nx, 0, 1, key);
    MGPU_KERNEL();
  }
  if (l->bottom < 0) {
    init_rows<<<grid_for(l->nx), kThreads, 0, s>>>(buf[1] + (size_t)(l->rows + 1) * l->nx, l->nx,
                                                    l->ny + 1, 1, key);
    MGPU_KERNEL();
  }
}

/* ---- symmetric slabs with guards ----------------------------------------------------------- */

typedef struct sym_slabs {
  float *base[2];
  float *slab[2];
  size_t total_rows; /* kGuardRows + max_rows + 2 + kGuardRows */
} sym_slabs;

static int guard_iter(int b, int part) { return 7000 + 2 * b + part; }

/* The bytes that must not change: the guard row(s) before row 0, and everything after row
 * rows+1 (unused rows, then the guard rows after). */
static void guard_spans(const sym_slabs *m, const layout *l, int b, char **p, size_t *n) {
  const size_t row_bytes = (size_t)l->nx * sizeof(float);
  p[0] = (char *)m->base[b];
  n[0] = kGuardRows * row_bytes;
  p[1] = (char *)(m->slab[b] + (size_t)(l->rows + 2) * l->nx);
  n[1] = (m->total_rows - kGuardRows - (size_t)(l->rows + 2)) * row_bytes;
}

static void sym_alloc(sym_slabs *m, const layout *l, const mgpu_ctx *ctx, cudaStream_t s) {
  int b, part;
  m->total_rows = 2 * kGuardRows + (size_t)l->max_rows + 2;
  for (b = 0; b < 2; b++) {
    /* Collective, the same size on every PE. */
    m->base[b] = (float *)nvshmem_malloc(m->total_rows * (size_t)l->nx * sizeof(float));
    if (m->base[b] == NULL)
      mgpu_fail("driver", "nvshmem_malloc", __FILE__, __LINE__, 0,
                "the symmetric heap has no room for the slabs");
    m->slab[b] = m->base[b] + (size_t)kGuardRows * l->nx;
    for (part = 0; part < 2; part++) {
      char *p[2];
      size_t n[2];
      guard_spans(m, l, b, p, n);
      if (n[part]) mgpu_fill_pattern(p[part], n[part], ctx->seed, guard_iter(b, part), s);
    }
  }
}

static long long sym_guard_hits(const sym_slabs *m, const layout *l, const mgpu_ctx *ctx) {
  long long hits = 0;
  int b, part;
  size_t i;
  for (b = 0; b < 2; b++)
    for (part = 0; part < 2; part++) {
      char *p[2];
      size_t n[2];
      uint8_t *h;
      guard_spans(m, l, b, p, n);
      if (!n[part]) continue;
      h = (uint8_t *)malloc(n[part]);
      if (!h) mgpu_fail("driver", "malloc", __FILE__, __LINE__, 0, "out of host memory");
      MGPU_CUDA(cudaMemcpy(h, p[part], n[part], cudaMemcpyDeviceToHost));
      for (i = 0; i < n[part]; i++)
        hits += h[i] != mgpu_pattern_byte(ctx->seed, guard_iter(b, part), (long long)i);
      free(h);
    }
  return hits;
}

static void sym_free(sym_slabs *m) {
  nvshmem_free(m->base[1]);
  nvshmem_free(m->base[0]);
}

/* ---- the single-GPU reference -------------------------------------------------------------- */

typedef struct reference {
  float *g[2]; /* (ny + 2) x nx each, boundary rows in both */
  long long iter;
  int nx, ny;
} reference;

static void ref_init(reference *ref, const layout *l, uint64_t key, cudaStream_t s) {
  const long long n = (long long)(l->ny + 2) * l->nx;
  int b;
  ref->nx = l->nx;
  ref->ny = l->ny;
  ref->iter = 0;
  for (b = 0; b < 2; b++) {
    MGPU_CUDA(cudaMalloc((void **)&ref->g[b], (size_t)n * sizeof(float)));
    init_rows<<<grid_for(n), kThreads, 0, s>>>(ref->g[b], l->nx, 0, l->ny + 2, key);
    MGPU_KERNEL();
  }
}

static void ref_advance(reference *ref, long long to_iter, cudaStream_t s) {
  for (; ref->iter < to_iter; ref->iter++)
    launch_stencil(ref->g[ref->iter & 1], ref->g[(ref->iter + 1) & 1], ref->nx, 1, ref->ny, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
}

static void ref_free(reference *ref) {
  MGPU_CUDA(cudaFree(ref->g[1]));
  MGPU_CUDA(cudaFree(ref->g[0]));
}

/* Compares rows 0 .. rows+1 of `got` (a slab on this GPU) with the reference's global rows
 * row0-1 .. row0+rows. Element index = global row * nx + column. Counts where the wrong ones
 * are: in the halo rows, the edge rows next to them, or further in. */
typedef struct where_wrong {
  long long halo, edge, inner;
} where_wrong;

static void compare_slab(const float *got, const reference *ref, const layout *l, mgpu_result *r,
                         where_wrong *w) {
  const size_t n = (size_t)(l->rows + 2) * l->nx;
  float *hg, *hw;
  size_t i;
  MGPU_CUDA(cudaMallocHost((void **)&hg, n * sizeof(float)));
  MGPU_CUDA(cudaMallocHost((void **)&hw, n * sizeof(float)));
  MGPU_CUDA(cudaMemcpy(hg, got, n * sizeof(float), cudaMemcpyDeviceToHost));
  MGPU_CUDA(cudaMemcpy(hw, ref->g[ref->iter & 1] + (size_t)(l->row0 - 1) * l->nx,
                       n * sizeof(float), cudaMemcpyDeviceToHost));
  memset(w, 0, sizeof *w);
  for (i = 0; i < n; i++) {
    const long long lr = (long long)(i / (size_t)l->nx);
    const long long before = r->bad + r->unwritten;
    mgpu_result_add(r, (long long)(l->row0 - 1) * l->nx + (long long)i, hg[i], hw[i], 0.0);
    if (r->bad + r->unwritten != before) {
      if (lr == 0 || lr == l->rows + 1) w->halo++;
      else if (lr == 1 || lr == l->rows) w->edge++;
      else w->inner++;
    }
  }
  MGPU_CUDA(cudaFreeHost(hw));
  MGPU_CUDA(cudaFreeHost(hg));
}

/* ---- the learner's part: setup checks and watchdog ----------------------------------------- */

static void make_grid(halo_grid *g, const layout *l, const sym_slabs *m) {
  memset(g, 0, sizeof *g);
  g->pe = l->pe;
  g->npes = l->npes;
  g->nx = l->nx;
  g->ny = l->ny;
  g->rows = l->rows;
  g->row0 = l->row0;
  g->max_rows = l->max_rows;
  g->slab[0] = m->slab[0];
  g->slab[1] = m->slab[1];
}

/* Every PE checks its own signal words; every PE learns every verdict (collective). Returns the
 * first PE whose words are unusable, or -1, and explains it in why. */
static int check_signals(mgpu_ctx *ctx, const halo_grid *g, char *why, size_t why_len) {
  int mine = 0, pe, bad = -1;
  if (g->sig == NULL) mine = 1;
  else if (nvshmem_ptr(g->sig, g->pe) == NULL) mine = 2;
  for (pe = 0; pe < ctx->world; pe++) {
    int v = mine;
    mgpu_share(ctx, "halo-sig-ok", &v, sizeof v, pe);
    if (v && bad < 0) {
      bad = pe;
      if (v == 1)
        snprintf(why, why_len,
                 "halo_setup on PE %d left g->sig NULL: allocate the signal words your neighbours "
                 "update with nvshmem_calloc (symmetric, zeroed) and point g->sig at them",
                 pe);
      else
        snprintf(why, why_len,
                 "the signal words halo_setup gave on PE %d (g->sig) are not in the symmetric "
                 "heap (nvshmem_ptr returns NULL): memory from cudaMalloc cannot be the "
                 "destination of another PE's put or signal; allocate them with nvshmem_calloc",
                 pe);
    }
  }
  return bad;
}

/* Waits until everything queued on s so far has finished, or blames a deadlock. */
static void wait_or_deadlock(const mgpu_ctx *ctx, cudaStream_t s, const char *what) {
  char hint[256];
  snprintf(hint, sizeof hint,
           "the kernels queued by %s take milliseconds; a signal this PE waits for never "
           "arrives. Does every PE send to the neighbour that waits for it, and wait for a value "
           "its neighbour really reaches in that iteration?",
           what);
  mgpu_wait_or_hang(ctx, s, kWatchdogS, "halo_jacobi", hint);
}

/* All PEs meet after their work has finished; then NVSHMEM completes every put. */
static void meet(mgpu_ctx *ctx, const char *tag) {
  mgpu_barrier(ctx, tag);
  nvshmem_barrier_all();
}

/* ---- correctness --------------------------------------------------------------------------- */

static void run_case(mgpu_ctx *ctx, int ci, cudaStream_t s) {
  const mgpu_case *c = &ctx->cases[ci];
  const int ny = c->n < ctx->world ? ctx->world : (int)(c->n > 1000000 ? 1000000 : c->n);
  const layout l = make_layout(ctx, kCorrectNx, ny);
  const uint64_t key = data_key(ctx, ci);
  const long long iters = (long long)kCalls * kItersPerCall;
  sym_slabs m;
  halo_grid g;
  reference ref;
  mgpu_result r;
  where_wrong w;
  char why[400];
  int j, bad_pe;

  if (c->n > 1000000)
    mgpu_fail("driver", "case", __FILE__, __LINE__, c->n, "more than 1000000 rows");
  sym_alloc(&m, &l, ctx, s);
  fill_slabs(m.slab, &l, key, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  make_grid(&g, &l, &m);
  halo_setup(&g);
  mgpu_result_init(&r, (long long)(l.rows + 2) * l.nx);

  bad_pe = check_signals(ctx, &g, why, sizeof why);
  if (bad_pe >= 0) {
    snprintf(r.msg, sizeof r.msg, "%s. Nothing was run.", why);
    mgpu_record_case(c->name, &r, 1);
    meet(ctx, "halo-case-end");
    halo_teardown(&g);
    sym_free(&m);
    return;
  }

  MGPU_CUDA(cudaDeviceSynchronize());
  meet(ctx, "halo-start"); /* every PE's slabs are filled before anyone's first put */
  for (j = 0; j < kCalls; j++) {
    if ((l.pe + j) % 2 == 1) mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
    halo_jacobi(&g, (long long)j * kItersPerCall, kItersPerCall, s);
  }
  wait_or_deadlock(ctx, s, "halo_jacobi");
  meet(ctx, "halo-done");

  ref_init(&ref, &l, key, s);
  ref_advance(&ref, iters, s);
  compare_slab(m.slab[iters & 1], &ref, &l, &r, &w);
  r.guard_hits = sym_guard_hits(&m, &l, ctx);
  if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "this PE (rows %d..%d, halos %d and %d) differs from the single-GPU reference in "
             "%lld halo-row, %lld edge-row and %lld inner elements after %lld iterations (%d "
             "calls; some PEs start %.0f ms late each call) of %d x %d on %d PEs. Index = "
             "global row x %d + column. A wrong halo: a put to the wrong PE or row, or one not "
             "waited for; wrong rows further in spread one row per iteration from such a halo",
             l.row0, l.row0 + l.rows - 1, l.row0 - 1, l.row0 + l.rows, w.halo, w.edge, w.inner,
             iters, kCalls, kDelayUs / 1000.0, ny, l.nx, l.npes, l.nx);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg,
             "a write landed outside this PE's rows and halo rows: in the unused rows of a "
             "symmetric slab (this PE owns %d of max_rows %d) or in the guard row around it. "
             "Is the neighbour's halo row computed from the neighbour's row count?",
             l.rows, l.max_rows);
  mgpu_record_case(c->name, &r, 0);

  ref_free(&ref);
  meet(ctx, "halo-case-end");
  halo_teardown(&g);
  sym_free(&m);
}

/* ---- performance --------------------------------------------------------------------------- */

typedef struct yours_arg {
  const halo_grid *g;
  long long iter;
} yours_arg;

typedef struct baseline_arg {
  layout l;
  float *buf[2];
  ncclComm_t comm;
  long long iter;
} baseline_arg;

static void op_yours(void *arg, int iter, cudaStream_t s) {
  yours_arg *a = (yours_arg *)arg;
  (void)iter;
  halo_jacobi(a->g, a->iter, 1, s);
  a->iter++;
}

/* The classic NCCL version: compute the slab, then swap edge rows with both neighbours. */
static void op_baseline(void *arg, int iter, cudaStream_t s) {
  baseline_arg *a = (baseline_arg *)arg;
  const layout *l = &a->l;
  const size_t nx = (size_t)l->nx;
  float *in = a->buf[a->iter & 1], *out = a->buf[(a->iter + 1) & 1];
  (void)iter;
  launch_stencil(in, out, l->nx, 1, l->rows, s);
  MGPU_NCCL(ncclGroupStart());
  if (l->top >= 0) {
    MGPU_NCCL(ncclSend(out + nx, nx, ncclFloat, l->top, a->comm, s));
    MGPU_NCCL(ncclRecv(out, nx, ncclFloat, l->top, a->comm, s));
  }
  if (l->bottom >= 0) {
    MGPU_NCCL(ncclSend(out + (size_t)l->rows * nx, nx, ncclFloat, l->bottom, a->comm, s));
    MGPU_NCCL(ncclRecv(out + (size_t)(l->rows + 1) * nx, nx, ncclFloat, l->bottom, a->comm, s));
  }
  MGPU_NCCL(ncclGroupEnd());
  a->iter++;
}

static void run_perf(mgpu_ctx *ctx, int pi, ncclComm_t comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const int per_pe = c->n < 1 || c->n > 65536 ? 1 : (int)c->n;
  const layout l = make_layout(ctx, kPerfNx, per_pe * ctx->world);
  const uint64_t key = data_key(ctx, 1000 + pi);
  sym_slabs m;
  halo_grid g;
  yours_arg ya;
  baseline_arg ba;
  reference ref;
  mgpu_timing t;
  mgpu_result r;
  where_wrong w;
  char why[400], name[80];
  long long first, second;
  int b;

  if (c->n < 1 || c->n > 65536)
    mgpu_fail("driver", "perf case", __FILE__, __LINE__, c->n, "rows per PE out of range");
  sym_alloc(&m, &l, ctx, s);
  fill_slabs(m.slab, &l, key, s);
  memset(&ba, 0, sizeof ba);
  ba.l = l;
  ba.comm = comm;
  for (b = 0; b < 2; b++)
    MGPU_CUDA(cudaMalloc((void **)&ba.buf[b], (size_t)(l.max_rows + 2) * l.nx * sizeof(float)));
  fill_slabs(ba.buf, &l, key, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  make_grid(&g, &l, &m);
  halo_setup(&g);
  if (check_signals(ctx, &g, why, sizeof why) >= 0) {
    /* The correctness cases already failed on this; time nothing. */
    meet(ctx, "halo-perf-end");
    halo_teardown(&g);
    for (b = 0; b < 2; b++) MGPU_CUDA(cudaFree(ba.buf[b]));
    sym_free(&m);
    return;
  }
  MGPU_CUDA(cudaDeviceSynchronize());
  meet(ctx, "halo-perf-start");

  ya.g = &g;
  ya.iter = 0;
  memset(&t, 0, sizeof t);
  t.case_name = c->name;
  t.bytes = 2.0 * l.nx * sizeof(float); /* halo bytes this PE sends per iteration (at most) */
  t.factor = 1.0;
  t.metric = "time";
  mgpu_time_pair(ctx, &t, op_yours, &ya, op_baseline, &ba, s);
  wait_or_deadlock(ctx, s, "halo_jacobi (timed)");
  MGPU_CUDA(cudaDeviceSynchronize());
  meet(ctx, "halo-perf-done");

  /* Both timed runs must have computed the right thing: one reference, advanced to the
   * iteration count of each in turn. */
  if (ctx->rank == 0) {
    mgpu_value("iterations timed (yours)", (double)ya.iter, "iterations");
    mgpu_value("iterations timed (baseline)", (double)ba.iter, "iterations");
  }
  ref_init(&ref, &l, key, s);
  first = ya.iter < ba.iter ? ya.iter : ba.iter;
  second = ya.iter < ba.iter ? ba.iter : ya.iter;
  for (b = 0; b < 2; b++) {
    const int yours = (b == 0) == (ya.iter <= ba.iter);
    ref_advance(&ref, b == 0 ? first : second, s);
    mgpu_result_init(&r, (long long)(l.rows + 2) * l.nx);
    if (yours) {
      compare_slab(m.slab[ya.iter & 1], &ref, &l, &r, &w);
      if (r.bad || r.unwritten)
        snprintf(r.msg, sizeof r.msg,
                 "the %lld iterations timed on the %d x %d grid (%d rows per PE) differ from the "
                 "single-GPU reference in %lld halo-row, %lld edge-row and %lld inner elements: "
                 "right on the small correctness grids, wrong on this one",
                 ya.iter, l.ny, l.nx, (int)c->n, w.halo, w.edge, w.inner);
      snprintf(name, sizeof name, "timed-%s", c->name);
      mgpu_record_case(name, &r, 0);
    } else {
      compare_slab(ba.buf[ba.iter & 1], &ref, &l, &r, &w);
      if (r.bad || r.unwritten)
        mgpu_fail("driver", "NCCL baseline", __FILE__, __LINE__, r.bad + r.unwritten,
                  "the course's NCCL baseline computed a wrong grid (a bug in the course)");
    }
  }
  ref_free(&ref);
  meet(ctx, "halo-perf-end");
  halo_teardown(&g);
  for (b = 0; b < 2; b++) MGPU_CUDA(cudaFree(ba.buf[b]));
  sym_free(&m);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int k;

  mgpu_init(&ctx, argc, argv);
  if (setenv("NVSHMEM_SYMMETRIC_SIZE", kSymmetricSize, 1) != 0)
    mgpu_fail("driver", "setenv", __FILE__, __LINE__, 0, "cannot set NVSHMEM_SYMMETRIC_SIZE");
  mgpu_nvshmem_init(&ctx);
  if (nvshmem_my_pe() != ctx.rank || nvshmem_n_pes() != ctx.world)
    mgpu_fail("harness", "nvshmem_my_pe", __FILE__, __LINE__, nvshmem_my_pe(),
              "NVSHMEM's PE numbering differs from the ranks");
  MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  mgpu_nccl_unique_id(&ctx, &id);
  MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, stream);
  if (ctx.perf)
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, k, comm, stream);

  MGPU_CUDA(cudaDeviceSynchronize());
  MGPU_NCCL(ncclCommDestroy(comm));
  MGPU_CUDA(cudaStreamDestroy(stream));
  nvshmem_finalize();
  return mgpu_finish(&ctx);
}
