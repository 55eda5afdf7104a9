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
for up to 4 ranks, the sums of block r only for up to 10). The driver gathers every rank's block
(its own collective, outside the learner's code), so that each rank's verifier classifies them
all and names the mistake. The same class on every rank is a mistake in the schedule: only the
own partial (the received accumulation was never added), every partial but the own, the full sum
of another block (the ring ends on the wrong block), or partials of several blocks (wrong block
order when they are what the order (r + s + 1) gives, else wrong order or a buffer overwritten
before its send finished). A class on some ranks only (the ranks whose predecessor ran late), or
a block that is no such sum, points to a buffer used before its transfer finished. To make that
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

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over every result of
matmul_reduce_scatter (the timed case's last one and the one after it too) and, for the
diagnosis, the blocks every rank returned; the verifier makes the partials from every rank's
inputs, which the rank itself cannot make.
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
PERF_ITER = 1 << 19   # iter of the timed data
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


def classify(got, parts, rank, world):
    """The class of rank's block got (float64; None when the result was not a tensor of the
    block's shape) and, for the message, what it holds."""
    if got is None:
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
learner = h.import_learner("reduce_scatter")  # None in the verifier
if h.computes:
    h.init_process_group()
torch.backends.cuda.matmul.allow_tf32 = False
W, R = h.world, h.rank
all_gather = h.real("torch.distributed.all_gather")

# The exercise is split (verifier: true, docs/protocol.md §4): this rank calls the learner and
# hands its results over; its verifier, which never loads the learner's module and alone knows
# every rank's inputs, makes the expected blocks, diagnoses and records the cases.

# Warm up the point-to-point path (NCCL connects lazily, blocking the host).
if h.computes and W > 1:
    t = torch.zeros(4, device=h.device)
    u = torch.empty_like(t)
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (R + 1) % W),
                                     dist.P2POp(dist.irecv, u, (R - 1) % W)]):
        q.wait()
    if h.on_gpu:
        torch.cuda.synchronize()


# The only collectives that may carry the data: the ring's sends and receives (isend, irecv,
# batch_isend_irecv). Anything else, through any route, is counted (h.count_collectives): a
# library all-gather, gather or all-reduce of the partials, or DistributedDataParallel's
# reducer, adds them up for you (red-team passes got right blocks through each).
P2P = ("send", "recv")


def route_problem(when, others):
    """when: "iteration 0", ... or "after timing"."""
    return (f"{when}: besides sends and receives your code launched other "
            f"collectives: {mgpu_harness.describe_collectives(others)}. The partials must "
            "travel around the ring in point-to-point messages only (dist.batch_isend_irecv "
            "with P2POp isend/irecv), each rank adding its own: a library collective that "
            "gathers or reduces them is the reduce-scatter done for you")


def every_block(y, m, N):
    """The rank: every rank's result as an (m, N) float64 block (zeros where it is not a tensor
    of that shape) and whether it was, for the verifier's diagnosis: the driver's own
    collectives, the same on every rank whatever the results."""
    ok = isinstance(y, torch.Tensor) and tuple(y.shape) == (m, N)
    mine = (y.detach().to(h.device, torch.float64) if ok
            else torch.zeros(m, N, dtype=torch.float64, device=h.device))
    flag = torch.tensor([int(ok)], dtype=torch.int64, device=h.device)
    if W == 1:
        return mine.unsqueeze(0), [int(ok)]
    blocks = [torch.empty_like(mine) for _ in range(W)]
    flags = [torch.empty_like(flag) for _ in range(W)]
    all_gather(blocks, mine)
    all_gather(flags, flag)
    return torch.stack(blocks), [int(f.item()) for f in flags]


for name, n in h.cases.items():
    M, K, N = dims(n, W)
    m = n
    lo, hi = kcols(R, W, K)
    result = None
    problems = []
    for it in range(ITERS):
        y = blocks = shaped = others = None
        if h.computes:
            x = h.exact((M, hi - lo), iter=it, salt=1)
            w = h.exact((hi - lo, N), iter=it, salt=2)
            if h.on_gpu:
                torch.cuda.synchronize()
            dist.barrier()
            if R != 0:
                time.sleep(DELAY_S)  # rank 0 runs ahead: what it receives arrives late
            # Freed memory holding BAIT_VALUE: a buffer the learner allocates (torch.empty)
            # and reads before a transfer wrote it often shows it (the GPU's caching allocator
            # reuses freed blocks of the same size; on CPU only sometimes): "used before it
            # arrived".
            bait = [torch.full((m, N), BAIT_VALUE, dtype=x.dtype, device=h.device)
                    for _ in range(BAITS)]
            del bait
            with h.count_collectives() as census, h.forbid():
                y = learner.matmul_reduce_scatter(x, w)
            others = mgpu_harness.collectives_besides(census, P2P)
            blocks, shaped = every_block(y, m, N)
        tag = f"{name}/{it}"
        y = h.hand_over(tag + "/y", y)
        others = h.hand_over(tag + "/other-collectives", others)
        blocks = h.hand_over(tag + "/blocks", blocks)
        shaped = h.hand_over(tag + "/shaped", shaped)
        if not h.verifies:
            continue
        if others and not problems:
            problems.append(route_problem(f"iteration {it}", others))
        # Every rank's partial (float64) for the expected result and the diagnosis.
        partials = []
        for s in range(W):
            slo, shi = kcols(s, W, K)
            xs = h.exact((M, shi - slo), rank=s, iter=it, salt=1, dtype=torch.float64)
            ws = h.exact((shi - slo, N), rank=s, iter=it, salt=2, dtype=torch.float64)
            p = xs @ ws
            partials.append([p[b * m:(b + 1) * m] for b in range(W)])
        want = sum(partials[s][R] for s in range(W))
        r = h.compare(y, want)
        if result is None or (result.ok() and not r.ok()):
            result = r
        if r.ok() or problems:
            continue
        # The class of every rank's block: what each one holds tells the mistake apart.
        codes = []
        for s in range(W):
            got = blocks[s] if shaped[s] else None
            if s == R:
                mine, pick = classify(got, partials, s, W)
                codes.append(mine)
            elif got is not None and torch.equal(got, sum(partials[q][s] for q in range(W))):
                codes.append(OK)
            else:
                codes.append(classify(got, partials, s, W)[0])
        problems.append(diagnose(it, mine, pick, codes, R, W, m, (m, N), y))
    if not h.verifies:
        continue
    if problems:
        result.forced = True  # the values may be right: the case fails on the route
        result.msg_parts += problems
    h.record(name, result)


def small(shape, rank, it, salt):
    """Whole numbers in [-4, 4] for the timed and after-timing calls (h.exact folded): exact in
    bfloat16, and their products' sums (K <= 8192) exact in float32."""
    return torch.remainder(h.exact(shape, rank=rank, iter=it, salt=salt), 9) - 4


def bf16_result(y, want, mag):
    """h.compare of y (bfloat16) with want (float32, exact): an element within 2^-6 of mag, the
    sum of its products' magnitudes, counts as right (a few roundings of partial sums to
    bfloat16, in any order: the ring's additions, split-K partials); skipped or stale work is
    off by about the size of the values themselves."""
    return h.compare(y, want, tol=mag * 2.0 ** -6)


def block_sum(M, k, N, it):
    """The verifier: this rank's row block of the sum over ranks s of X_s @ W_s, the timed
    shapes' data of iteration it, and of |X_s| @ |W_s| (float32: exact for these whole
    numbers, TF32 off)."""
    m = M // W
    want = torch.zeros(m, N, device=h.device)
    mag = torch.zeros(m, N, device=h.device)
    for s in range(W):
        xs = small((M, k), s, it, 1)[R * m:(R + 1) * m]
        ws = small((k, N), s, it, 2)
        want += xs @ ws
        mag += xs.abs() @ ws.abs()
    return want, mag


if h.timing:
    reduce_scatter = h.real("torch.distributed.reduce_scatter_tensor")
    for name, n in h.perf_cases.items():
        M, K, N = PERF_M, n, PERF_N
        k = K // W
        y_last = y_fresh = others = None
        if h.computes:
            x = small((M, k), R, PERF_ITER, 1).to(torch.bfloat16)
            w = small((k, N), R, PERF_ITER, 2).to(torch.bfloat16)
            out = torch.empty(M // W, N, dtype=x.dtype, device=h.device)
            last = {}  # the last timed call's result

            def yours(i):
                last["y"] = learner.matmul_reduce_scatter(x, w)

            def baseline(i):
                reduce_scatter(out, x @ w)

            h.time_pair(name, bytes=M * N * x.element_size(), factor=(W - 1) / W,
                        metric="time", yours=yours, baseline=baseline)
            y_last = last.get("y")
        # Case after-timing: the last timed call's result (x and w did not change), then new
        # data in x and w and one more call as the timed ones made it; the verifier compares
        # each with this rank's block of its data. The same collective calls on every rank.
        y_last = h.hand_over(f"after-timing/{name}/last", y_last)
        last_res = None
        if h.verifies:
            last_res = bf16_result(y_last, *block_sum(M, k, N, PERF_ITER))
        if h.computes:
            x.copy_(small(x.shape, R, AFTER_ITER, 1))
            w.copy_(small(w.shape, R, AFTER_ITER, 2))
            with h.count_collectives() as census, h.forbid():
                y_fresh = learner.matmul_reduce_scatter(x, w)
            others = mgpu_harness.collectives_besides(census, P2P)
            if h.on_gpu:
                torch.cuda.synchronize()
        y_fresh = h.hand_over(f"after-timing/{name}/fresh", y_fresh)
        others = h.hand_over(f"after-timing/{name}/other-collectives", others)
        if h.verifies:
            fresh = bf16_result(y_fresh, *block_sum(M, k, N, AFTER_ITER))
            if others:
                fresh.forced = True
                fresh.msg_parts.append(route_problem("after timing", others))
            h.record_after_timing(name, last_res, fresh, n=n)
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
