/*
 * driver.cu — module2/jacobi-sendrecv (course-owned).
 *
 * One process per GPU, started by mpirun with a CUDA-aware MPI. mgpu_init picks this rank's GPU
 * before MPI_Init; the driver refuses to go on when MPIX_Query_cuda_support() says the MPI
 * takes no device pointers (the learner's MPI_Sendrecv on device rows would crash it). NCCL is
 * initialized as well, for the baseline only.
 *
 * Split (docs/protocol.md §4, "The verifier"): the rank program runs MPI, NCCL, the GPU and the
 * learner's code and hands its slabs over; the verifier, a process of its own without a GPU,
 * makes the expected grid on the CPU from the run's seed and records every case. Each rank
 * fills only its own rows (and the fixed boundary row next to them), from its own key
 * (mgpu_exact_key of its rank): a rank can never make another rank's rows, so a halo it did not
 * receive it cannot invent. Run without a verifier, one process does both.
 *
 * Correctness, per case (n = global interior rows, raised to the rank count when smaller so
 * that every rank owns at least one row; kCorrectNx = 1031 columns, a prime). The data are
 * integers in [0, 65521) and the update rule is exact (jacobi-sendrecv.h says why), so results
 * are compared with tolerance 0.
 *   1. Two slabs per rank (mgpu_alloc: guard bands around each, NaN poison inside). slab[0]
 *      gets this rank's rows; the fixed boundary rows go into both slabs on the first and last
 *      rank; every halo row between ranks stays NaN: it must be received before it is read.
 *   2. kCalls calls of jacobi_run, kItersPerCall iterations each. Before call j, the ranks
 *      whose (rank + j) is odd queue a kDelayUs spin on their stream first. Code that hands
 *      rows to MPI before the stream has computed them sends stale rows from those ranks,
 *      every time.
 *   3. The stream is synchronized, all ranks meet, and the rank hands both slabs and its guard
 *      count over. The verifier computes the rows this rank must hold on the CPU (the same rule,
 *      over the window of rows that can reach them in that many iterations) and compares every
 *      element. The fixed boundary rows of both slabs must be unchanged, the unused rows of a
 *      shorter slab still NaN poison, the guard bands intact.
 *
 * Performance (headline "1Mx16"; n = rows PER RANK, so every rank has the same work on any rank
 * count; kPerfNx = 2^20 columns, so each halo row is 4 MiB): time per iteration of yours against
 * the same iteration with the halos moved by NCCL (ncclGroupStart, ncclSend/ncclRecv of the
 * edge rows with both neighbours, ncclGroupEnd, then the stencil; all queued on the stream,
 * no host synchronization), in the same run, alternating (ABAB). The rows are wide so that the
 * exchange is a real share of the iteration: staging 4 MiB rows through the host costs far
 * more than the stencil.
 *
 * The timing is the driver's own, not mgpu_time_pair: the learner's MPI calls block the host
 * and wait for the stream, which a gate kernel would hold back. Every sample: all ranks meet
 * (MPI_Barrier), then `iters` iterations back to back, timed with the host clock to the end of
 * a cudaStreamSynchronize (the baseline also with CUDA events); the maximum over ranks is
 * recorded (MPI_Allreduce), so every rank records the same series. Afterwards the timed slabs
 * (yours and the baseline's) get fresh rows, poisoned halos and kAfterCalls calls of
 * kAfterIters iterations each (the late starts again); the verifier compares yours as case
 * "timed-<perf case>" and the baseline's as a check of the course (a wrong baseline is the
 * course's fault). The timed iterations are compared too: the timed grids are flat (every column
 * of a row equal, which the stencil keeps), so the verifier follows every timed iteration as one
 * number per row (jac_flat_values) and compares the timed slabs before the fresh round. A call
 * that skips the exchange, or any iteration, only while timed leaves rows that differ.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <cuda_runtime.h>
#include <nccl.h>

#include "mgpu.h"
#include "jacobi-sendrecv.h"
#include "jacobi_ref.h" /* after mgpu.h */

enum {
  kCorrectNx = 1031,
  kPerfNx = 1 << 20,
  kCalls = 4,
  kItersPerCall = 15,
  kAfterCalls = 2,
  kAfterIters = 2,
  kMaxSamples = 200
};
static const double kDelayUs = 5000.0;  /* the late start of some ranks before each call */
static const double kSampleUs = 3000.0; /* a timing sample lasts at least this long */

/* ---- data ---------------------------------------------------------------------------------- */

__host__ __device__ static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The key of the rows rank `owner` makes for data set `which` (a case, a perf case, the round
 * after the timing). A split rank has the keys of its own rank only. */
static uint64_t owner_key(const mgpu_ctx *ctx, int owner, int which) {
  return mgpu_exact_key(ctx->seed, owner, 0x4A00 + which);
}

/* The initial value of global row grow, column col, made from its owner's key: an integer in
 * [0, 65521). */
__host__ __device__ static inline float init_value(uint64_t key, long long grow, int col) {
  const uint64_t h = mix64(key ^ mix64((uint64_t)grow * 0x100000001B3ull + (uint64_t)col));
  return (float)(h % 65521ull);
}

/* dst rows 0 .. nrows-1 = global rows grow0 .. grow0+nrows-1. flat: every column of a row
 * holds the row's column-0 value (the timed grids: see run_perf). */
__global__ void init_rows(float *dst, int nx, long long grow0, int nrows, uint64_t key, int flat) {
  const long long n = (long long)nrows * nx;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] = init_value(key, grow0 + i / nx, flat ? 0 : (int)(i % nx));
}

static void launch_init(float *dst, int nx, long long grow0, int nrows, uint64_t key, int flat,
                        cudaStream_t s) {
  const long long n = (long long)nrows * nx;
  long long blocks = (n + 255) / 256;
  if (nrows < 1) return;
  if (blocks > 8192) blocks = 8192;
  init_rows<<<(unsigned)blocks, 256, 0, s>>>(dst, nx, grow0, nrows, key, flat);
  MGPU_KERNEL();
}

/* ---- layout -------------------------------------------------------------------------------- */

typedef struct layout {
  int rank, world, nx, ny, rows, row0, max_rows;
  int up, down; /* neighbour ranks, -1 at the grid's edge */
} layout;

static layout make_layout(const mgpu_ctx *ctx, int nx, int ny) {
  layout l;
  l.rank = ctx->rank;
  l.world = ctx->world;
  l.nx = nx;
  l.ny = ny;
  l.rows = jac_rows_of(ctx->rank, ctx->world, ny);
  l.row0 = jac_row0_of(ctx->rank, ctx->world, ny);
  l.max_rows = jac_rows_of(0, ctx->world, ny);
  l.up = ctx->rank > 0 ? ctx->rank - 1 : -1;
  l.down = ctx->rank < ctx->world - 1 ? ctx->rank + 1 : -1;
  return l;
}

static size_t slab_elems(const layout *l) { return (size_t)(l->max_rows + 2) * (size_t)l->nx; }

static int owner_of_row(const layout *l, int g) { return jac_owner_of_row(l->ny, l->world, g); }

/* slab[0]: this rank's rows; both slabs: the fixed boundary rows where this rank has them. All
 * from this rank's key; flat: constant along each row. */
static void fill_slabs(float *slab[2], const layout *l, uint64_t key, int flat, cudaStream_t s) {
  int b;
  launch_init(slab[0] + l->nx, l->nx, l->row0, l->rows, key, flat, s);
  for (b = 0; b < 2; b++) {
    if (l->up < 0) launch_init(slab[b], l->nx, 0, 1, key, flat, s);
    if (l->down < 0)
      launch_init(slab[b] + (size_t)(l->rows + 1) * l->nx, l->nx, l->ny + 1, 1, key, flat, s);
  }
}

static void *host_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) mgpu_fail("driver", "malloc", __FILE__, __LINE__, (long)(bytes >> 20), "out of host memory (MiB)");
  return p;
}

/* ---- MPI (the rank only) ------------------------------------------------------------------- */

static int mpi_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support();
#else
  return -1;
#endif
}

static void start_mpi(mgpu_ctx *ctx, int *argc, char ***argv, MPI_Comm *learner) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING + 1], msg[600], *cut;
  int rank, world, len = 0, aware;
  MGPU_MPI(MPI_Init(argc, argv));
  mgpu_mpi_errors_return();
  MGPU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MGPU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world));
  if (rank != ctx->rank || world != ctx->world) {
    snprintf(msg, sizeof msg, "MPI says rank %d of %d, the launcher's environment %d of %d", rank,
             world, ctx->rank, ctx->world);
    mgpu_fail("harness", "MPI_Comm_rank", __FILE__, __LINE__, rank, msg);
  }
  MGPU_MPI(MPI_Get_library_version(version, &len));
  version[len < 0 ? 0 : len > MPI_MAX_LIBRARY_VERSION_STRING ? MPI_MAX_LIBRARY_VERSION_STRING : len] = 0;
  if ((cut = strchr(version, '\n')) != NULL) *cut = 0;
  if ((cut = strchr(version, ',')) != NULL) *cut = 0;
  aware = mpi_cuda_aware();
  if (aware == 0) {
    snprintf(msg, sizeof msg,
             "%s is not CUDA-aware: MPIX_Query_cuda_support() returned 0, so device rows passed "
             "to MPI_Sendrecv would crash it. Nothing was run. Use a CUDA-aware MPI "
             "(`mgpu-learn doctor` shows which MPI the course found)",
             version);
    mgpu_fail("harness", "MPIX_Query_cuda_support", __FILE__, __LINE__, 0, msg);
  }
  if (ctx->rank == 0)
    mgpu_note("MPI: %s; MPIX_Query_cuda_support() = %s", version,
              aware == 1 ? "1 (CUDA-aware)" : "not available (this MPI cannot say; assumed aware)");
  MGPU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, learner));
  MGPU_MPI(MPI_Comm_set_errhandler(*learner, MPI_ERRORS_RETURN));
}

static double max_over_ranks(double v) {
  double out = v;
  MGPU_MPI(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

/* ---- the reference (where the checks are made; CPU) ---------------------------------------- */

/* The rows rank l->rank must hold after `iters` iterations from the initial grid of data set
 * `which`: rows row0 .. row0+rows-1, rows x nx floats (the caller frees). Row g after k
 * iterations depends on rows g-k .. g+k only, so the CPU sweeps that window: a window edge
 * that is not a fixed boundary row is not updated, and the error that makes travels one row per
 * iteration, never as far as this rank's rows. Every row starts from its owner's key. */
static float *reference_rows(const mgpu_ctx *ctx, const layout *l, int which, long long iters) {
  const size_t nx = (size_t)l->nx;
  const long long lo = (long long)l->row0 - iters, hi = (long long)l->row0 + l->rows - 1 + iters;
  const int w0 = lo < 0 ? 0 : (int)lo, w1 = hi > l->ny + 1 ? l->ny + 1 : (int)hi;
  const size_t nrow = (size_t)(w1 - w0 + 1), own = (size_t)l->rows * nx;
  uint32_t *a = (uint32_t *)host_alloc(nrow * nx * sizeof(uint32_t));
  uint32_t *b = (uint32_t *)host_alloc(nrow * nx * sizeof(uint32_t));
  float *out = (float *)host_alloc(own * sizeof(float));
  const uint32_t *at;
  long long it;
  int g;
  size_t c;
  for (g = w0; g <= w1; g++) {
    const uint64_t key = owner_key(ctx, owner_of_row(l, g), which);
    uint32_t *row = a + (size_t)(g - w0) * nx;
    for (c = 0; c < nx; c++) row[c] = (uint32_t)init_value(key, g, (int)c);
  }
  for (it = 0; it < iters; it++) {
    uint32_t *t;
    jac_ref_sweep(a, b, w0, w1, l->ny, nx);
    t = a;
    a = b;
    b = t;
  }
  at = a + (size_t)(l->row0 - w0) * nx;
  for (c = 0; c < own; c++) out[c] = (float)at[c];
  free(b);
  free(a);
  return out;
}

/* The timed grids are flat: every column of a row starts with the same value, and the stencil
 * keeps them so (jac_ref_flat_sweep), so global row g after k iterations is one number: the
 * verifier follows all the timed iterations in ny x k steps. Returns the ny + 2 row values
 * after `iters` iterations. */
static float *flat_reference(const mgpu_ctx *ctx, const layout *l, int which, long long iters) {
  const int n = l->ny + 2;
  uint32_t *a = (uint32_t *)host_alloc((size_t)n * sizeof(uint32_t));
  int g;
  for (g = 0; g < n; g++) a[g] = (uint32_t)init_value(owner_key(ctx, owner_of_row(l, g), which), g, 0);
  return jac_flat_values(a, l->ny, iters);
}

/* ---- checks (where the checks are made) ---------------------------------------------------- */

typedef struct findings {
  long long edge, inner;  /* wrong owned elements: in the first/last row, or further in */
  long long boundary;     /* changed elements of the fixed boundary rows */
  long long unused;       /* written elements of the unused rows of a shorter slab */
} findings;

static int is_poison_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u == 0xFFFFFFFFu;
}

/* Compares `got` (this rank's rows, rows x nx, host) with `want`, element index = global row x
 * nx + column; counts where the wrong ones are. */
static void compare_rows(const float *got, const float *want, const layout *l, mgpu_result *r,
                         findings *f) {
  const size_t n = (size_t)l->rows * l->nx;
  size_t i;
  for (i = 0; i < n; i++) {
    const long long lr = (long long)(i / (size_t)l->nx) + 1;
    const long long before = r->bad + r->unwritten;
    mgpu_result_add(r, (long long)l->row0 * l->nx + (long long)i, got[i], want[i], 0.0);
    if (r->bad + r->unwritten != before) {
      if (lr == 1 || lr == l->rows) f->edge++;
      else f->inner++;
    }
  }
}

/* The fixed boundary rows (where this rank has them) and the unused rows of both slabs, in the
 * host copies of the slabs. */
static void check_frame(float *const hslab[2], const layout *l, uint64_t key, findings *f) {
  const size_t nx = (size_t)l->nx, unused = (size_t)(l->max_rows - l->rows) * nx;
  size_t i;
  int b;
  for (b = 0; b < 2; b++) {
    const float *h = hslab[b];
    if (l->up < 0)
      for (i = 0; i < nx; i++) f->boundary += h[i] != init_value(key, 0, (int)i);
    if (l->down < 0) {
      const float *d = h + (size_t)(l->rows + 1) * nx;
      for (i = 0; i < nx; i++) f->boundary += d[i] != init_value(key, l->ny + 1, (int)i);
    }
    for (i = 0; i < unused; i++) f->unused += !is_poison_bits(h[(size_t)(l->rows + 2) * nx + i]);
  }
}

/* ---- correctness --------------------------------------------------------------------------- */

static jac_grid make_grid(const layout *l, float *slab0, float *slab1, MPI_Comm comm) {
  jac_grid g;
  memset(&g, 0, sizeof g);
  g.comm = comm;
  g.rank = l->rank;
  g.world = l->world;
  g.nx = l->nx;
  g.ny = l->ny;
  g.rows = l->rows;
  g.row0 = l->row0;
  g.max_rows = l->max_rows;
  g.slab[0] = slab0;
  g.slab[1] = slab1;
  return g;
}

/* The rank: runs the case and copies both slabs into hslab. */
static long long compute_case(const mgpu_ctx *ctx, const layout *l, int ci, MPI_Comm comm,
                              cudaStream_t s, float *hslab[2]) {
  const size_t bytes = slab_elems(l) * sizeof(float);
  mgpu_buf b[2];
  float *slab[2];
  jac_grid *g;
  long long hits;
  int j;
  for (j = 0; j < 2; j++) {
    b[j] = mgpu_alloc(bytes, ctx->device);
    slab[j] = (float *)b[j].ptr;
  }
  fill_slabs(slab, l, owner_key(ctx, ctx->rank, ci), 0, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  g = (jac_grid *)host_alloc(sizeof *g);
  *g = make_grid(l, slab[0], slab[1], comm);
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (j = 0; j < kCalls; j++) {
    if ((l->rank + j) % 2 == 1) mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
    MGPU_LEARNER(jacobi_run(g, (long long)j * kItersPerCall, kItersPerCall, s));
  }
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  free(g);
  for (j = 0; j < 2; j++) MGPU_CUDA(cudaMemcpy(hslab[j], slab[j], bytes, cudaMemcpyDeviceToHost));
  hits = mgpu_guard_hits(&b[0]) + mgpu_guard_hits(&b[1]);
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  mgpu_free(&b[1]);
  mgpu_free(&b[0]);
  return hits;
}

static void run_case(mgpu_ctx *ctx, int ci, MPI_Comm comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->cases[ci];
  const int ny = c->n < ctx->world ? ctx->world : (int)(c->n > 100000 ? 100000 : c->n);
  const layout l = make_layout(ctx, kCorrectNx, ny);
  const long long iters = (long long)kCalls * kItersPerCall;
  const size_t bytes = slab_elems(&l) * sizeof(float);
  float *hslab[2], *want;
  long long hits = 0;
  char tag[160];
  mgpu_result r;
  findings f;
  int j;

  if (c->n > 100000) mgpu_fail("driver", "case", __FILE__, __LINE__, c->n, "more than 100000 rows");
  for (j = 0; j < 2; j++) hslab[j] = (float *)host_alloc(bytes);
  if (mgpu_computes(ctx)) hits = compute_case(ctx, &l, ci, comm, s, hslab);
  for (j = 0; j < 2; j++) {
    snprintf(tag, sizeof tag, "%s/slab%d", c->name, j);
    mgpu_hand_over(ctx, tag, hslab[j], bytes);
  }
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  if (mgpu_hand_over(ctx, tag, &hits, sizeof hits)) {
    want = reference_rows(ctx, &l, ci, iters);
    mgpu_result_init(&r, (long long)l.rows * l.nx);
    memset(&f, 0, sizeof f);
    compare_rows(hslab[iters & 1] + l.nx, want, &l, &r, &f);
    check_frame(hslab, &l, owner_key(ctx, ctx->rank, ci), &f);
    r.guard_hits = hits;
    if (r.bad || r.unwritten)
      snprintf(r.msg, sizeof r.msg,
               "this rank's rows %d..%d differ from the single-GPU reference in %lld elements of "
               "its first or last row and %lld further in, after %lld iterations (%d calls; some "
               "ranks start %.0f ms late each call) of a %d x %d grid on %d ranks. Index = global "
               "row x %d + column. Wrong edge rows come from a wrong halo: a row exchanged with the "
               "wrong neighbour, received after the stencil read it, or sent before the stream had "
               "computed it; they spread one row further in per iteration",
               l.row0, l.row0 + l.rows - 1, f.edge, f.inner, iters, kCalls, kDelayUs / 1000.0, ny,
               l.nx, l.world, l.nx);
    else if (f.boundary)
      snprintf(r.msg, sizeof r.msg,
               "%lld elements of the fixed boundary row%s changed on rank %d: it has no neighbour "
               "on that side (use MPI_PROC_NULL there), and nothing may be received into it",
               f.boundary, l.up < 0 && l.down < 0 ? "s" : "", l.rank);
    else if (f.unused)
      snprintf(r.msg, sizeof r.msg,
               "%lld elements of the unused rows of this rank's slabs were written (it owns %d rows, "
               "the slabs have room for %d): a halo row placed by another rank's row count?",
               f.unused, l.rows, l.max_rows);
    else if (r.guard_hits)
      snprintf(r.msg, sizeof r.msg, "a write landed outside this rank's slabs (in the guard bands)");
    mgpu_record_case(c->name, &r, f.boundary != 0 || f.unused != 0);
    free(want);
  }
  for (j = 0; j < 2; j++) free(hslab[j]);
}

/* ---- performance --------------------------------------------------------------------------- */

typedef struct nccl_state {
  layout l;
  float *buf[2];
  ncclComm_t comm;
  long long iter;
} nccl_state;

/* The baseline's iteration: the halos of in by NCCL (one group), then the same stencil. */
static void baseline_iteration(nccl_state *a, cudaStream_t s) {
  const layout *l = &a->l;
  const size_t nx = (size_t)l->nx;
  float *in = a->buf[a->iter & 1], *out = a->buf[(a->iter + 1) & 1];
  MGPU_NCCL(ncclGroupStart());
  if (l->up >= 0) {
    MGPU_NCCL_OWN(ncclSend(in + nx, nx, ncclFloat, l->up, a->comm, s));
    MGPU_NCCL_OWN(ncclRecv(in, nx, ncclFloat, l->up, a->comm, s));
  }
  if (l->down >= 0) {
    MGPU_NCCL_OWN(ncclSend(in + (size_t)l->rows * nx, nx, ncclFloat, l->down, a->comm, s));
    MGPU_NCCL_OWN(ncclRecv(in + (size_t)(l->rows + 1) * nx, nx, ncclFloat, l->down, a->comm, s));
  }
  MGPU_NCCL(ncclGroupEnd());
  jac_stencil(in, out, l->nx, l->rows, s);
  a->iter++;
}

/* The rank, after the timing: copies this rank's rows of the timed grids; then fresh rows of
 * data set `which` (not flat) in the timed slabs of yours and of the baseline, halos poisoned,
 * kAfterCalls calls of kAfterIters iterations (the late starts as in the correctness cases),
 * and this rank's rows of both results. */
static void compute_after_timing(const mgpu_ctx *ctx, const layout *l, int which, mgpu_buf yb[2],
                                 long long yiter, nccl_state *ba, jac_grid *g, cudaStream_t s,
                                 jac_after *h) {
  const size_t rows_bytes = (size_t)l->rows * l->nx * sizeof(float);
  const uint64_t key = owner_key(ctx, ctx->rank, which);
  float *slab[2] = {(float *)yb[0].ptr, (float *)yb[1].ptr};
  const long long iters = (long long)kAfterCalls * kAfterIters;
  int j;
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_CUDA(cudaMemcpy(h->timed_yours, slab[yiter & 1] + l->nx, rows_bytes, cudaMemcpyDeviceToHost));
  MGPU_CUDA(cudaMemcpy(h->timed_base, ba->buf[ba->iter & 1] + l->nx, rows_bytes, cudaMemcpyDeviceToHost));
  h->facts[0] = yiter;
  h->facts[1] = ba->iter;
  h->facts[2] = mgpu_guard_hits(&yb[0]) + mgpu_guard_hits(&yb[1]);

  mgpu_poison(&yb[0], s);
  mgpu_poison(&yb[1], s);
  fill_slabs(slab, l, key, 0, s);
  for (j = 0; j < 2; j++)
    MGPU_CUDA(cudaMemsetAsync(ba->buf[j], 0xFF, slab_elems(l) * sizeof(float), s));
  fill_slabs(ba->buf, l, key, 0, s);
  ba->iter = 0;
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (j = 0; j < kAfterCalls; j++) {
    if ((l->rank + j) % 2 == 1) mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
    MGPU_LEARNER(jacobi_run(g, (long long)j * kAfterIters, kAfterIters, s));
  }
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (j = 0; j < iters; j++) baseline_iteration(ba, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_CUDA(cudaMemcpy(h->fresh_yours, slab[iters & 1] + l->nx, rows_bytes, cudaMemcpyDeviceToHost));
  MGPU_CUDA(cudaMemcpy(h->fresh_base, ba->buf[iters & 1] + l->nx, rows_bytes, cudaMemcpyDeviceToHost));
  h->facts[2] += mgpu_guard_hits(&yb[0]) + mgpu_guard_hits(&yb[1]);
}

/* Counts the elements of this rank's rows (rows x nx at got) that differ from their row's
 * value in v (global rows), into r and f. */
static void compare_flat(const float *got, const float *v, const layout *l, mgpu_result *r,
                         findings *f) {
  const size_t nx = (size_t)l->nx;
  int lr;
  size_t c;
  for (lr = 1; lr <= l->rows; lr++) {
    const float want = v[l->row0 + lr - 1];
    const float *row = got + (size_t)(lr - 1) * nx;
    for (c = 0; c < nx; c++) {
      const long long before = r->bad + r->unwritten;
      mgpu_result_add(r, (long long)(l->row0 + lr - 1) * l->nx + (long long)c, row[c], want, 0.0);
      if (r->bad + r->unwritten != before) {
        if (lr == 1 || lr == l->rows) f->edge++;
        else f->inner++;
      }
    }
  }
}

/* Both sides: the case "timed-<perf case>" from what compute_after_timing handed over. The
 * baselines' rows are a check of the course: wrong ones fail the driver, not the learner. */
static void check_after_timing(mgpu_ctx *ctx, int pi, const layout *l, int timed, int fresh,
                               jac_after *h) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const size_t rows_bytes = (size_t)l->rows * l->nx * sizeof(float);
  const long long iters = (long long)kAfterCalls * kAfterIters;
  char name[96];
  float *want, *v;
  mgpu_result r, rt;
  findings f, ft;
  snprintf(name, sizeof name, "timed-%s", c->name);
  if (!jac_after_hand_over(ctx, name, h, rows_bytes, 3, 2)) return;

  /* The baseline: all its timed iterations, then the fresh round. */
  v = flat_reference(ctx, l, timed, h->facts[1]);
  mgpu_result_init(&r, (long long)l->rows * l->nx);
  memset(&f, 0, sizeof f);
  compare_flat(h->timed_base, v, l, &r, &f);
  free(v);
  want = reference_rows(ctx, l, fresh, iters);
  compare_rows(h->fresh_base, want, l, &r, &f);
  if (r.bad || r.unwritten)
    mgpu_fail("driver", "NCCL baseline", __FILE__, __LINE__, (long)(r.bad + r.unwritten),
              "the course's NCCL baseline computed a wrong grid (a bug in the course)");

  /* Yours: every timed iteration (the flat grid), then the fresh round. */
  v = flat_reference(ctx, l, timed, h->facts[0]);
  mgpu_result_init(&rt, (long long)l->rows * l->nx);
  memset(&ft, 0, sizeof ft);
  compare_flat(h->timed_yours, v, l, &rt, &ft);
  free(v);
  mgpu_result_init(&r, (long long)l->rows * l->nx);
  memset(&f, 0, sizeof f);
  compare_rows(h->fresh_yours, want, l, &r, &f);
  free(want);
  r.guard_hits = h->facts[2];
  if (rt.bad || rt.unwritten) {
    const mgpu_result fresh_r = r;
    r = rt; /* the timed grid's mismatches are the ones shown */
    r.guard_hits = h->facts[2];
    snprintf(r.msg, sizeof r.msg,
             "after the %lld timed iterations of the %d x %d grid (%d rows per rank), this rank's "
             "rows differ from the reference advanced as many iterations in %lld edge-row and "
             "%lld inner elements (a round with fresh rows afterwards: %lld wrong). Every "
             "iteration starts from the previous one's result: a call that does less than its "
             "iterations once it has been called often enough fails here. Every call must do "
             "the whole work",
             h->facts[0], l->ny, l->nx, l->rows, ft.edge, ft.inner,
             fresh_r.bad + fresh_r.unwritten);
  } else if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "after the timed calls, %lld more iterations with fresh rows in the same slabs of the "
             "%d x %d grid (%d rows per rank) differ from the single-GPU reference in %lld "
             "edge-row and %lld inner elements: right on the small correctness grids, wrong on "
             "this one or once timed. Every call must do the whole work",
             iters, l->ny, l->nx, l->rows, f.edge, f.inner);
  else if (r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "a write landed outside this rank's slabs (in the guard bands)");
  mgpu_record_case(name, &r, 0);
}

static void run_perf(mgpu_ctx *ctx, int pi, ncclComm_t nccl, MPI_Comm comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const int per_rank = c->n < 1 || c->n > 4096 ? 1 : (int)c->n;
  const layout l = make_layout(ctx, kPerfNx, per_rank * ctx->world);
  const int which = 1000 + pi, after = 2000 + pi;
  const size_t rows_bytes = (size_t)l.rows * l.nx * sizeof(float);
  jac_after h;
  const int min_reps = ctx->min_reps > 0 ? ctx->min_reps : 5;
  int max_reps = ctx->max_reps > 0 ? ctx->max_reps : 30;
  const double budget_us = (ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms : 20000.0) * 1e3 / ctx->nperf_cases;
  double yours_us[kMaxSamples], base_us[kMaxSamples], base_wall[kMaxSamples];
  mgpu_buf yb[2];
  float *slab[2];
  nccl_state ba;
  jac_grid g;
  long long yiter = 0;
  cudaEvent_t e0, e1;
  double t0, one, start;
  int iters, i, k, stop;

  if (c->n < 1 || c->n > 4096)
    mgpu_fail("driver", "perf case", __FILE__, __LINE__, c->n, "rows per rank out of range");
  jac_after_alloc(&h, rows_bytes);
  if (!mgpu_computes(ctx)) { /* the verifier: the checks after the timing only */
    check_after_timing(ctx, pi, &l, which, after, &h);
    jac_after_free(&h);
    return;
  }
  if (max_reps > kMaxSamples) max_reps = kMaxSamples;
  for (i = 0; i < 2; i++) {
    yb[i] = mgpu_alloc(slab_elems(&l) * sizeof(float), ctx->device);
    slab[i] = (float *)yb[i].ptr;
  }
  memset(&ba, 0, sizeof ba);
  ba.l = l;
  ba.comm = nccl;
  for (i = 0; i < 2; i++) MGPU_CUDA(cudaMalloc((void **)&ba.buf[i], slab_elems(&l) * sizeof(float)));
  fill_slabs(slab, &l, owner_key(ctx, ctx->rank, which), 1, s);
  fill_slabs(ba.buf, &l, owner_key(ctx, ctx->rank, which), 1, s);
  MGPU_CUDA(cudaStreamSynchronize(s));
  g = make_grid(&l, slab[0], slab[1], comm);
  MGPU_CUDA(cudaEventCreate(&e0));
  MGPU_CUDA(cudaEventCreate(&e1));

  /* Warm-up, then one timed iteration of yours sets the operations per sample. */
  for (i = 0; i < 2; i++) {
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MGPU_LEARNER(jacobi_run(&g, yiter, 1, s));
    yiter++;
    baseline_iteration(&ba, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
  }
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  t0 = mgpu_now_us();
  MGPU_LEARNER(jacobi_run(&g, yiter, 1, s));
  yiter++;
  MGPU_CUDA(cudaStreamSynchronize(s));
  one = max_over_ranks(mgpu_now_us() - t0);
  iters = (int)ceil(kSampleUs / (one > 1 ? one : 1));
  if (iters < 1) iters = 1;
  if (iters > 1000) iters = 1000;

  start = mgpu_now_us();
  for (k = 0, stop = 0; !stop; k++) {
    float ms = 0;
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    MGPU_LEARNER(jacobi_run(&g, yiter, iters, s));
    MGPU_CUDA(cudaStreamSynchronize(s));
    yours_us[k] = max_over_ranks((mgpu_now_us() - t0) / iters);
    yiter += iters;

    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    MGPU_CUDA(cudaEventRecord(e0, s));
    for (i = 0; i < iters; i++) baseline_iteration(&ba, s);
    MGPU_CUDA(cudaEventRecord(e1, s));
    MGPU_CUDA(cudaStreamSynchronize(s));
    base_wall[k] = max_over_ranks((mgpu_now_us() - t0) / iters);
    MGPU_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    base_us[k] = max_over_ranks(ms * 1e3 / iters);

    stop = k + 1 >= max_reps || (k + 1 >= min_reps && mgpu_now_us() - start > budget_us);
    MGPU_MPI(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD));
  }
  mgpu_record_timing(c->name, "yours", 2.0 * l.nx * sizeof(float), 1.0, "time", yours_us, yours_us, k);
  mgpu_record_timing(c->name, "baseline", 2.0 * l.nx * sizeof(float), 1.0, "time", base_us, base_wall, k);
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  if (ctx->rank == 0) {
    mgpu_value("iterations timed (yours)", (double)yiter, "iterations");
    mgpu_value("iterations timed (baseline)", (double)ba.iter, "iterations");
  }

  /* What was timed must have been the exchange and the stencil, every iteration: the timed
   * grids as they are, then fresh rows and a few iterations. */
  compute_after_timing(ctx, &l, after, yb, yiter, &ba, &g, s, &h);
  check_after_timing(ctx, pi, &l, which, after, &h);

  MGPU_CUDA(cudaEventDestroy(e1));
  MGPU_CUDA(cudaEventDestroy(e0));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  for (i = 0; i < 2; i++) {
    MGPU_CUDA(cudaFree(ba.buf[i]));
    mgpu_free(&yb[i]);
  }
  jac_after_free(&h);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  MPI_Comm comm = MPI_COMM_NULL;
  cudaStream_t stream = NULL;
  ncclUniqueId id;
  ncclComm_t nccl = NULL;
  int k;

  mgpu_init(&ctx, argc, argv); /* picks this rank's GPU before MPI_Init (none in the verifier) */
  if (mgpu_computes(&ctx)) {
    start_mpi(&ctx, &argc, &argv, &comm);
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, comm, stream);
  if (ctx.perf) {
    if (mgpu_computes(&ctx)) {
      mgpu_nccl_unique_id(&ctx, &id);
      MGPU_NCCL(ncclCommInitRank(&nccl, ctx.world, id, ctx.rank));
    }
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, k, nccl, comm, stream);
    if (mgpu_computes(&ctx)) MGPU_NCCL(ncclCommDestroy(nccl));
  }

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaStreamDestroy(stream));
    MGPU_MPI(MPI_Comm_free(&comm));
    MGPU_MPI(MPI_Finalize());
  }
  return mgpu_finish(&ctx);
}
