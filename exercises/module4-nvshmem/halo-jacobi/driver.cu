/*
 * driver.cu — module4/halo-jacobi (course-owned).
 *
 * One process per GPU, one NVSHMEM PE per process (PE = rank). The driver sets the symmetric
 * heap's size, initializes NVSHMEM (and NCCL, for the baseline), makes the grids and hands the
 * results over.
 *
 * Split (docs/protocol.md §4, "The verifier"): the rank program runs NVSHMEM, NCCL, the GPU and
 * the learner's code and hands its rows over; the verifier, a process of its own without a GPU,
 * makes the expected rows on the CPU from the run's seed and records every case. Each PE fills
 * only its own rows (and the fixed boundary row next to them) from its own key (mgpu_exact_key
 * of its rank); the driver then puts each PE's first and last row into its neighbours' halo
 * rows (nvshmemx_putmem_on_stream), so the learner still finds slab[0] complete, halos
 * included. A PE can never make another PE's rows: a halo it did not receive it cannot invent.
 * Run without a verifier, one process does both.
 *
 * Correctness, per case (n = global interior rows; raised to the PE count when smaller, so that
 * every PE owns at least one row; columns: kCorrectNx = 1031, a prime, so no vector width or
 * chunk size divides it). The data are integers in [0, 65521), the update rule is exact
 * (halo-jacobi.h says why), so results are compared with tolerance 0.
 *   1. Symmetric slabs with a guard row before and after each; slab[0] gets this PE's rows and
 *      (from the neighbours' puts) its halo rows, slab[1] NaN except the fixed boundary rows;
 *      guard rows and unused rows hold a pattern.
 *   2. halo_setup (collective). Its signal words must be in the symmetric heap: every PE checks
 *      with nvshmem_ptr and all PEs learn every verdict before anything runs (a non-symmetric
 *      word would fault or hang the first put, so the case fails here instead, cleanly). The
 *      verdict is handed over.
 *   3. kCalls calls of halo_jacobi, kItersPerCall iterations each. Before call j, the PEs whose
 *      (pe + j) is odd queue a kDelayUs spin on their stream first: each call some PEs start
 *      late, in turn, so a PE that does not wait for the right signal value reads a halo that
 *      has not arrived — deterministically, not once in a while.
 *   4. A watchdog: the learner's work must finish within kWatchdogS, else the run fails with a
 *      message about signals that never arrive (a deadlock), instead of a silent time-out.
 *   5. Every PE meets (file rendezvous, then nvshmem_barrier_all: the last puts are complete),
 *      counts the changed bytes of the guard and unused rows of both slabs, and hands rows
 *      0 .. rows+1 of its final buffer (halos included) and that count over. The verifier
 *      computes the same rows on the CPU (the same rule, over the window of rows that can reach
 *      them in that many iterations) and compares every element.
 *
 * Performance (headline "8192x1024"; n = rows PER PE, so every PE has the same work whatever
 * the PE count; columns kPerfNx = 8192): one iteration of yours against one iteration of the
 * classic NCCL version, in the same run, ABAB (mgpu_time_pair, metric "time"): the course's
 * stencil kernel over the slab, then ncclGroupStart, ncclSend/ncclRecv of the edge rows with
 * each neighbour, ncclGroupEnd, all on the stream. Same grid size, same block shape, plain
 * device buffers (a copy of the symmetric slabs once their halos have arrived).
 *
 * After the timing (case "timed-<perf case>"): the timed grids are flat, every column of a row
 * starting with the row's column-0 value; the stencil keeps them so (left = right = the element
 * itself), so the verifier follows ALL the timed iterations as one number per row, for the
 * iteration counts the PE hands over, and compares yours (rows and halo rows) and the
 * baseline's (a check of the course) element by element. Then the same symmetric slabs get
 * fresh rows that vary along the row, the next kAfterCalls calls of kAfterIters iterations
 * (first_iter continuing where the timing stopped, the late starts again), and the baseline
 * as many iterations in its buffers; the verifier compares both element by element. A flat
 * grid cannot show a halo chunk put at the wrong column; the fresh round can.
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
  kAfterCalls = 2,
  kAfterIters = 2,
  kGuardRows = 1,
  kThreads = 256,
  kPerThread = 4,
  kChunk = kThreads * kPerThread
};
static const double kDelayUs = 2000.0; /* the late start of some PEs before each call */
static const double kWatchdogS = 20.0; /* the learner's work takes milliseconds */
static const char *kSymmetricSize = "1073741824"; /* 1 GiB per PE; the perf slabs need 64 MiB */
static const long long kMaxTimedIters = 10000000; /* a sanity bound on the handed-over counts */

/* ---- data ---------------------------------------------------------------------------------- */

__host__ __device__ static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The key of the rows PE `owner` makes for data set `which` (a case, a perf case, the round
 * after the timing). A split rank has the keys of its own PE only. */
static uint64_t owner_key(const mgpu_ctx *ctx, int owner, int which) {
  return mgpu_exact_key(ctx->seed, owner, 0x4A00 + which);
}

/* The initial value of global row grow, column col, made from its owner's key: an integer in
 * [0, 65521). */
__host__ __device__ static inline float init_value(uint64_t key, long long grow, int col) {
  const uint64_t h = mix64(key ^ mix64((uint64_t)grow * 0x100000001B3ull + (uint64_t)col));
  return (float)(h % 65521ull);
}

/* dst rows 0 .. nrows-1 = global rows grow0 .. grow0+nrows-1. flat: every column of a row holds
 * the row's column-0 value (the timed grids: see run_perf). */
__global__ void init_rows(float *dst, int nx, long long grow0, int nrows, uint64_t key, int flat) {
  const long long n = (long long)nrows * nx;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] = init_value(key, grow0 + i / nx, flat ? 0 : (int)(i % nx));
}

static unsigned grid_for(long long n) {
  long long b = (n + kThreads - 1) / kThreads;
  if (b > 4096) b = 4096;
  return (unsigned)(b > 0 ? b : 1);
}

static void launch_init(float *dst, int nx, long long grow0, int nrows, uint64_t key, int flat,
                        cudaStream_t s) {
  if (nrows < 1) return;
  init_rows<<<grid_for((long long)nrows * nx), kThreads, 0, s>>>(dst, nx, grow0, nrows, key, flat);
  MGPU_KERNEL();
}

/* One iteration of rows first .. last (inclusive) of `in` into `out`; one block per chunk of
 * kChunk columns of one row (the baseline's stencil). */
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

static void *host_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p)
    mgpu_fail("driver", "malloc", __FILE__, __LINE__, (long)(bytes >> 20),
              "out of host memory (MiB)");
  return p;
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

/* Rows 0 .. rows+1 of a slab: this PE's rows and its two halo rows, what is handed over. */
static size_t view_elems(const layout *l) { return (size_t)(l->rows + 2) * (size_t)l->nx; }

/* The PE that fills global row g: the owner of an interior row; PE 0 the boundary row 0; the
 * last PE the boundary row ny+1. */
static int owner_of_row(const layout *l, int g) {
  const int base = l->ny / l->npes, extra = l->ny % l->npes;
  if (g <= 0) return 0;
  if (g > l->ny) return l->npes - 1;
  if (g - 1 < extra * (base + 1)) return (g - 1) / (base + 1);
  return extra + (g - 1 - extra * (base + 1)) / base;
}

/* Fills a slab pair from this PE's key: rows 0 .. rows+1 of both NaN, then this PE's rows into
 * buf[0] and the fixed boundary rows (where this PE has them) into both. The halo rows between
 * PEs stay NaN until exchange_halos. flat: constant along each row. */
static void fill_slabs(float *const buf[2], const layout *l, uint64_t key, int flat,
                       cudaStream_t s) {
  int b;
  for (b = 0; b < 2; b++) MGPU_CUDA(cudaMemsetAsync(buf[b], 0xFF, view_elems(l) * sizeof(float), s));
  launch_init(buf[0] + l->nx, l->nx, l->row0, l->rows, key, flat, s);
  for (b = 0; b < 2; b++) {
    if (l->top < 0) launch_init(buf[b], l->nx, 0, 1, key, flat, s);
    if (l->bottom < 0)
      launch_init(buf[b] + (size_t)(l->rows + 1) * l->nx, l->nx, l->ny + 1, 1, key, flat, s);
  }
}

/* Collective, the rank only: every PE puts its first row into the bottom halo of the PE above
 * and its last row into the top halo of the PE below, in the symmetric slab `slab` (the same on
 * every PE), and all puts are complete on return. Every PE's fill_slabs must be queued on s. */
static void exchange_halos(float *slab, const layout *l, cudaStream_t s) {
  const size_t nx = (size_t)l->nx, row_bytes = nx * sizeof(float);
  MGPU_CUDA(cudaStreamSynchronize(s));
  nvshmem_barrier_all(); /* every PE's slabs are filled before a neighbour's row lands in them */
  if (l->top >= 0)
    nvshmemx_putmem_on_stream(slab + (size_t)(halo_rows_of(l->top, l->npes, l->ny) + 1) * nx,
                              slab + nx, row_bytes, l->top, s);
  if (l->bottom >= 0)
    nvshmemx_putmem_on_stream(slab, slab + (size_t)l->rows * nx, row_bytes, l->bottom, s);
  nvshmemx_barrier_all_on_stream(s); /* completes every PE's puts */
  MGPU_CUDA(cudaStreamSynchronize(s));
}

/* ---- symmetric slabs with guards (the rank only) ------------------------------------------- */

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
      h = (uint8_t *)host_alloc(n[part]);
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

/* ---- the reference (where the checks are made; CPU) ---------------------------------------- */

/* halo_update on integers: for integer-valued floats in [0, HALO_MODULUS), all the reference
 * ever holds, the same value (halo-jacobi.h: the sum is exact and reduced the same way), in a
 * form the host compiler vectorizes. */
static inline uint32_t update_u32(uint32_t up, uint32_t down, uint32_t left, uint32_t right) {
  const uint32_t m = (uint32_t)HALO_MODULUS;
  uint32_t s = (up + down) + (left + right);
  s = s >= 2 * m ? s - 2 * m : s;
  s = s >= m ? s - m : s;
  return s;
}

/* Rows row0-1 .. row0+rows (this PE's rows and halo rows, (rows + 2) x nx floats; the caller
 * frees) after `iters` iterations from the initial grid of data set `which`, every row made from
 * its owner's key. Row g after k iterations depends on rows g-k .. g+k only, so the CPU keeps
 * the window of rows within `iters` of the wanted ones and, in iteration it, updates only the
 * rows within iters-1-it of them (the rows that still reach the wanted ones); the fixed boundary
 * rows 0 and ny+1 never change. */
static float *reference_rows(const mgpu_ctx *ctx, const layout *l, int which, long long iters) {
  const size_t nx = (size_t)l->nx;
  const long long a = l->row0 - 1, b = (long long)l->row0 + l->rows;
  const int w0 = a - iters < 0 ? 0 : (int)(a - iters);
  const int w1 = b + iters > l->ny + 1 ? l->ny + 1 : (int)(b + iters);
  const size_t nrow = (size_t)(w1 - w0 + 1), nview = view_elems(l);
  uint32_t *x = (uint32_t *)host_alloc(nrow * nx * sizeof(uint32_t));
  uint32_t *y = (uint32_t *)host_alloc(nrow * nx * sizeof(uint32_t));
  float *out = (float *)host_alloc(nview * sizeof(float));
  uint64_t key = 0;
  long long it;
  int g, owner = -1;
  size_t c;
  for (g = w0; g <= w1; g++) {
    uint32_t *row = x + (size_t)(g - w0) * nx;
    if (owner_of_row(l, g) != owner) {
      owner = owner_of_row(l, g);
      key = owner_key(ctx, owner, which);
    }
    for (c = 0; c < nx; c++) row[c] = (uint32_t)init_value(key, g, (int)c);
  }
  memcpy(y, x, nrow * nx * sizeof(uint32_t));
  for (it = 0; it < iters; it++) {
    const long long reach = iters - 1 - it;
    const int g0 = a - reach < 1 ? 1 : (int)(a - reach);
    const int g1 = b + reach > l->ny ? l->ny : (int)(b + reach);
    uint32_t *t;
    for (g = g0; g <= g1; g++) {
      const uint32_t *in = x + (size_t)(g - w0) * nx, *up = in - nx, *down = in + nx;
      uint32_t *o = y + (size_t)(g - w0) * nx;
      o[0] = update_u32(up[0], down[0], in[nx - 1], in[nx > 1 ? 1 : 0]);
      for (c = 1; c + 1 < nx; c++) o[c] = update_u32(up[c], down[c], in[c - 1], in[c + 1]);
      if (nx > 1) o[nx - 1] = update_u32(up[nx - 1], down[nx - 1], in[nx - 2], in[0]);
    }
    t = x;
    x = y;
    y = t;
  }
  for (c = 0; c < nview; c++) out[c] = (float)x[(size_t)(a - w0) * nx + c];
  free(y);
  free(x);
  return out;
}

/* The timed grids are flat: every column of a row starts with the same value, and the stencil
 * keeps them so (left = right = the element itself), so global row g after k iterations is one
 * number, v_k+1[g] = halo_update(v_k[g-1], v_k[g+1], v_k[g], v_k[g]): the verifier follows all
 * the timed iterations in ny x k steps. Returns v after `iters` iterations, ny + 2 values. */
static float *flat_reference(const mgpu_ctx *ctx, const layout *l, int which, long long iters) {
  const int n = l->ny + 2;
  float *x = (float *)host_alloc((size_t)n * sizeof(float));
  float *y = (float *)host_alloc((size_t)n * sizeof(float));
  uint64_t key = 0;
  long long it;
  int g, owner = -1;
  for (g = 0; g < n; g++) {
    if (owner_of_row(l, g) != owner) {
      owner = owner_of_row(l, g);
      key = owner_key(ctx, owner, which);
    }
    x[g] = init_value(key, g, 0);
  }
  y[0] = x[0];
  y[n - 1] = x[n - 1];
  for (it = 0; it < iters; it++) {
    float *t;
    for (g = 1; g < n - 1; g++) y[g] = halo_update(x[g - 1], x[g + 1], x[g], x[g]);
    t = x;
    x = y;
    y = t;
  }
  free(y);
  return x;
}

/* ---- checks (where the checks are made) ---------------------------------------------------- */

/* Where the wrong elements are: in the halo rows, the edge rows next to them, or further in. */
typedef struct where_wrong {
  long long halo, edge, inner;
} where_wrong;

static void count_where(const layout *l, long long lr, where_wrong *w) {
  if (lr == 0 || lr == l->rows + 1) w->halo++;
  else if (lr == 1 || lr == l->rows) w->edge++;
  else w->inner++;
}

/* Compares rows 0 .. rows+1 of a slab (`got`, host) with `want` (the same rows). Element index
 * = global row * nx + column. */
static void compare_view(const float *got, const float *want, const layout *l, mgpu_result *r,
                         where_wrong *w) {
  const size_t n = view_elems(l);
  size_t i;
  for (i = 0; i < n; i++) {
    const long long before = r->bad + r->unwritten;
    mgpu_result_add(r, (long long)(l->row0 - 1) * l->nx + (long long)i, got[i], want[i], 0.0);
    if (r->bad + r->unwritten != before) count_where(l, (long long)(i / (size_t)l->nx), w);
  }
}

/* The same for a flat grid: row lr of the view must hold v[row0 - 1 + lr] in every column. */
static void compare_flat(const float *got, const float *v, const layout *l, mgpu_result *r,
                         where_wrong *w) {
  const size_t nx = (size_t)l->nx;
  int lr;
  size_t c;
  for (lr = 0; lr <= l->rows + 1; lr++) {
    const float want = v[l->row0 - 1 + lr];
    const float *row = got + (size_t)lr * nx;
    for (c = 0; c < nx; c++) {
      const long long before = r->bad + r->unwritten;
      mgpu_result_add(r, (long long)(l->row0 - 1 + lr) * l->nx + (long long)c, row[c], want, 0.0);
      if (r->bad + r->unwritten != before) count_where(l, lr, w);
    }
  }
}

/* What the signal check found, as every PE learned it: {first PE whose words are unusable or
 * -1, 1: g->sig NULL / 2: not in the symmetric heap}. */
static void signal_message(const int sig[2], char *why, size_t why_len) {
  if (sig[1] == 1)
    snprintf(why, why_len,
             "halo_setup on PE %d left g->sig NULL: allocate the signal words your neighbours "
             "update with nvshmem_calloc (symmetric, zeroed) and point g->sig at them",
             sig[0]);
  else
    snprintf(why, why_len,
             "the signal words halo_setup gave on PE %d (g->sig) are not in the symmetric "
             "heap (nvshmem_ptr returns NULL): memory from cudaMalloc cannot be the "
             "destination of another PE's put or signal; allocate them with nvshmem_calloc",
             sig[0]);
}

/* ---- the learner's part: setup checks and watchdog (the rank only) ------------------------- */

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

/* Every PE checks its own signal words; every PE learns every verdict (collective). Sets
 * sig = {first PE whose words are unusable or -1, why (1 NULL, 2 not symmetric)}. */
static void check_signals(mgpu_ctx *ctx, const halo_grid *g, int sig[2]) {
  int mine = 0, pe;
  if (g->sig == NULL) mine = 1;
  else if (nvshmem_ptr(g->sig, g->pe) == NULL) mine = 2;
  sig[0] = -1;
  sig[1] = 0;
  for (pe = 0; pe < ctx->world; pe++) {
    int v = mine;
    mgpu_share(ctx, "halo-sig-ok", &v, sizeof v, pe);
    if (v && sig[0] < 0) {
      sig[0] = pe;
      sig[1] = v;
    }
  }
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

/* Rows 0 .. rows+1 of a device slab into host memory. */
static void read_view(float *host, const float *dev, const layout *l) {
  MGPU_CUDA(cudaMemcpy(host, dev, view_elems(l) * sizeof(float), cudaMemcpyDeviceToHost));
}

/* ---- correctness --------------------------------------------------------------------------- */

/* The rank: runs the case. sig: the signal check's verdict; got: rows 0 .. rows+1 of the final
 * buffer; *hits: changed guard and unused bytes of both slabs. */
static void compute_case(mgpu_ctx *ctx, const layout *l, int ci, cudaStream_t s, int sig[2],
                         float *got, long long *hits) {
  sym_slabs m;
  halo_grid g;
  int j;
  sym_alloc(&m, l, ctx, s);
  fill_slabs(m.slab, l, owner_key(ctx, ctx->rank, ci), 0, s);
  exchange_halos(m.slab[0], l, s);
  make_grid(&g, l, &m);
  MGPU_LEARNER(halo_setup(&g));
  check_signals(ctx, &g, sig);
  if (sig[0] >= 0) {
    meet(ctx, "halo-case-end");
    MGPU_LEARNER(halo_teardown(&g));
    sym_free(&m);
    return;
  }

  MGPU_CUDA(cudaDeviceSynchronize());
  meet(ctx, "halo-start"); /* every PE's slabs are filled before anyone's first put */
  for (j = 0; j < kCalls; j++) {
    if ((l->pe + j) % 2 == 1) mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
    MGPU_LEARNER(halo_jacobi(&g, (long long)j * kItersPerCall, kItersPerCall, s));
  }
  wait_or_deadlock(ctx, s, "halo_jacobi");
  meet(ctx, "halo-done");
  read_view(got, m.slab[((long long)kCalls * kItersPerCall) & 1], l);
  *hits = sym_guard_hits(&m, l, ctx);
  meet(ctx, "halo-case-end");
  MGPU_LEARNER(halo_teardown(&g));
  sym_free(&m);
}

static void run_case(mgpu_ctx *ctx, int ci, cudaStream_t s) {
  const mgpu_case *c = &ctx->cases[ci];
  const int ny = c->n < ctx->world ? ctx->world : (int)(c->n > 1000000 ? 1000000 : c->n);
  const layout l = make_layout(ctx, kCorrectNx, ny);
  const long long iters = (long long)kCalls * kItersPerCall;
  const size_t bytes = view_elems(&l) * sizeof(float);
  int sig[2] = {-1, 0};
  long long hits = 0;
  float *got, *want;
  char tag[160], why[400];
  mgpu_result r;
  where_wrong w;

  if (c->n > 1000000)
    mgpu_fail("driver", "case", __FILE__, __LINE__, c->n, "more than 1000000 rows");
  got = (float *)mgpu_host_alloc(ctx, bytes);
  if (mgpu_computes(ctx)) compute_case(ctx, &l, ci, s, sig, got, &hits);
  snprintf(tag, sizeof tag, "%s/signals", c->name);
  mgpu_hand_over(ctx, tag, sig, sizeof sig);
  if (sig[0] >= 0) {
    if (mgpu_verifies(ctx)) {
      mgpu_result_init(&r, (long long)view_elems(&l));
      signal_message(sig, why, sizeof why);
      snprintf(r.msg, sizeof r.msg, "%s. Nothing was run.", why);
      mgpu_record_case(c->name, &r, 1);
    }
    mgpu_host_free(ctx, got);
    return;
  }
  snprintf(tag, sizeof tag, "%s/rows", c->name);
  mgpu_hand_over(ctx, tag, got, bytes);
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  if (mgpu_hand_over(ctx, tag, &hits, sizeof hits)) {
    want = reference_rows(ctx, &l, ci, iters);
    mgpu_result_init(&r, (long long)view_elems(&l));
    memset(&w, 0, sizeof w);
    compare_view(got, want, &l, &r, &w);
    free(want);
    r.guard_hits = hits;
    if (r.bad || r.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "this PE (rows %d..%d, halos %d and %d) differs from the reference of the whole "
               "grid in %lld halo-row, %lld edge-row and %lld inner elements after %lld "
               "iterations (%d calls; some PEs start %.0f ms late each call) of %d x %d on %d "
               "PEs. Index = global row x %d + column. A wrong halo: a put to the wrong PE or "
               "row, or one not waited for; wrong rows further in spread one row per iteration "
               "from such a halo",
               l.row0, l.row0 + l.rows - 1, l.row0 - 1, l.row0 + l.rows, w.halo, w.edge, w.inner,
               iters, kCalls, kDelayUs / 1000.0, ny, l.nx, l.npes, l.nx);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg,
               "a write landed outside this PE's rows and halo rows: in the unused rows of a "
               "symmetric slab (this PE owns %d of max_rows %d) or in the guard row around it. "
               "Is the neighbour's halo row computed from the neighbour's row count?",
               l.rows, l.max_rows);
    mgpu_record_case(c->name, &r, 0);
  }
  mgpu_host_free(ctx, got);
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
  (void)s; /* unused in the verifier, where the call below compiles to nothing */
  MGPU_LEARNER(halo_jacobi(a->g, a->iter, 1, s));
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
    MGPU_NCCL_OWN(ncclSend(out + nx, nx, ncclFloat, l->top, a->comm, s));
    MGPU_NCCL_OWN(ncclRecv(out, nx, ncclFloat, l->top, a->comm, s));
  }
  if (l->bottom >= 0) {
    MGPU_NCCL_OWN(ncclSend(out + (size_t)l->rows * nx, nx, ncclFloat, l->bottom, a->comm, s));
    MGPU_NCCL_OWN(ncclRecv(out + (size_t)(l->rows + 1) * nx, nx, ncclFloat, l->bottom, a->comm, s));
  }
  MGPU_NCCL(ncclGroupEnd());
  a->iter++;
}

/* What the rank hands over after the timing: rows 0 .. rows+1 of the timed grids as they are
 * (yours after yiter iterations, the baseline's after biter), then of the fresh round (yours,
 * the baseline's), and the counts. (rows + 2) x nx floats each. */
typedef struct after_bufs {
  float *timed_yours, *timed_base, *fresh_yours, *fresh_base;
  long long facts[3]; /* yiter, biter, guard hits */
} after_bufs;

static void after_alloc(const mgpu_ctx *ctx, after_bufs *h, size_t bytes) {
  memset(h, 0, sizeof *h);
  h->timed_yours = (float *)mgpu_host_alloc(ctx, bytes);
  h->timed_base = (float *)mgpu_host_alloc(ctx, bytes);
  h->fresh_yours = (float *)mgpu_host_alloc(ctx, bytes);
  h->fresh_base = (float *)mgpu_host_alloc(ctx, bytes);
}

static void after_free(const mgpu_ctx *ctx, after_bufs *h) {
  mgpu_host_free(ctx, h->fresh_base);
  mgpu_host_free(ctx, h->fresh_yours);
  mgpu_host_free(ctx, h->timed_base);
  mgpu_host_free(ctx, h->timed_yours);
}

/* The rank, after the timing: copies rows 0 .. rows+1 of the timed grids; then fresh rows of
 * data set `which` (not flat) in the symmetric slabs, the one that iteration ya->iter reads
 * getting the rows and (by the driver's puts) the halos, the other NaN; the same two slabs
 * copied into the baseline's buffers at its parity; kAfterCalls calls of kAfterIters
 * iterations of yours, first_iter continuing from the timing (the signal counts go on), with
 * the late starts of the correctness cases; as many iterations of the baseline; and rows
 * 0 .. rows+1 of both results. */
static void compute_after_timing(mgpu_ctx *ctx, const layout *l, int which, const sym_slabs *m,
                                 const halo_grid *g, const yours_arg *ya, baseline_arg *ba,
                                 cudaStream_t s, after_bufs *h) {
  const size_t bytes = view_elems(l) * sizeof(float);
  const long long y0 = ya->iter, iters = (long long)kAfterCalls * kAfterIters;
  float *fresh[2] = {m->slab[y0 & 1], m->slab[(y0 + 1) & 1]};
  int j;
  (void)g; /* unused in the verifier, where the learner's calls compile to nothing */
  MGPU_CUDA(cudaDeviceSynchronize());
  read_view(h->timed_yours, fresh[0], l);
  read_view(h->timed_base, ba->buf[ba->iter & 1], l);
  h->facts[0] = y0;
  h->facts[1] = ba->iter;
  h->facts[2] = sym_guard_hits(m, l, ctx);

  fill_slabs(fresh, l, owner_key(ctx, ctx->rank, which), 0, s);
  exchange_halos(fresh[0], l, s);
  for (j = 0; j < 2; j++)
    MGPU_CUDA(cudaMemcpyAsync(ba->buf[(ba->iter + j) & 1], fresh[j], bytes,
                              cudaMemcpyDeviceToDevice, s));
  MGPU_CUDA(cudaStreamSynchronize(s));
  meet(ctx, "halo-after-start");
  for (j = 0; j < kAfterCalls; j++) {
    if ((l->pe + j) % 2 == 1) mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
    MGPU_LEARNER(halo_jacobi(g, y0 + (long long)j * kAfterIters, kAfterIters, s));
  }
  wait_or_deadlock(ctx, s, "halo_jacobi (after the timing)");
  meet(ctx, "halo-after-done");
  for (j = 0; j < iters; j++) op_baseline(ba, j, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  read_view(h->fresh_yours, m->slab[(y0 + iters) & 1], l);
  read_view(h->fresh_base, ba->buf[ba->iter & 1], l);
  h->facts[2] += sym_guard_hits(m, l, ctx);
}

/* Both sides: the case "timed-<perf case>" from what compute_after_timing handed over. The
 * baseline's rows are a check of the course: wrong ones fail the driver, not the learner. */
static void check_after_timing(mgpu_ctx *ctx, int pi, const layout *l, int timed, int fresh,
                               after_bufs *h) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const size_t bytes = view_elems(l) * sizeof(float);
  const long long iters = (long long)kAfterCalls * kAfterIters;
  char name[96], tag[160];
  float *want, *v;
  mgpu_result r, rt;
  where_wrong w, wt;
  snprintf(name, sizeof name, "timed-%s", c->name);
  snprintf(tag, sizeof tag, "%s/timed-yours", name);
  mgpu_hand_over(ctx, tag, h->timed_yours, bytes);
  snprintf(tag, sizeof tag, "%s/timed-baseline", name);
  mgpu_hand_over(ctx, tag, h->timed_base, bytes);
  snprintf(tag, sizeof tag, "%s/fresh-yours", name);
  mgpu_hand_over(ctx, tag, h->fresh_yours, bytes);
  snprintf(tag, sizeof tag, "%s/fresh-baseline", name);
  mgpu_hand_over(ctx, tag, h->fresh_base, bytes);
  snprintf(tag, sizeof tag, "%s/facts", name);
  if (!mgpu_hand_over(ctx, tag, h->facts, sizeof h->facts)) return;
  if (h->facts[0] < 1 || h->facts[1] < 1 || h->facts[0] > kMaxTimedIters ||
      h->facts[1] > kMaxTimedIters)
    mgpu_fail("verifier", "iteration counts", __FILE__, __LINE__, (long)h->facts[0],
              "the rank's timed iteration counts are out of range");

  /* The baseline: all its timed iterations, then the fresh round. */
  v = flat_reference(ctx, l, timed, h->facts[1]);
  mgpu_result_init(&r, (long long)view_elems(l));
  memset(&w, 0, sizeof w);
  compare_flat(h->timed_base, v, l, &r, &w);
  free(v);
  want = reference_rows(ctx, l, fresh, iters);
  compare_view(h->fresh_base, want, l, &r, &w);
  if (r.bad || r.unwritten)
    mgpu_fail("driver", "NCCL baseline", __FILE__, __LINE__, (long)(r.bad + r.unwritten),
              "the course's NCCL baseline computed a wrong grid (a bug in the course)");

  /* Yours: every timed iteration (the flat grid), then the fresh round. */
  v = flat_reference(ctx, l, timed, h->facts[0]);
  mgpu_result_init(&rt, (long long)view_elems(l));
  memset(&wt, 0, sizeof wt);
  compare_flat(h->timed_yours, v, l, &rt, &wt);
  free(v);
  mgpu_result_init(&r, (long long)view_elems(l));
  memset(&w, 0, sizeof w);
  compare_view(h->fresh_yours, want, l, &r, &w);
  free(want);
  r.guard_hits = h->facts[2];
  if (rt.bad || rt.unwritten) {
    const long long fresh_wrong = r.bad + r.unwritten;
    r = rt; /* the timed grid's mismatches are the ones shown */
    r.guard_hits = h->facts[2];
    snprintf(r.msg, sizeof r.msg,
             "after the %lld iterations timed on the %d x %d grid (%d rows per PE), this PE's "
             "rows and halo rows differ from the reference advanced as many iterations in %lld "
             "halo-row, %lld edge-row and %lld inner elements (a round with fresh rows "
             "afterwards: %lld wrong): right on the small correctness grids, wrong on this one "
             "or once timed. Every iteration starts from the previous one's result: every call "
             "must do the whole work",
             h->facts[0], l->ny, l->nx, l->rows, wt.halo, wt.edge, wt.inner, fresh_wrong);
  } else if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "after the timed calls, %lld more iterations with fresh rows in the same slabs of "
             "the %d x %d grid (%d rows per PE) differ from the reference in %lld halo-row, "
             "%lld edge-row and %lld inner elements: right on the small correctness grids, "
             "wrong on this one or once timed",
             iters, l->ny, l->nx, l->rows, w.halo, w.edge, w.inner);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg,
             "a write landed outside this PE's rows and halo rows during the timing: in the "
             "unused rows of a symmetric slab (this PE owns %d of max_rows %d) or in the guard "
             "row around it",
             l->rows, l->max_rows);
  mgpu_record_case(name, &r, 0);
}

/* The rank: the timing and the round after it. sig: the signal check's verdict (nothing is
 * timed when it fails; the correctness cases already failed on it). */
static void compute_perf(mgpu_ctx *ctx, int pi, const layout *l, int which, int after,
                         ncclComm_t comm, cudaStream_t s, int sig[2], after_bufs *h) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  sym_slabs m;
  halo_grid g;
  yours_arg ya;
  baseline_arg ba;
  mgpu_timing t;
  int b;

  sym_alloc(&m, l, ctx, s);
  fill_slabs(m.slab, l, owner_key(ctx, ctx->rank, which), 1, s);
  exchange_halos(m.slab[0], l, s);
  memset(&ba, 0, sizeof ba);
  ba.l = *l;
  ba.comm = comm;
  for (b = 0; b < 2; b++) {
    MGPU_CUDA(cudaMalloc((void **)&ba.buf[b], (size_t)(l->max_rows + 2) * l->nx * sizeof(float)));
    MGPU_CUDA(cudaMemcpyAsync(ba.buf[b], m.slab[b], view_elems(l) * sizeof(float),
                              cudaMemcpyDeviceToDevice, s));
  }
  MGPU_CUDA(cudaStreamSynchronize(s));
  make_grid(&g, l, &m);
  MGPU_LEARNER(halo_setup(&g));
  check_signals(ctx, &g, sig);
  if (sig[0] >= 0) {
    meet(ctx, "halo-perf-end");
    MGPU_LEARNER(halo_teardown(&g));
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
  t.bytes = 2.0 * l->nx * sizeof(float); /* halo bytes this PE sends per iteration (at most) */
  t.factor = 1.0;
  t.metric = "time";
  mgpu_time_pair(ctx, &t, op_yours, &ya, op_baseline, &ba, s);
  wait_or_deadlock(ctx, s, "halo_jacobi (timed)");
  MGPU_CUDA(cudaDeviceSynchronize());
  meet(ctx, "halo-perf-done");
  if (ctx->rank == 0) {
    mgpu_value("iterations timed (yours)", (double)ya.iter, "iterations");
    mgpu_value("iterations timed (baseline)", (double)ba.iter, "iterations");
  }

  /* What was timed must have been the exchange and the stencil, every iteration: the timed
   * grids as they are, then fresh rows and a few iterations. */
  compute_after_timing(ctx, l, after, &m, &g, &ya, &ba, s, h);
  meet(ctx, "halo-perf-end");
  MGPU_LEARNER(halo_teardown(&g));
  for (b = 0; b < 2; b++) MGPU_CUDA(cudaFree(ba.buf[b]));
  sym_free(&m);
}

static void run_perf(mgpu_ctx *ctx, int pi, ncclComm_t comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const int per_pe = c->n < 1 || c->n > 65536 ? 1 : (int)c->n;
  const layout l = make_layout(ctx, kPerfNx, per_pe * ctx->world);
  const int which = 1000 + pi, after = 2000 + pi;
  int sig[2] = {-1, 0};
  char tag[160];
  after_bufs h;

  if (c->n < 1 || c->n > 65536)
    mgpu_fail("driver", "perf case", __FILE__, __LINE__, c->n, "rows per PE out of range");
  after_alloc(ctx, &h, view_elems(&l) * sizeof(float));
  if (mgpu_computes(ctx)) compute_perf(ctx, pi, &l, which, after, comm, s, sig, &h);
  snprintf(tag, sizeof tag, "timed-%s/signals", c->name);
  mgpu_hand_over(ctx, tag, sig, sizeof sig);
  if (sig[0] < 0) check_after_timing(ctx, pi, &l, which, after, &h);
  after_free(ctx, &h);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  cudaStream_t stream = NULL;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int k;

  mgpu_init(&ctx, argc, argv);
  if (mgpu_computes(&ctx)) {
    if (setenv("NVSHMEM_SYMMETRIC_SIZE", kSymmetricSize, 1) != 0)
      mgpu_fail("driver", "setenv", __FILE__, __LINE__, 0, "cannot set NVSHMEM_SYMMETRIC_SIZE");
    mgpu_nvshmem_init(&ctx);
    if (nvshmem_my_pe() != ctx.rank || nvshmem_n_pes() != ctx.world)
      mgpu_fail("harness", "nvshmem_my_pe", __FILE__, __LINE__, nvshmem_my_pe(),
                "NVSHMEM's PE numbering differs from the ranks");
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    mgpu_nccl_unique_id(&ctx, &id);
    MGPU_NCCL(ncclCommInitRank(&comm, ctx.world, id, ctx.rank));
  }

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, stream);
  if (ctx.perf)
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, k, comm, stream);

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaDeviceSynchronize());
    MGPU_NCCL(ncclCommDestroy(comm));
    MGPU_CUDA(cudaStreamDestroy(stream));
    nvshmem_finalize();
  }
  return mgpu_finish(&ctx);
}
