"""Driver of module7/unfused (course-owned; the learner edits unfused.py).

gather_then_matmul(a_shard, b): every rank holds m rows of the activations A (world*m x K),
rank r rows [r*m, (r+1)*m), and the full weight b (K x N); it must return A @ b[:, lo:hi] with
lo, hi = r*N//world, (r+1)*N//world: every row, this rank's columns. A case's n is m; K = 2n+1
and N = 12n for an even n, 2(2n+1) for an odd n, which 3 and 4 ranks do not divide (case
"odd": N = 22).

Correctness is exact: the inputs are h.exact integers in [-64, 64] in float32, so every product
is exact and every dot product (|sum| <= K * 4096 < 2^24 for K <= 4096) too, in any order of
summation. The result is compared element by element with the same product computed in
float64 from every rank's inputs, on every rank; wrong row blocks are diagnosed (rank order,
whole of b, uneven split). TF32 is turned off (the inputs would survive it, but the result
must not depend on that).

Performance (GPU, bfloat16, M = K = 8192 tokens x features, N = the perf case's n): time
against the same unfused computation written by the course (all_gather_into_tensor into a
preallocated buffer, then one matmul with the column slice of b). The target is parity.
After each timed case, case "after-timing": the last timed call's result must still be A @
b[:, lo:hi] (its inputs never changed), and one more call with new whole numbers written into
the timed a and b must give the new product, so that a function that skips repeated work fails
(bfloat16 results are compared with the float32 product, allowing for rounding: bf16_result).

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over every result of
gather_then_matmul (the timed case's last one and the one after it too); the verifier makes the
products from every rank's inputs, which the rank itself cannot make. The weight b is rank 0's
numbers: rank 0 makes it and broadcasts it, since a split rank knows its own inputs only.
"""
import sys

import torch
import torch.distributed as dist
from torch.utils.flop_counter import FlopCounterMode

import mgpu_harness

ITERS = 2
PERF_M = 8192
PERF_K = 8192
PERF_ITER = 1 << 19   # iter of the timed data
AFTER_ITER = 1 << 20  # iter of the after-timing data: no checked call used it


def dims(n):
    """m, K, N: N = 12n for an even n (2, 3 and 4 ranks divide it), 2(2n + 1) for an odd n
    (3 and 4 ranks do not)."""
    return n, 2 * n + 1, 12 * n if n % 2 == 0 else 2 * (2 * n + 1)


def cols(rank, world, n_cols):
    return rank * n_cols // world, (rank + 1) * n_cols // world


h = mgpu_harness.init(default_cases={"small": 8, "odd": 5})
learner = h.import_learner("unfused")  # None in the verifier
if h.computes:
    h.init_process_group()
torch.backends.cuda.matmul.allow_tf32 = False
W, R = h.world, h.rank

# The exercise is split (verifier: true, docs/protocol.md §4): this rank calls the learner and
# hands its results over; its verifier, which never loads the learner's module and alone knows
# every rank's inputs, makes the expected products and records the cases.


def from_rank0(shape, make):
    """The rank: rank 0's numbers make() (float32) on every rank. A split rank may make its own
    inputs only, so rank 0 makes them and broadcasts them."""
    t = make() if R == 0 else torch.empty(shape, device=h.device)
    h.real("torch.distributed.broadcast")(t, src=0)
    return t


# The route: the rows travel in one all-gather (any collective but an all-gather, by any route,
# is counted: h.count_collectives), and the GEMM multiplies by this rank's columns of b only
# (the multiply-adds of matrix products, counted by torch's FlopCounterMode, at most
# FLOP_SLACK times those of A @ b[:, lo:hi]). An all-reduce of a zero-padded buffer and a GEMM
# with the whole of b, sliced after, gave the right result (a red-team pass).
FLOP_SLACK = 1.25


def route_problems(when, others, flops, lo, hi, m, K):
    problems = []
    if others:
        problems.append(f"{when}: besides the all-gather your code launched other collectives: "
                        f"{mgpu_harness.describe_collectives(others)}. Gather the rows with "
                        "dist.all_gather_into_tensor, nothing else")
    need = 2 * W * m * K * (hi - lo)
    if flops is not None and flops > FLOP_SLACK * need:
        problems.append(f"{when}: your matrix products did {flops} floating-point operations, "
                        f"where A @ b[:, lo:hi] takes {need} ({hi - lo} columns): multiply by "
                        "this rank's columns of b only, not by the whole of b and slice after")
    return problems


def counted(call):
    """The rank: call() under the collective census and torch's FLOP counter; (result, the
    collectives besides all-gathers, the matrix products' floating-point operations)."""
    with h.count_collectives() as census, FlopCounterMode(display=False) as flops, h.forbid():
        y = call()
    return y, mgpu_harness.collectives_besides(census, ("all_gather",)), flops.get_total_flops()


for name, n in h.cases.items():
    m, K, N = dims(n)
    lo, hi = cols(R, W, N)
    result = None
    problems = []
    for it in range(ITERS):
        y = others = flops = None
        if h.computes:
            a = h.exact((m, K), iter=it, salt=1)
            # The same full weight on every rank: rank 0's numbers.
            b = from_rank0((K, N), lambda: h.exact((K, N), rank=0, iter=it, salt=2))
            y, others, flops = counted(lambda: learner.gather_then_matmul(a.clone(), b.clone()))
        y = h.hand_over(f"{name}/{it}/y", y)
        others = h.hand_over(f"{name}/{it}/other-collectives", others)
        flops = h.hand_over(f"{name}/{it}/flops", flops)
        if not h.verifies:
            continue
        if not problems:
            problems += route_problems(f"iteration {it}", others, flops, lo, hi, m, K)
        b = h.exact((K, N), rank=0, iter=it, salt=2)
        a_full = torch.cat([h.exact((m, K), rank=s, iter=it, salt=1, dtype=torch.float64)
                            for s in range(W)])
        want = a_full @ b.to(torch.float64)[:, lo:hi]
        r = h.compare(y, want)
        if result is None or (result.ok() and not r.ok()):
            result = r
        if r.ok() or problems or not isinstance(y, torch.Tensor):
            continue
        got = y.detach().to(torch.float64).cpu()
        wantc = want.cpu()
        if tuple(got.shape) == (W * m, N) and W > 1:
            problems.append(f"the result has all N = {N} columns: you multiplied by the whole "
                            f"of b; rank {R} owns columns [{lo}, {hi}) only")
        elif tuple(got.shape) != tuple(want.shape):
            w = N // W
            if N % W and got.shape[1] == w:  # N // world columns where hi - lo differs
                problems.append(f"N = {N} does not divide evenly by {W} ranks: rank r owns "
                                f"columns [r*N//world, (r+1)*N//world), here [{lo}, {hi})")
            else:
                problems.append(f"the result must be (world*m, hi-lo) = {tuple(want.shape)}")
        elif N % W and torch.equal(got, (a_full @ b.to(torch.float64))
                                   [:, R * (N // W):(R + 1) * (N // W)].cpu()):
            problems.append(f"N = {N} does not divide evenly by {W} ranks: rank r owns "
                            f"columns [r*N//world, (r+1)*N//world), here [{lo}, {hi})")
        else:
            blocks = [wantc[s * m:(s + 1) * m] for s in range(W)]
            wrong = [s for s in range(W) if not torch.equal(got[s * m:(s + 1) * m], blocks[s])]
            moved = [s for s in wrong
                     if any(torch.equal(got[s * m:(s + 1) * m], blocks[t]) for t in range(W))]
            if moved:
                problems.append(f"rows {moved[0] * m}..{moved[0] * m + m - 1} hold another "
                                "rank's rows: the gathered shards must be in rank order "
                                "(rank 0's rows first)")
            else:
                problems.append(f"iteration {it}: row blocks of ranks {wrong} differ from "
                                "A @ b[:, lo:hi] (A: every rank's rows in rank order)")
    if not h.verifies:
        continue
    if problems:
        result.forced = True  # the values may be right: the case fails on the route
        result.msg_parts += problems
    h.record(name, result)


def small(shape, rank, it, salt):
    """Whole numbers in [-4, 4] for the timed and after-timing calls (h.exact folded): exact in
    bfloat16, and their products' sums (K = 8192) exact in float32."""
    return torch.remainder(h.exact(shape, rank=rank, iter=it, salt=salt), 9) - 4


def bf16_result(y, want, mag):
    """h.compare of y (bfloat16) with want (float32, exact): an element within 2^-6 of mag, the
    sum of its products' magnitudes, counts as right (a few roundings of partial sums to
    bfloat16, in any order: cuBLAS may reduce split-K partials in bfloat16); skipped or stale
    work is off by about the size of the values themselves."""
    return h.compare(y, want, tol=mag * 2.0 ** -6)


def product(m, K, N, lo, hi, it):
    """The verifier: A @ b[:, lo:hi] of the timed shapes' data of iteration it, and the sums
    of its products' magnitudes (float32: exact for these whole numbers, TF32 off)."""
    full = torch.cat([small((m, K), s, it, 1) for s in range(W)])
    bs = small((K, N), 0, it, 2)[:, lo:hi].contiguous()
    return full @ bs, full.abs() @ bs.abs()


if h.timing:
    all_gather = h.real("torch.distributed.all_gather_into_tensor")
    for name, n in h.perf_cases.items():
        m, K, N = PERF_M // W, PERF_K, n
        lo, hi = cols(R, W, N)
        y_last = y_fresh = others = flops = None
        if h.computes:
            a = small((m, K), R, PERF_ITER, 1).to(torch.bfloat16)
            b = from_rank0((K, N), lambda: small((K, N), 0, PERF_ITER, 2)).to(torch.bfloat16)
            buf = torch.empty(W * m, K, dtype=a.dtype, device=h.device)
            last = {}  # the last timed call's result

            def yours(i):
                last["y"] = learner.gather_then_matmul(a, b)

            def baseline(i):
                all_gather(buf, a)
                buf @ b[:, lo:hi]

            h.time_pair(name, bytes=W * m * K * a.element_size(), factor=(W - 1) / W,
                        metric="time", yours=yours, baseline=baseline)
            y_last = last.get("y")
        # Case after-timing: the last timed call's result (a and b did not change), then new
        # data in a and b and one more call as the timed ones made it; the verifier compares
        # each with the product of its data. The same collective calls on every rank.
        y_last = h.hand_over(f"after-timing/{name}/last", y_last)
        last_res = None
        if h.verifies:
            last_res = bf16_result(y_last, *product(m, K, N, lo, hi, PERF_ITER))
        if h.computes:
            a.copy_(small(a.shape, R, AFTER_ITER, 1))
            b.copy_(from_rank0((K, N), lambda: small((K, N), 0, AFTER_ITER, 2)))
            y_fresh, others, flops = counted(lambda: learner.gather_then_matmul(a, b))
            if h.on_gpu:
                torch.cuda.synchronize()
        y_fresh = h.hand_over(f"after-timing/{name}/fresh", y_fresh)
        others = h.hand_over(f"after-timing/{name}/other-collectives", others)
        flops = h.hand_over(f"after-timing/{name}/flops", flops)
        if h.verifies:
            fresh = bf16_result(y_fresh, *product(m, K, N, lo, hi, AFTER_ITER))
            found = route_problems("after timing", others, flops, lo, hi, m, K)
            if found:
                fresh.forced = True
                fresh.msg_parts += found
            h.record_after_timing(name, last_res, fresh, n=n)
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
