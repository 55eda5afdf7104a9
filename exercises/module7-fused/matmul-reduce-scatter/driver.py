"""Driver of module7/matmul-reduce-scatter (course-owned; the learner edits reduce_scatter.py).

matmul_reduce_scatter(x_shard, w_shard): the row-parallel twin of module7/chunked-overlap. The
activations X (M x K) are split by columns, the weight (K x N) by rows: rank r holds X_r, the
M x k_r columns [lo_r, hi_r) of X, and W_r, the k_r x N rows [lo_r, hi_r) of the weight, with
lo_r = r*K // world, so the shards are uneven when world does not divide K. Y = X @ W is the sum
of the partials X_r @ W_r (each M x N), and rank r must return its row block of Y, rows
[r*m, (r+1)*m) with m = M / world (M is always a multiple of world). A case's n is m; M =
world*m, K = 2n + 1, N = n + 3.

Correctness is exact: h.exact integers in [-64, 64] in float32, so every product and every sum
of partials is exact in any order (K <= 4096), compared element by element on every rank with
the float64 result. ITERS calls per case, with fresh data each. On every call the ranks other
than 0 start DELAY_S late, so what rank 0 receives arrives late: an accumulation added before
its receive finished (handle.wait(), which on a GPU makes the compute stream wait on the
transfer's event) reads a buffer that does not hold it yet.

A wrong block is diagnosed by what it holds. Every rank's row block is matched against sums of
the partials P[s][b] = rows of block b of X_s @ W_s, at most one block per rank (all such sums
for up to 4 ranks, the sums of block r only for up to 10). Each rank classifies its block, the
driver gathers the classes (its own collective, outside the learner's code) and names the
mistake. The same class on every rank is a mistake in the schedule: only the own partial (the
received accumulation was never added), every partial but the own, the full sum of another
block (the ring ends on the wrong block), or partials of several blocks (wrong block order when
they are what the order (r + s + 1) gives, else wrong order or a buffer overwritten before its
send finished). A class on some ranks only (the ranks whose predecessor ran late), or a block
that is no such sum, points to a buffer used before its transfer finished. To make that
visible, the driver frees BAITS buffers of the block's shape filled with BAIT_VALUE just before
each call: a receive buffer the learner allocates often reuses that memory (the GPU's caching
allocator hands freed blocks of the same size back; glibc on CPU only sometimes), and a block
holding BAIT_VALUE read a buffer before anything arrived in it. Before the cases the driver
makes one ring exchange itself, so that NCCL's point-to-point connections exist and the
learner's sends and receives do not block the host.

Performance (GPU, bfloat16, M = 8192 tokens, N = 8192 output features, K = the perf case's n,
each rank K/world of it): time against the unfused form written by the course (one matmul of
the whole M x N partial, then reduce_scatter_tensor). A GEMM of the whole partial before a ring
that waits for each step passes correctness and fails here. After each timed case, case
"after-timing": the last timed call's result must still be this rank's row block of X @ W (its
inputs never changed), and one more call with new whole numbers written into the timed x and w
must give the new block, so that a function that skips repeated work fails (bfloat16 results,
which the ring rounds at every addition, are compared with the float32 sum, allowing for
rounding: bf16_result).
"""
import itertools
import sys
import time

import torch
import torch.distributed as dist

import mgpu_harness

ITERS = 2
DELAY_S = 0.3
PERF_M = 8192
PERF_N = 8192
AFTER_ITER = 1 << 20  # iter of the after-timing data: no checked call used it

# What a row block holds (the classes every rank shares with the others).
OK, OWN_ONLY, NO_OWN, SUBSET, OTHER_BLOCK, MIXED, UNKNOWN, SHAPE, BAIT = range(9)
BAIT_VALUE = 2.0 ** 100  # fills freed memory before each call; no sum of partials is near it
BAITS = 4  # freed (m, N) buffers per rank, filled with BAIT_VALUE, before each call


def dims(n, world):
    return world * n, 2 * n + 1, n + 3  # M, K, N


def kcols(rank, world, k):
    return rank * k // world, (rank + 1) * k // world


def holds(got, parts, rank, world):
    """Which partials the block got (m x N, float64) is the sum of: a list with, for each
    rank s, the block of its partial that is in the sum (None: none), or None when it is no such
    sum. parts[s][b]: rows of block b of X_s @ W_s."""
    if world <= 4:
        choices = [[None] + list(range(world))] * world
    elif world <= 10:
        choices = [[None, rank]] * world
    else:
        return None
    rows = min(got.shape[0], 4)
    sig = got[:rows]
    zero = torch.zeros_like(got)
    for pick in itertools.product(*choices):
        s = sum((parts[q][b][:rows] for q, b in enumerate(pick) if b is not None), zero[:rows])
        if torch.equal(s, sig):
            full = sum((parts[q][b] for q, b in enumerate(pick) if b is not None), zero)
            if torch.equal(full, got):
                return list(pick)
    return None


def classify(y, shape, got, parts, rank, world):
    """The class of this rank's block and, for the message, what it holds."""
    if not isinstance(y, torch.Tensor) or tuple(y.shape) != shape:
        return SHAPE, None
    if bool((got.abs() >= BAIT_VALUE / 2).any()):
        return BAIT, None
    pick = holds(got, parts, rank, world)
    if pick is None:
        return UNKNOWN, None
    blocks = {b for b in pick if b is not None}
    if blocks == {rank} and all(b is not None for b in pick):
        return OK, pick
    if blocks <= {rank}:
        if pick[rank] is not None and sum(b is not None for b in pick) == 1:
            return OWN_ONLY, pick
        if pick[rank] is None and sum(b is not None for b in pick) == world - 1:
            return NO_OWN, pick
        return SUBSET, pick
    if len(blocks) == 1 and all(b is not None for b in pick):
        return OTHER_BLOCK, pick
    return MIXED, pick


def ring_pick(rank, world, blk):
    """What rank ends with on a ring where, at step s, every rank q adds its partial of block
    blk(q, s) to what rank q - 1 sent at step s - 1 (the form of holds())."""
    pick = [None] * world
    for s in range(world - 1, -1, -1):
        q = (rank - (world - 1 - s)) % world
        pick[q] = blk(q, s) % world
    return pick


def describe(pick):
    if pick is None:
        return "it is not a sum of the ranks' partials X_s @ W_s (of any row blocks)"
    terms = [f"rank {s}'s partial of block {b}" for s, b in enumerate(pick) if b is not None]
    if not terms:
        return "it is all zeros"
    return "it holds the sum of " + ", ".join(terms) + " (nothing else)"


def diagnose(it, mine, pick, codes, rank, world, m, shape, y):
    """The explanation of this rank's wrong block, from every rank's class."""
    lo, hi = rank * m, (rank + 1) * m
    if mine == SHAPE:
        if not isinstance(y, torch.Tensor):
            return f"iteration {it}: return a torch.Tensor, this rank's row block of Y"
        if world > 1 and tuple(y.shape) == (world * m, shape[1]):
            return (f"iteration {it}: you returned all M = {world * m} rows of Y; rank {rank} "
                    f"returns its row block only, rows [{lo}, {hi}), shape {shape}")
        return (f"iteration {it}: the result has shape {tuple(y.shape)}; rank {rank}'s row "
                f"block of Y is rows [{lo}, {hi}), shape {shape}")
    what = describe(pick)
    same = all(c == mine for c in codes)
    if mine == SUBSET and pick is not None and all(b is None for b in pick):
        return (f"iteration {it}: rank {rank}'s row block is all zeros: no partial reached "
                "it. Compute this rank's partial of each block, add what arrives, and return "
                "the sum of your own block")
    if same and mine == OWN_ONLY:
        return (f"iteration {it}: rank {rank}'s row block holds only its own partial "
                "X_r @ W_r, on every rank: the accumulation received from rank r - 1 never "
                "made it into the sum. At every step but the first, add what you received to "
                "the block's partial before passing it on (was it never added, or added before "
                "its receive finished?)")
    if same and mine == NO_OWN:
        return (f"iteration {it}: rank {rank}'s row block holds every other rank's partial "
                "but not its own: add your own partial X_r @ W_r of your block (the last "
                "step's GEMM) to the accumulation you received")
    if same and mine == OTHER_BLOCK:
        b = pick[0]
        return (f"iteration {it}: rank {rank} returned the full sum of row block {b}, not of "
                f"its own block {rank}: wrong row block. The ring must end on this rank's "
                "block: at step s compute block (r - s - 1) mod world, which is r at the last "
                "step s = world - 1")
    if same and mine == MIXED and pick == ring_pick(rank, world, lambda q, s: q + s + 1):
        return (f"iteration {it}: rank {rank}'s row block mixes the partials of other row "
                f"blocks: {what}. Wrong block order: at step s rank r must compute block "
                "(r - s - 1) mod world, the block whose accumulation rank r - 1 computed at "
                "step s - 1 and sends; (r + s + 1) mod world is the same block only on 2 ranks")
    if same and mine == MIXED:
        return (f"iteration {it}: rank {rank}'s row block mixes the partials of other row "
                f"blocks: {what}. Either the blocks go round in the wrong order (at step s "
                "rank r must compute block (r - s - 1) mod world, the block whose accumulation "
                "rank r - 1 computed at step s - 1 and sends), or a buffer was used before its "
                "transfer finished: an accumulation overwritten (by the next block's GEMM) "
                "before its send finished, or added before its receive finished")
    if same and mine == SUBSET:
        return (f"iteration {it}: rank {rank}'s row block misses partials, on every rank: "
                f"{what}. Every block's accumulation must pass through all ranks, world - 1 "
                "transfers, each rank adding its own partial (or was a received buffer added "
                "before its receive finished?)")
    bad = [s for s in range(world) if codes[s] != OK]
    if mine == BAIT:
        return (f"iteration {it}: rank {rank}'s row block holds values of about 2^100, which "
                "the driver wrote into memory it freed just before the call: a buffer was "
                "read before anything was written into it. Was an accumulation added before "
                "its receive finished? Wait on the transfer's handles (on a GPU: the compute "
                "stream waits on its event) before adding the received buffer")
    if mine == UNKNOWN:
        return (f"iteration {it}: the row blocks of rank(s) {bad} are wrong, and {what} on "
                f"rank {rank}. Was a buffer used before its transfer finished: an accumulation "
                "added before its receive finished, or a sent one overwritten before its send "
                "finished? Wait on the transfer's handles (on a GPU: the compute stream waits "
                "on its event) before touching either buffer. If not, does each step multiply "
                "rows [b*m, (b+1)*m) of x_shard by the whole of w_shard?")
    return (f"iteration {it}: the row blocks of rank(s) {bad} are wrong ({what} on rank "
            f"{rank}), not in the same way on every rank, while the ranks other than 0 started "
            "late: was an accumulation used before its receive finished? Wait on the "
            "transfer's handles (on a GPU: the compute stream waits on its event) before "
            "adding the received buffer")


h = mgpu_harness.init(default_cases={"small": 8, "odd": 5})
learner = h.import_learner("reduce_scatter")
h.init_process_group()
torch.backends.cuda.matmul.allow_tf32 = False
W, R = h.world, h.rank
all_reduce = h.real("torch.distributed.all_reduce")

if W > 1:  # warm up the point-to-point path (NCCL connects lazily, blocking the host)
    t = torch.zeros(4, device=h.device)
    u = torch.empty_like(t)
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (R + 1) % W),
                                     dist.P2POp(dist.irecv, u, (R - 1) % W)]):
        q.wait()
    if h.on_gpu:
        torch.cuda.synchronize()

for name, n in h.cases.items():
    M, K, N = dims(n, W)
    m = n
    lo, hi = kcols(R, W, K)
    result = None
    problems = []
    for it in range(ITERS):
        # Every rank's partial (float64) for the expected result and the diagnosis.
        partials = []
        for s in range(W):
            slo, shi = kcols(s, W, K)
            xs = h.exact((M, shi - slo), rank=s, iter=it, salt=1, dtype=torch.float64)
            ws = h.exact((shi - slo, N), rank=s, iter=it, salt=2, dtype=torch.float64)
            p = xs @ ws
            partials.append([p[b * m:(b + 1) * m] for b in range(W)])
        want = sum(partials[s][R] for s in range(W))
        x = h.exact((M, hi - lo), iter=it, salt=1)
        w = h.exact((hi - lo, N), iter=it, salt=2)
        if h.on_gpu:
            torch.cuda.synchronize()
        dist.barrier()
        if R != 0:
            time.sleep(DELAY_S)  # rank 0 runs ahead: what it receives arrives late
        # Freed memory holding BAIT_VALUE: a buffer the learner allocates (torch.empty) and
        # reads before a transfer wrote it often shows it (the GPU's caching allocator reuses
        # freed blocks of the same size; on CPU only sometimes): "used before it arrived".
        bait = [torch.full((m, N), BAIT_VALUE, dtype=x.dtype, device=h.device)
                for _ in range(BAITS)]
        del bait
        with h.forbid():
            y = learner.matmul_reduce_scatter(x, w)
        r = h.compare(y, want)
        if result is None or (result.ok() and not r.ok()):
            result = r
        # Every rank classifies its block and learns the others' classes, on every iteration
        # (the same collective calls on every rank, whatever the results).
        got = None
        if isinstance(y, torch.Tensor) and tuple(y.shape) == (m, N):
            got = y.detach().to(h.device, torch.float64)
        mine, pick = (OK, None) if r.ok() else classify(y, (m, N), got, partials, R, W)
        codes_t = torch.zeros(W, dtype=torch.int64, device=h.device)
        codes_t[R] = mine
        if W > 1:
            all_reduce(codes_t)
        codes = codes_t.tolist()
        if r.ok() or problems:
            continue
        problems.append(diagnose(it, mine, pick, codes, R, W, m, (m, N), y))
    if problems:
        result.bad = max(result.bad, 1)
        result.msg_parts += problems
    h.record(name, result)


def small(shape, salt):
    """Fresh whole numbers in [-4, 4] for the after-timing call (h.exact folded): exact in
    bfloat16, and their products' sums (K <= 8192) exact in float32."""
    return torch.remainder(h.exact(shape, iter=AFTER_ITER, salt=salt), 9) - 4


def bf16_result(y, want, mag):
    """h.compare of y (bfloat16) with want (float32, exact): an element within 2^-6 of mag, the
    sum of its products' magnitudes, counts as right (a few roundings of partial sums to
    bfloat16, in any order: the ring's additions, split-K partials); skipped or stale work is
    off by about the size of the values themselves."""
    return h.compare(y, want, tol=mag * 2.0 ** -6)


def after_timing(name, n, x, w, last):
    """Case after-timing of perf case name: the last timed call's result (last["y"]; x and w
    did not change), then new data in x and w and one more call as the timed ones made it,
    each compared with the block computed here (the driver's all_reduce of the float32
    partials). The same collective calls on every rank."""
    m = x.shape[0] // W

    def want():
        xs, ws = x.float(), w.float()
        sums = [xs @ ws, xs.abs() @ ws.abs()]
        for t in sums:
            if W > 1:
                all_reduce(t)
        return [t[R * m:(R + 1) * m] for t in sums]

    res = bf16_result(last.get("y"), *want())
    x.copy_(small(x.shape, 1))
    w.copy_(small(w.shape, 2))
    ref = want()
    with h.forbid():
        y = learner.matmul_reduce_scatter(x, w)
    if h.on_gpu:
        torch.cuda.synchronize()
    h.record_after_timing(name, res, bf16_result(y, *ref), n=n)


if h.timing:
    reduce_scatter = h.real("torch.distributed.reduce_scatter_tensor")
    for name, n in h.perf_cases.items():
        M, K, N = PERF_M, n, PERF_N
        k = K // W
        x = torch.randint(-4, 5, (M, k), device=h.device).to(torch.bfloat16)
        w = torch.randint(-4, 5, (k, N), device=h.device).to(torch.bfloat16)
        out = torch.empty(M // W, N, dtype=x.dtype, device=h.device)
        last = {}  # the last timed call's result

        def yours(i):
            last["y"] = learner.matmul_reduce_scatter(x, w)

        def baseline(i):
            reduce_scatter(out, x @ w)

        h.time_pair(name, bytes=M * N * x.element_size(), factor=(W - 1) / W,
                    metric="time", yours=yours, baseline=baseline)
        after_timing(name, n, x, w, last)
else:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
