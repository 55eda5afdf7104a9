/*
 * driver.cu — module2/jacobi-overlap (course-owned).
 *
 * One process per GPU, started by mpirun with a CUDA-aware MPI. mgpu_init picks this rank's
 * GPU before MPI_Init; the driver refuses to go on when MPIX_Query_cuda_support() says the MPI
 * cannot take device pointers (handing it one would crash the process).
 *
 * Split (docs/protocol.md §4, "The verifier"): the rank program runs MPI, the GPU and the
 * learner's code and hands its rows over; the verifier, a process of its own without a GPU,
 * makes the expected rows on the CPU from the run's seed and records every case. Every rank
 * fills only its own rows (and the fixed boundary row next to them) from its own key
 * (mgpu_exact_key of its rank), so a halo it did not receive it cannot make. Run without a
 * verifier, one process does both.
 *
 * Correctness, per case (n = global interior rows, raised to the rank count when smaller so
 * that every rank owns a row; kCorrectNx = 1031 columns, a prime). The data are integers in
 * [0, 65521) and the update rule is exact (jacobi-overlap.h), so results are compared with
 * tolerance 0. "three" gives a rank with a single row on 2 and 3 ranks.
 *   The case runs kCalls calls of jacobi_overlap (1, 1, 3 and 35 iterations), each from fresh
 *   rows (a key per call; the fixed boundary rows keep the case's), so that every call is
 *   judged on its own and a mistake in one call does not spill into the next. Before call j:
 *   1. the stream is drained; this rank's rows of `in` are overwritten with STALE values
 *      (integers of another key of this rank), and its halo rows that face a neighbour are set
 *      to NaN; then all ranks meet (MPI_Barrier);
 *   2. a kDelayUs spin kernel and the copy that puts the call's fresh rows in are queued on the
 *      (non-blocking) stream. Code that hands `in`'s rows to MPI before the stream has finished
 *      sends the stale values — every time, since the copy is milliseconds away;
 *   3. in calls 1 and 2, the odd ranks (call 1) or the even ranks (call 2) sleep kLateUs on
 *      the host before calling, longer than the delay: the halos their neighbours expect from
 *      them cannot arrive before that, so code that computes the edge rows before MPI_Waitall
 *      reads the NaN halo, every time, not once in a while. Calls 0 and 3 start together:
 *      an MPI that reads the sender's rows only when the receive is posted (a CUDA IPC "get")
 *      would otherwise fetch a late rank's rows after its copy had landed, and hide step 2's
 *      mistake.
 *   After each call the stream is synchronized and the rank hands over its rows and the halo
 *   rows that the call's last exchange filled. The verifier compares the rows with its CPU
 *   reference (every call's result counts) and, for the diagnosis, classifies the halo rows:
 *   right, the neighbour's stale values, NaN (nothing arrived), or something else. The first
 *   call where anything is wrong decides the cause this rank's record explains. Guard bands
 *   around both slabs must stay untouched.
 *
 * Performance (headline "8192x1024": 8192 columns, n = 1024 rows PER RANK, so every rank has
 * the same work on any rank count): `iters` iterations of yours against `iters` iterations of
 * the same iteration without overlap: cudaStreamSynchronize, both halos exchanged at once
 * (MPI_Irecv and MPI_Isend with both neighbours, MPI_Waitall; MPI_PROC_NULL at the ends), then
 * one kernel over all rows, on the driver's own slabs and its own communicator. Same kernels,
 * same sizes. (It used to be jacobi-sendrecv's two MPI_Sendrecv in turn: on 3 or more ranks
 * that pays two latencies on a middle rank, and an iteration that merely posted both directions
 * together met the target without overlapping anything.)
 *
 * Why the driver times by itself instead of with mgpu_time_pair: both operations block the
 * host (a stream synchronize before MPI reads device rows, MPI_Waitall / MPI_Sendrecv), so the
 * harness's start gate, which holds the stream until every rank has queued its work, would time
 * out on every sample (2 s each) before falling back to ungated timing. Here every sample is:
 * all ranks meet (MPI_Barrier), run `iters` iterations, synchronize the stream; host time /
 * iters, the maximum over ranks (MPI_Allreduce), so every rank records the same series. Yours
 * and the baseline alternate (ABAB). The records are ordinary "timing" records, metric "time".
 * The timed grids are flat (every column of a row starts with the same value, and the stencil
 * keeps them so), so the verifier follows every timed iteration of both as one number per row:
 * afterwards both timed runs are compared with that reference advanced to the number of
 * iterations each did; then both get fresh rows that vary along the row and kAfterIters more
 * iterations, compared element by element. Yours is case "timed-<perf case>", the baseline a
 * check of the course.
 *
 * Why 8192 x 1024 rows per rank (the α-β model of module 0, figures from shared/FACTS.md):
 * an iteration streams 32 MiB in and 32 MiB out of HBM per GPU, about 16 µs at the ~4.2 TB/s
 * of a local device-to-device copy (2098 GB/s each way); the halo is one 32 KiB row each way,
 * α + n/β ≈ 10.9 µs + 0.3 µs with CUDA-aware Open MPI 4.1.4 (8 B ping-pong 10.9 µs one way,
 * ~118 GB/s at 2 MiB, on 2×H200). So the exchange is about 11 of ~35 µs of a blocking
 * iteration (with ~8 µs of synchronize and launch, not measured yet): 30 %. The interior (16 µs)
 * is long enough to hide all of it, so the overlapped iteration is ~24 µs: ratio ~1.4 at best.
 * Much larger slabs make the exchange negligible (ratio -> 1); much smaller ones leave nothing
 * to hide it behind.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif
#include <cuda_runtime.h>

#include "mgpu.h"
#include "jacobi-overlap.h"
#include "jacobi_ref.h"

enum {
  kCorrectNx = 1031,
  kPerfNx = 8192,
  kCalls = 4,
  kThreads = 256,
  kPerThread = 4,
  kChunk = kThreads * kPerThread,
  kMaxSamples = 200,
  kTagUp = 11,
  kTagDown = 12,
  kAfterIters = 4
};
static const int kItersOfCall[kCalls] = {1, 1, 3, 35};
static const double kDelayUs = 10000.0; /* the copy that restores `in` waits this long */
static const double kLateUs = 40000.0;  /* late ranks call this much later (> kDelayUs) */
static const double kSampleUs = 3000.0; /* a timing sample lasts at least this long */

/* ---- data ---------------------------------------------------------------------------------- */

__host__ __device__ static inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The value of global row grow, column col under `key`: an integer in [0, 65521). */
__host__ __device__ static inline float init_value(uint64_t key, long long grow, int col) {
  const uint64_t h = mix64(key ^ mix64((uint64_t)grow * 0x100000001B3ull + (uint64_t)col));
  return (float)(h % 65521ull);
}

/* The key of the rows rank `owner` makes for data set `which`. A split rank has the keys of
 * its own rank only. Data sets: case c's boundary rows case_set(c), the rows of its call j
 * call_set(c, j) and their stale values stale_set(c, j); perf case p's timed grids 1000 + p,
 * the round after the timing 2000 + p. */
static uint64_t owner_key(const mgpu_ctx *ctx, int owner, int which) {
  return mgpu_exact_key(ctx->seed, owner, 0x4F00 + which);
}
static int case_set(int c) { return 64 * c; }
static int call_set(int c, int j) { return 64 * c + 1 + j; }
static int stale_set(int c, int j) { return 64 * c + 33 + j; }

/* dst rows 0 .. nrows-1 = global rows grow0 .. grow0+nrows-1 of `key`; flat: every column of
 * a row holds its column-0 value. */
__global__ void init_rows(float *dst, int nx, long long grow0, int nrows, uint64_t key, int flat) {
  const long long n = (long long)nrows * nx;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    dst[i] = init_value(key, grow0 + i / nx, flat ? 0 : (int)(i % nx));
}

/* Rows first, first + step, ..., nrows of them; one block per kChunk columns of a row. */
__global__ void __launch_bounds__(kThreads)
    stencil_rows(const float *in, float *out, int nx, int first, int step, int chunks) {
  const int r = first + (int)(blockIdx.x / chunks) * step;
  const int c0 = (int)(blockIdx.x % chunks) * kChunk;
  const float *row = in + (size_t)r * nx;
  float *dst = out + (size_t)r * nx;
#pragma unroll
  for (int j = 0; j < kPerThread; j++) {
    const int c = c0 + j * kThreads + threadIdx.x;
    if (c < nx)
      dst[c] = jac_update(row[c - nx], row[c + nx], row[c == 0 ? nx - 1 : c - 1],
                          row[c == nx - 1 ? 0 : c + 1]);
  }
}

static void launch_stencil(const float *in, float *out, int nx, int first, int nrows, int step,
                           cudaStream_t s) {
  const int chunks = (nx + kChunk - 1) / kChunk;
  if (nrows <= 0) return;
  stencil_rows<<<(unsigned)(nrows * chunks), kThreads, 0, s>>>(in, out, nx, first, step, chunks);
  MGPU_KERNEL();
}

static unsigned grid_for(long long n) {
  long long b = (n + kThreads - 1) / kThreads;
  if (b > 4096) b = 4096;
  return (unsigned)(b > 0 ? b : 1);
}

/* ---- the course kernels the learner calls -------------------------------------------------- */

extern "C" void jac_compute(const jac_grid *g, const float *in, float *out, int first, int last,
                            cudaStream_t stream) {
  if (last < first) return;
  if (first < 1 || last > g->rows) {
    char msg[160];
    snprintf(msg, sizeof msg, "rows %d .. %d asked for; this rank owns rows 1 .. %d", first, last,
             g->rows);
    mgpu_fail("learner", "jac_compute", __FILE__, __LINE__, first, msg);
  }
  launch_stencil(in, out, g->nx, first, last - first + 1, 1, stream);
}

extern "C" void jac_compute_edges(const jac_grid *g, const float *in, float *out,
                                  cudaStream_t stream) {
  launch_stencil(in, out, g->nx, 1, g->rows > 1 ? 2 : 1, g->rows > 1 ? g->rows - 1 : 0, stream);
}

/* ---- MPI ----------------------------------------------------------------------------------- */

static int mpi_cuda_aware(void) {
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  return MPIX_Query_cuda_support();
#else
  return -1;
#endif
}

/* MPI_Init after mgpu_init (the device is chosen), the launcher's rank checked against MPI's,
 * a CUDA-aware MPI required, and a duplicate of MPI_COMM_WORLD that returns errors for each of
 * `n` users. */
static void start_mpi(mgpu_ctx *ctx, int *argc, char ***argv, MPI_Comm *comms, int n) {
  char version[MPI_MAX_LIBRARY_VERSION_STRING + 1], msg[600], *nl;
  int rank, world, len = 0, aware, i;
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
  if ((nl = strchr(version, '\n')) != NULL) *nl = 0;
  if ((nl = strchr(version, ',')) != NULL) *nl = 0;
  aware = mpi_cuda_aware();
  if (aware == 0) {
    snprintf(msg, sizeof msg,
             "%s is not CUDA-aware: MPIX_Query_cuda_support() returned 0, so a device pointer "
             "passed to MPI would crash it. Nothing was run. Use a CUDA-aware MPI "
             "(`mgpu-learn doctor` shows which MPI the course found)",
             version);
    mgpu_fail("harness", "MPIX_Query_cuda_support", __FILE__, __LINE__, 0, msg);
  }
  if (ctx->rank == 0)
    mgpu_note("MPI: %s; MPIX_Query_cuda_support() = %s", version,
              aware == 1 ? "1 (CUDA-aware)" : "not available (this MPI cannot say; assumed aware)");
  for (i = 0; i < n; i++) {
    MGPU_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]));
    MGPU_MPI(MPI_Comm_set_errhandler(comms[i], MPI_ERRORS_RETURN));
  }
}

static double max_over_ranks(double v) {
  double out = v;
  MGPU_MPI(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return out;
}

/* ---- layout and the reference -------------------------------------------------------------- */

typedef struct layout {
  int rank, world, nx, ny, rows, row0;
  int top, bottom; /* neighbour ranks, -1 at the global boundary */
} layout;

static layout make_layout(const mgpu_ctx *ctx, int nx, int ny) {
  layout l;
  l.rank = ctx->rank;
  l.world = ctx->world;
  l.nx = nx;
  l.ny = ny;
  l.rows = jac_rows_of(l.rank, l.world, ny);
  l.row0 = jac_row0_of(l.rank, l.world, ny);
  l.top = l.rank > 0 ? l.rank - 1 : -1;
  l.bottom = l.rank < l.world - 1 ? l.rank + 1 : -1;
  return l;
}

/* A slab pair as the learner finds it: slab 0 holds rows row0-1 .. row0+rows of the grid of
 * `key` (this rank's) except the halos that face a neighbour (NaN); slab 1 is NaN except the
 * fixed boundary rows. */
static void fill_slabs(float *const slab[2], const layout *l, uint64_t key, int flat,
                       cudaStream_t s) {
  const size_t row_bytes = (size_t)l->nx * sizeof(float);
  float *bottom_row[2] = {slab[0] + (size_t)(l->rows + 1) * l->nx,
                          slab[1] + (size_t)(l->rows + 1) * l->nx};
  init_rows<<<grid_for((long long)(l->rows + 2) * l->nx), kThreads, 0, s>>>(
      slab[0], l->nx, l->row0 - 1, l->rows + 2, key, flat);
  MGPU_KERNEL();
  MGPU_CUDA(cudaMemsetAsync(slab[1], 0xFF, (size_t)(l->rows + 2) * row_bytes, s));
  if (l->top >= 0) MGPU_CUDA(cudaMemsetAsync(slab[0], 0xFF, row_bytes, s));
  else {
    init_rows<<<grid_for(l->nx), kThreads, 0, s>>>(slab[1], l->nx, 0, 1, key, flat);
    MGPU_KERNEL();
  }
  if (l->bottom >= 0) MGPU_CUDA(cudaMemsetAsync(bottom_row[0], 0xFF, row_bytes, s));
  else {
    init_rows<<<grid_for(l->nx), kThreads, 0, s>>>(bottom_row[1], l->nx, l->ny + 1, 1, key, flat);
    MGPU_KERNEL();
  }
}

static float *host_alloc(size_t bytes) {
  float *p = (float *)malloc(bytes ? bytes : 4);
  if (!p) mgpu_fail("driver", "malloc", __FILE__, __LINE__, (long)(bytes >> 20), "out of host memory (MiB)");
  return p;
}

/* ---- the reference (where the checks are made; CPU) ---------------------------------------- */

static int owner_of_row(const layout *l, int g) { return jac_owner_of_row(l->ny, l->world, g); }

/* The starting grid: interior rows from their owners' keys of data set `rows_set`, the fixed
 * boundary rows from theirs of `bound_set`. */
typedef struct grid_sets {
  int rows_set, bound_set, flat;
} grid_sets;

static float start_value(const mgpu_ctx *ctx, const layout *l, grid_sets gs, int g, int c) {
  const int set = g == 0 || g == l->ny + 1 ? gs.bound_set : gs.rows_set;
  return init_value(owner_key(ctx, owner_of_row(l, g), set), g, gs.flat ? 0 : c);
}

/* After `iters` iterations from the grid of gs: this rank's rows into rows_out (rows x nx), and
 * the rows next to them (global rows row0-1 and row0+rows, 2 x nx) as they were one iteration
 * earlier into halo_out (NULL: not wanted). Row g after k iterations depends on rows g-k .. g+k
 * only, so the CPU sweeps that window; a window edge that is not a fixed boundary row is not
 * updated, and the error that makes travels one row per iteration, never as far as the rows
 * asked for. */
static void reference_rows(const mgpu_ctx *ctx, const layout *l, grid_sets gs, long long iters,
                           float *rows_out, float *halo_out) {
  const size_t nx = (size_t)l->nx, own = (size_t)l->rows * nx;
  const long long lo = (long long)l->row0 - 1 - iters, hi = (long long)l->row0 + l->rows + iters;
  const int w0 = lo < 0 ? 0 : (int)lo, w1 = hi > l->ny + 1 ? l->ny + 1 : (int)hi;
  const size_t nrow = (size_t)(w1 - w0 + 1);
  uint32_t *a = (uint32_t *)host_alloc(nrow * nx * sizeof(uint32_t));
  uint32_t *b = (uint32_t *)host_alloc(nrow * nx * sizeof(uint32_t));
  const uint32_t *at;
  long long it;
  int g, side;
  size_t c;
  for (g = w0; g <= w1; g++)
    for (c = 0; c < nx; c++)
      a[(size_t)(g - w0) * nx + c] = (uint32_t)start_value(ctx, l, gs, g, (int)c);
  for (it = 0; it < iters; it++) {
    uint32_t *t;
    if (halo_out && it == iters - 1)
      for (side = 0; side < 2; side++) {
        const int gh = side == 0 ? l->row0 - 1 : l->row0 + l->rows;
        at = a + (size_t)(gh - w0) * nx;
        for (c = 0; c < nx; c++) halo_out[side * nx + c] = (float)at[c];
      }
    jac_ref_sweep(a, b, w0, w1, l->ny, nx);
    t = a;
    a = b;
    b = t;
  }
  at = a + (size_t)(l->row0 - w0) * nx;
  for (c = 0; c < own; c++) rows_out[c] = (float)at[c];
  free(b);
  free(a);
}

/* A flat grid stays flat (jac_ref_flat_sweep), so global row g after k iterations is one
 * number: the verifier follows every timed iteration so. Returns the ny + 2 row values after
 * `iters` iterations. */
static float *flat_reference(const mgpu_ctx *ctx, const layout *l, int set, long long iters) {
  const int n = l->ny + 2;
  const grid_sets gs = {set, set, 1};
  uint32_t *a = (uint32_t *)host_alloc((size_t)n * sizeof(uint32_t));
  int g;
  for (g = 0; g < n; g++) a[g] = (uint32_t)start_value(ctx, l, gs, g, 0);
  return jac_flat_values(a, l->ny, iters);
}

/* The learner's view of this rank's slabs. */
static jac_grid make_grid(const layout *l, float *const slab[2]) {
  jac_grid g;
  memset(&g, 0, sizeof g);
  g.rank = l->rank;
  g.world = l->world;
  g.nx = l->nx;
  g.ny = l->ny;
  g.rows = l->rows;
  g.row0 = l->row0;
  g.slab[0] = slab[0];
  g.slab[1] = slab[1];
  return g;
}

/* ---- correctness --------------------------------------------------------------------------- */

/* Causes, most telling first (the lowest code any rank found wins). */
enum cause { kNone = 0, kStale = 1, kEarlyEdges = 2, kNoHalo = 3, kOtherHalo = 4, kOther = 5 };

typedef struct finding {
  int cause, call, facing; /* facing: the neighbour rank whose halo row was wrong, or -1 */
} finding;

/* Compares this rank's rows after a call (got: rows x nx) with the reference (want) into r,
 * and classifies the halo rows the call's last exchange filled (got_halo, want_halo: the top
 * then the bottom one, nx each). A halo value equal to the neighbour's stale value (its key of
 * stale_which) in a one-iteration call counts as stale. Returns the cause seen at this call
 * (kNone when all is right) and, in *facing, the neighbour whose halo row was wrong (or -1). */
static int check_call(const mgpu_ctx *ctx, const layout *l, const float *got, const float *want,
                      const float *got_halo, const float *want_halo, int iters, int stale_which,
                      mgpu_result *r, int *facing) {
  const int nx = l->nx;
  const size_t own = (size_t)l->rows * nx;
  long long edge_bad = 0, inner_bad = 0;
  int side, stale_side = -1, nan_side = -1, other_side = -1;
  size_t i;

  for (i = 0; i < own; i++) {
    const long long before = r->bad + r->unwritten;
    const int lr = 1 + (int)(i / (size_t)nx);
    mgpu_result_add(r, (long long)(l->row0 - 1 + lr) * nx + (long long)(i % nx), got[i], want[i],
                    0.0);
    if (r->bad + r->unwritten != before) {
      if (lr == 1 || lr == l->rows) edge_bad++;
      else inner_bad++;
    }
  }
  for (side = 0; side < 2; side++) {
    const int nb = side == 0 ? l->top : l->bottom;
    const long long grow = side == 0 ? l->row0 - 1 : l->row0 + l->rows;
    const float *h = got_halo + (size_t)side * nx, *w = want_halo + (size_t)side * nx;
    long long st = 0, nn = 0, ot = 0;
    uint64_t skey;
    int c;
    if (nb < 0) continue;
    skey = owner_key(ctx, nb, stale_which);
    for (c = 0; c < nx; c++) {
      if (h[c] == w[c]) continue;
      if (isnan(h[c])) nn++;
      else if (iters == 1 && h[c] == init_value(skey, grow, c)) st++;
      else ot++;
    }
    if (st * 2 > nx && stale_side < 0) stale_side = nb;
    else if (nn && nan_side < 0) nan_side = nb;
    else if ((ot || st) && other_side < 0) other_side = nb;
  }
  *facing = -1;
  if (stale_side >= 0) return *facing = stale_side, kStale;
  if (nan_side >= 0) return *facing = nan_side, kNoHalo;
  if (other_side >= 0) return *facing = other_side, kOtherHalo;
  if (edge_bad && !inner_bad) return kEarlyEdges;
  if (edge_bad || inner_bad) return kOther;
  return kNone;
}

static void explain(char *out, size_t len, const finding *f, int rank, int world) {
  switch (f->cause) {
  case kStale:
    snprintf(out, len,
             "Rank %d received in call %d the rows rank %d held BEFORE the copy the driver had "
             "queued on rank %d's stream (behind a %.0f ms delay) ran: MPI_Isend read device "
             "rows that work on the stream had not finished writing. MPI knows nothing about "
             "CUDA streams: cudaStreamSynchronize(stream) before MPI touches rows a kernel or "
             "copy writes.",
             rank, f->call, f->facing, f->facing, kDelayUs / 1000.0);
    break;
  case kEarlyEdges:
    snprintf(out, len,
             "Rank %d's halo rows were right after call %d, but its edge rows were computed "
             "before they arrived (a neighbour called %.0f ms late; the halos still held the "
             "driver's NaN): queue jac_compute_edges only after MPI_Waitall has returned.",
             rank, f->call, kLateUs / 1000.0);
    break;
  case kNoHalo:
    snprintf(out, len,
             "Rank %d's halo row facing neighbour rank %d still held the driver's NaN after call "
             "%d: nothing was received there. The neighbours are rank - 1 above and rank + 1 "
             "below (MPI_PROC_NULL beyond the ends), on any number of ranks: is that whom your "
             "code receives from and sends to on %d ranks?",
             rank, f->facing, f->call, world);
    break;
  case kOtherHalo:
    snprintf(out, len,
             "Rank %d's halo row facing neighbour rank %d held, after call %d, neither that "
             "neighbour's row nor NaN: a row from the wrong rank, the wrong row of the right "
             "rank, or a slab of the wrong iteration? The neighbours are rank - 1 above and "
             "rank + 1 below on %d ranks.",
             rank, f->facing, f->call, world);
    break;
  default:
    snprintf(out, len,
             "Rank %d's rows differ from the reference after call %d although the halo rows it "
             "received were right: is each iteration reading slab[k %% 2] and writing "
             "slab[(k + 1) %% 2], every row 1 .. rows computed exactly once?",
             rank, f->call);
  }
}

/* The rank: runs call j of case ci (steps 1-3 above) and copies this rank's rows and the halo
 * rows the call's last exchange filled into got and got_halo. */
static void compute_call(const mgpu_ctx *ctx, const layout *l, int ci, int j, long long first,
                         float *const slab[2], float *scratch, jac_grid *g, MPI_Comm comm,
                         cudaStream_t s, float *got, float *got_halo) {
  const int iters = kItersOfCall[j];
  const size_t row_bytes = (size_t)l->nx * sizeof(float);
  const size_t own_bytes = (size_t)l->rows * row_bytes;
  const long long e = first + iters;
  float *in = slab[first & 1];
  int side;

  /* 1. This call's rows aside, stale values in their place and NaN in the halos that face a
   *    neighbour; finished before anyone goes on. */
  MGPU_CUDA(cudaStreamSynchronize(s));
  init_rows<<<grid_for((long long)l->rows * l->nx), kThreads, 0, s>>>(
      scratch, l->nx, l->row0, l->rows, owner_key(ctx, ctx->rank, call_set(ci, j)), 0);
  MGPU_KERNEL();
  init_rows<<<grid_for((long long)l->rows * l->nx), kThreads, 0, s>>>(
      in + l->nx, l->nx, l->row0, l->rows, owner_key(ctx, ctx->rank, stale_set(ci, j)), 0);
  MGPU_KERNEL();
  if (l->top >= 0) MGPU_CUDA(cudaMemsetAsync(in, 0xFF, row_bytes, s));
  if (l->bottom >= 0)
    MGPU_CUDA(cudaMemsetAsync(in + (size_t)(l->rows + 1) * l->nx, 0xFF, row_bytes, s));
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
  /* 2. The real rows come only after a delay, through the stream. */
  mgpu_delay(s, (unsigned long long)(kDelayUs * 1000.0));
  MGPU_CUDA(cudaMemcpyAsync(in + l->nx, scratch, own_bytes, cudaMemcpyDeviceToDevice, s));
  /* 3. In calls 1 and 2, half of the ranks come late, a different half each time. */
  if ((j == 1 && l->rank % 2 == 1) || (j == 2 && l->rank % 2 == 0)) usleep((useconds_t)kLateUs);

  MGPU_LEARNER(jacobi_overlap(g, first, iters, s, comm));
  MGPU_CUDA(cudaStreamSynchronize(s));
  MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));

  /* The halo rows of slab[(e-1) % 2] were received in iteration e-1, the call's last; when the
   * call had one iteration, the rows sent then were the ones the driver put in late. */
  MGPU_CUDA(cudaMemcpy(got, slab[e & 1] + l->nx, own_bytes, cudaMemcpyDeviceToHost));
  for (side = 0; side < 2; side++)
    MGPU_CUDA(cudaMemcpy(got_halo + (size_t)side * l->nx,
                         slab[(e - 1) & 1] + (size_t)(side == 0 ? 0 : l->rows + 1) * l->nx,
                         row_bytes, cudaMemcpyDeviceToHost));
}

static void run_case(mgpu_ctx *ctx, int ci, MPI_Comm comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->cases[ci];
  const int ny = c->n < ctx->world ? ctx->world : (int)(c->n > 1000000 ? 1000000 : c->n);
  const layout l = make_layout(ctx, kCorrectNx, ny);
  const size_t row_bytes = (size_t)l.nx * sizeof(float);
  const size_t own_bytes = (size_t)l.rows * row_bytes;
  mgpu_buf buf[2];
  float *slab[2] = {NULL, NULL}, *scratch = NULL, *got, *got_halo, *want, *want_halo;
  jac_grid g;
  mgpu_result r;
  finding mine = {kNone, -1, -1};
  long long first = 0, hits = 0;
  int j, b;
  char why[420], tag[160];

  if (c->n > 1000000)
    mgpu_fail("driver", "case", __FILE__, __LINE__, c->n, "more than 1000000 rows");
  got = host_alloc(own_bytes);
  want = host_alloc(own_bytes);
  got_halo = host_alloc(2 * row_bytes);
  want_halo = host_alloc(2 * row_bytes);
  memset(&g, 0, sizeof g);
  if (mgpu_computes(ctx)) {
    for (b = 0; b < 2; b++) {
      buf[b] = mgpu_alloc((size_t)(l.rows + 2) * row_bytes, ctx->device);
      slab[b] = (float *)buf[b].ptr;
    }
    fill_slabs(slab, &l, owner_key(ctx, ctx->rank, case_set(ci)), 0, s);
    MGPU_CUDA(cudaMalloc((void **)&scratch, own_bytes));
    MGPU_CUDA(cudaStreamSynchronize(s));
    g = make_grid(&l, slab);
  }
  mgpu_result_init(&r, c->n);

  for (j = 0; j < kCalls; j++) {
    const int iters = kItersOfCall[j];
    if (mgpu_computes(ctx))
      compute_call(ctx, &l, ci, j, first, slab, scratch, &g, comm, s, got, got_halo);
    first += iters;
    snprintf(tag, sizeof tag, "%s/%d/rows", c->name, j);
    mgpu_hand_over(ctx, tag, got, own_bytes);
    snprintf(tag, sizeof tag, "%s/%d/halos", c->name, j);
    if (mgpu_hand_over(ctx, tag, got_halo, 2 * row_bytes)) {
      const grid_sets gs = {call_set(ci, j), case_set(ci), 0};
      int facing, found;
      reference_rows(ctx, &l, gs, iters, want, want_halo);
      found = check_call(ctx, &l, got, want, got_halo, want_halo, iters, stale_set(ci, j), &r,
                         &facing);
      if (found != kNone && mine.cause == kNone) {
        mine.cause = found;
        mine.call = j;
        mine.facing = facing;
      }
    }
  }
  if (mgpu_computes(ctx)) hits = mgpu_guard_hits(&buf[0]) + mgpu_guard_hits(&buf[1]);
  snprintf(tag, sizeof tag, "%s/guards", c->name);
  if (mgpu_hand_over(ctx, tag, &hits, sizeof hits)) {
    r.guard_hits = hits;
    if (r.bad || r.unwritten) {
      if (mine.cause == kNone) mine.cause = kOther; /* cannot happen: a call found something */
      explain(why, sizeof why, &mine, ctx->rank, ctx->world);
      snprintf(r.msg, sizeof r.msg, "%lld wrong over %d calls (%d x %d grid, %d ranks). %s",
               r.bad + r.unwritten, kCalls, ny, l.nx, ctx->world, why);
    } else if (r.guard_hits) {
      snprintf(r.msg, sizeof r.msg,
               "a write landed outside this rank's slabs (rows 0 .. %d of %d columns): in the "
               "guard bands before or after them",
               l.rows + 1, l.nx);
    }
    mgpu_record_case(c->name, &r, 0);
  }

  if (mgpu_computes(ctx)) {
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MGPU_CUDA(cudaFree(scratch));
    mgpu_free(&buf[1]);
    mgpu_free(&buf[0]);
  }
  free(want_halo);
  free(got_halo);
  free(want);
  free(got);
}

/* ---- performance --------------------------------------------------------------------------- */

typedef struct baseline {
  layout l;
  float *slab[2];
  MPI_Comm comm;
  long long iter;
} baseline;

/* The form without overlap: the rows a kernel wrote are finished, both halos exchanged at once
 * (two MPI_Irecv, two MPI_Isend, MPI_Waitall), then every row. Not two MPI_Sendrecv one after
 * the other: on 3 or more ranks a middle rank would then pay two latencies where yours, with
 * both directions in flight together, pays one, and an iteration that overlaps nothing with
 * the GPU met the target from that alone (variant no-overlap on 3 or more GPUs). */
static void baseline_steps(baseline *b, int iters, cudaStream_t s) {
  const layout *l = &b->l;
  const int nx = l->nx;
  const int top = l->top >= 0 ? l->top : MPI_PROC_NULL;
  const int bottom = l->bottom >= 0 ? l->bottom : MPI_PROC_NULL;
  int i;
  for (i = 0; i < iters; i++, b->iter++) {
    float *in = b->slab[b->iter & 1], *out = b->slab[(b->iter + 1) & 1];
    MPI_Request req[4];
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_MPI(MPI_Irecv(in, nx, MPI_FLOAT, top, kTagDown, b->comm, &req[0]));
    MGPU_MPI(MPI_Irecv(in + (size_t)(l->rows + 1) * nx, nx, MPI_FLOAT, bottom, kTagUp, b->comm,
                       &req[1]));
    MGPU_MPI(MPI_Isend(in + nx, nx, MPI_FLOAT, top, kTagUp, b->comm, &req[2]));
    MGPU_MPI(MPI_Isend(in + (size_t)l->rows * nx, nx, MPI_FLOAT, bottom, kTagDown, b->comm,
                       &req[3]));
    MGPU_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
    launch_stencil(in, out, nx, 1, l->rows, 1, s);
  }
}

/* Counts the elements of this rank's rows (rows x nx at got) that differ from their row's
 * value in v (global rows). */
static void compare_flat(const float *got, const float *v, const layout *l, mgpu_result *r) {
  const size_t nx = (size_t)l->nx;
  int lr;
  size_t c;
  for (lr = 1; lr <= l->rows; lr++)
    for (c = 0; c < nx; c++)
      mgpu_result_add(r, (long long)(l->row0 + lr - 1) * l->nx + (long long)c,
                      got[(size_t)(lr - 1) * nx + c], v[l->row0 + lr - 1], 0.0);
}

static void compare_rows(const float *got, const float *want, const layout *l, mgpu_result *r) {
  const size_t n = (size_t)l->rows * l->nx;
  size_t i;
  for (i = 0; i < n; i++)
    mgpu_result_add(r, (long long)l->row0 * l->nx + (long long)i, got[i], want[i], 0.0);
}

/* Both sides: hands over what compute_after_timing copied, and, where the checks are made,
 * records the case "timed-<perf case>". The baseline's rows are a check of the course. */
static void check_after_timing(mgpu_ctx *ctx, int pi, const layout *l, jac_after *h) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const size_t own_bytes = (size_t)l->rows * l->nx * sizeof(float);
  const grid_sets fresh = {2000 + pi, 2000 + pi, 0};
  char name[96];
  mgpu_result r, rf;
  float *v, *want;
  snprintf(name, sizeof name, "timed-%s", c->name);
  if (!jac_after_hand_over(ctx, name, h, own_bytes, 7, 7)) return;

  want = host_alloc(own_bytes);
  reference_rows(ctx, l, fresh, kAfterIters, want, NULL);
  v = flat_reference(ctx, l, 1000 + pi, h->facts[1]);
  mgpu_result_init(&r, (long long)l->rows * l->nx);
  compare_flat(h->timed_base, v, l, &r);
  compare_rows(h->fresh_base, want, l, &r);
  free(v);
  if (r.bad || r.unwritten)
    mgpu_fail("driver", "blocking baseline", __FILE__, __LINE__, (long)(r.bad + r.unwritten),
              "the course's MPI_Sendrecv baseline computed a wrong grid (a bug in the course)");

  v = flat_reference(ctx, l, 1000 + pi, h->facts[0]);
  mgpu_result_init(&r, (long long)l->rows * l->nx);
  compare_flat(h->timed_yours, v, l, &r);
  free(v);
  mgpu_result_init(&rf, (long long)l->rows * l->nx);
  compare_rows(h->fresh_yours, want, l, &rf);
  free(want);
  if (r.bad || r.unwritten)
    snprintf(r.msg, sizeof r.msg,
             "the %lld iterations timed on the %d x %d grid (%d rows per rank) differ from the "
             "reference advanced as many iterations (and %lld elements of a round with fresh "
             "rows afterwards): right on the small correctness grids, wrong on this one or once "
             "timed. Every call must do all of its iterations",
             h->facts[0], l->ny, l->nx, l->rows, rf.bad + rf.unwritten);
  else if (rf.bad || rf.unwritten) {
    r = rf;
    snprintf(r.msg, sizeof r.msg,
             "after the timed calls, %d more iterations with fresh rows in the same slabs of the "
             "%d x %d grid (%d rows per rank) differ from the reference: every call must do the "
             "whole work, repeated calls with the same buffers included",
             kAfterIters, l->ny, l->nx, l->rows);
  }
  r.guard_hits = h->facts[2];
  if (!r.msg[0] && r.guard_hits)
    snprintf(r.msg, sizeof r.msg, "a write landed outside this rank's slabs (in the guard bands)");
  mgpu_record_case(name, &r, 0);
}

static void run_perf(mgpu_ctx *ctx, int pi, MPI_Comm comm, MPI_Comm base_comm, cudaStream_t s) {
  const mgpu_case *c = &ctx->perf_cases[pi];
  const int per_rank = c->n < 1 || c->n > 65536 ? 1 : (int)c->n;
  const layout l = make_layout(ctx, kPerfNx, per_rank * ctx->world);
  const uint64_t key = owner_key(ctx, ctx->rank, 1000 + pi);
  const size_t slab_bytes = (size_t)(l.rows + 2) * l.nx * sizeof(float);
  const size_t own_bytes = (size_t)l.rows * l.nx * sizeof(float);
  const int min_reps = ctx->min_reps > 0 ? ctx->min_reps : 5;
  int max_reps = ctx->max_reps > 0 ? ctx->max_reps : 30;
  const double budget_us =
      (ctx->perf_budget_ms > 0 ? ctx->perf_budget_ms : 20000.0) * 1e3 / ctx->nperf_cases;
  double yours_us[kMaxSamples], base_us[kMaxSamples], t0, one_y, one_b, start;
  mgpu_buf buf[2];
  float *slab[2];
  jac_grid g;
  baseline bl;
  jac_after h;
  long long ya_iter = 0;
  int b, k, iters, stop;

  if (c->n < 1 || c->n > 65536)
    mgpu_fail("driver", "perf case", __FILE__, __LINE__, c->n, "rows per rank out of range");
  jac_after_alloc(&h, own_bytes);
  if (mgpu_computes(ctx)) {
    if (max_reps > kMaxSamples) max_reps = kMaxSamples;
    for (b = 0; b < 2; b++) {
      buf[b] = mgpu_alloc(slab_bytes, ctx->device);
      slab[b] = (float *)buf[b].ptr;
    }
    memset(&bl, 0, sizeof bl);
    bl.l = l;
    bl.comm = base_comm;
    for (b = 0; b < 2; b++) MGPU_CUDA(cudaMalloc((void **)&bl.slab[b], slab_bytes));
    fill_slabs(slab, &l, key, 1, s);
    fill_slabs(bl.slab, &l, key, 1, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    g = make_grid(&l, slab);

    /* Warm-up (MPI's IPC mappings of the rows, the kernels), then the cost of one iteration of
     * each decides how many a sample takes. */
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MGPU_LEARNER(jacobi_overlap(&g, ya_iter, 3, s, comm));
    ya_iter += 3;
    baseline_steps(&bl, 3, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    MGPU_LEARNER(jacobi_overlap(&g, ya_iter, 4, s, comm));
    ya_iter += 4;
    MGPU_CUDA(cudaStreamSynchronize(s));
    one_y = max_over_ranks((mgpu_now_us() - t0) / 4);
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    t0 = mgpu_now_us();
    baseline_steps(&bl, 4, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    one_b = max_over_ranks((mgpu_now_us() - t0) / 4);
    iters = (int)ceil(kSampleUs / fmax(fmin(one_y, one_b), 1.0));
    if (iters < 1) iters = 1;
    if (iters > 2000) iters = 2000;

    start = mgpu_now_us();
    for (k = 0, stop = 0; !stop; k++) {
      MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
      t0 = mgpu_now_us();
      MGPU_LEARNER(jacobi_overlap(&g, ya_iter, iters, s, comm));
      MGPU_CUDA(cudaStreamSynchronize(s));
      yours_us[k] = max_over_ranks((mgpu_now_us() - t0) / iters);
      ya_iter += iters;

      MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
      t0 = mgpu_now_us();
      baseline_steps(&bl, iters, s);
      MGPU_CUDA(cudaStreamSynchronize(s));
      base_us[k] = max_over_ranks((mgpu_now_us() - t0) / iters);

      stop = k + 1 >= max_reps || (k + 1 >= min_reps && mgpu_now_us() - start > budget_us);
      MGPU_MPI(MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD));
    }
    mgpu_record_timing(c->name, "yours", 2.0 * l.nx * sizeof(float), 1.0, "time", yours_us,
                       yours_us, k);
    mgpu_record_timing(c->name, "baseline", 2.0 * l.nx * sizeof(float), 1.0, "time", base_us,
                       base_us, k);
    if (ctx->rank == 0) {
      mgpu_value("iterations per sample", iters, "iterations");
      mgpu_value("iterations timed (yours)", (double)ya_iter, "iterations");
    }

    /* The timed grids as they are; then fresh rows that vary along the row, NaN halos, and
     * kAfterIters more iterations of each in the same slabs. */
    MGPU_CUDA(cudaMemcpy(h.timed_yours, slab[ya_iter & 1] + l.nx, own_bytes, cudaMemcpyDeviceToHost));
    MGPU_CUDA(cudaMemcpy(h.timed_base, bl.slab[bl.iter & 1] + l.nx, own_bytes, cudaMemcpyDeviceToHost));
    h.facts[0] = ya_iter;
    h.facts[1] = bl.iter;
    fill_slabs(slab, &l, owner_key(ctx, ctx->rank, 2000 + pi), 0, s);
    fill_slabs(bl.slab, &l, owner_key(ctx, ctx->rank, 2000 + pi), 0, s);
    bl.iter = 0;
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MGPU_LEARNER(jacobi_overlap(&g, 0, kAfterIters, s, comm));
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    baseline_steps(&bl, kAfterIters, s);
    MGPU_CUDA(cudaStreamSynchronize(s));
    MGPU_CUDA(cudaMemcpy(h.fresh_yours, slab[kAfterIters & 1] + l.nx, own_bytes, cudaMemcpyDeviceToHost));
    MGPU_CUDA(cudaMemcpy(h.fresh_base, bl.slab[kAfterIters & 1] + l.nx, own_bytes, cudaMemcpyDeviceToHost));
    h.facts[2] = mgpu_guard_hits(&buf[0]) + mgpu_guard_hits(&buf[1]);
  }
  check_after_timing(ctx, pi, &l, &h);
  if (mgpu_computes(ctx)) {
    MGPU_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (b = 0; b < 2; b++) MGPU_CUDA(cudaFree(bl.slab[b]));
    mgpu_free(&buf[1]);
    mgpu_free(&buf[0]);
  }
  jac_after_free(&h);
}

int main(int argc, char **argv) {
  mgpu_ctx ctx;
  MPI_Comm comms[2] = {MPI_COMM_NULL, MPI_COMM_NULL}; /* the learner's, the baseline's */
  cudaStream_t stream = NULL;
  int k;

  mgpu_init(&ctx, argc, argv); /* picks this rank's GPU before MPI_Init (none in the verifier) */
  if (mgpu_computes(&ctx)) {
    start_mpi(&ctx, &argc, &argv, comms, 2);
    MGPU_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }

  for (k = 0; k < ctx.ncases; k++) run_case(&ctx, k, comms[0], stream);
  if (ctx.perf)
    for (k = 0; k < ctx.nperf_cases; k++) run_perf(&ctx, k, comms[0], comms[1], stream);

  if (mgpu_computes(&ctx)) {
    MGPU_CUDA(cudaDeviceSynchronize());
    MGPU_CUDA(cudaStreamDestroy(stream));
    MGPU_MPI(MPI_Comm_free(&comms[1]));
    MGPU_MPI(MPI_Comm_free(&comms[0]));
    MGPU_MPI(MPI_Finalize());
  }
  return mgpu_finish(&ctx);
}
