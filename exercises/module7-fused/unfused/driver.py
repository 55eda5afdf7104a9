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
"""
import sys

import torch
import torch.distributed as dist

import mgpu_harness

ITERS = 2
PERF_M = 8192
PERF_K = 8192
AFTER_ITER = 1 << 20  # iter of the after-timing data: no checked call used it


def dims(n):
    """m, K, N: N = 12n for an even n (2, 3 and 4 ranks divide it), 2(2n + 1) for an odd n
    (3 and 4 ranks do not)."""
    return n, 2 * n + 1, 12 * n if n % 2 == 0 else 2 * (2 * n + 1)


def cols(rank, world, n_cols):
    return rank * n_cols // world, (rank + 1) * n_cols // world


h = mgpu_harness.init(default_cases={"small": 8, "odd": 5})
learner = h.import_learner("unfused")
h.init_process_group()
torch.backends.cuda.matmul.allow_tf32 = False
W, R = h.world, h.rank

for name, n in h.cases.items():
    m, K, N = dims(n)
    lo, hi = cols(R, W, N)
    result = None
    problems = []
    for it in range(ITERS):
        a = h.exact((m, K), iter=it, salt=1)
        b = h.exact((K, N), rank=0, iter=it, salt=2)  # the same full weight on every rank
        a_full = torch.cat([h.exact((m, K), rank=s, iter=it, salt=1, dtype=torch.float64)
                            for s in range(W)])
        want = a_full @ b.to(torch.float64)[:, lo:hi]
        with h.forbid():
            y = learner.gather_then_matmul(a.clone(), b.clone())
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
    if problems:
        result.bad = max(result.bad, 1)
        result.msg_parts += problems
    h.record(name, result)


def small(shape, rank, salt):
    """Fresh whole numbers in [-4, 4] for the after-timing call (h.exact folded): exact in
    bfloat16, and their products' sums (K = 8192) exact in float32."""
    return torch.remainder(h.exact(shape, rank=rank, iter=AFTER_ITER, salt=salt), 9) - 4


def bf16_result(y, want, mag):
    """h.compare of y (bfloat16) with want (float32, exact): an element within 2^-6 of mag, the
    sum of its products' magnitudes, counts as right (a few roundings of partial sums to
    bfloat16, in any order: cuBLAS may reduce split-K partials in bfloat16); skipped or stale
    work is off by about the size of the values themselves."""
    return h.compare(y, want, tol=mag * 2.0 ** -6)


def after_timing(name, n, a, b, lo, hi, last):
    """Case after-timing of perf case name: the last timed call's result (last["y"]; a and b
    did not change), then new data in a and b and one more call as the timed ones made it,
    each compared with the product computed here. The same collective calls on every rank."""
    buf = torch.empty(W * a.shape[0], a.shape[1], dtype=a.dtype, device=h.device)

    def want():
        all_gather(buf, a)
        full, bs = buf.float(), b[:, lo:hi].float()
        return full @ bs, full.abs() @ bs.abs()

    res = bf16_result(last.get("y"), *want())
    a.copy_(small(a.shape, R, 1))
    b.copy_(small(b.shape, 0, 2))  # the same weight on every rank
    ref = want()
    with h.forbid():
        y = learner.gather_then_matmul(a, b)
    if h.on_gpu:
        torch.cuda.synchronize()
    h.record_after_timing(name, res, bf16_result(y, *ref), n=n)


if h.timing:
    all_gather = h.real("torch.distributed.all_gather_into_tensor")
    for name, n in h.perf_cases.items():
        m, K, N = PERF_M // W, PERF_K, n
        lo, hi = cols(R, W, N)
        a = torch.randint(-4, 5, (m, K), device=h.device).to(torch.bfloat16)
        b = torch.randint(-4, 5, (K, N), device=h.device).to(torch.bfloat16)
        buf = torch.empty(W * m, K, dtype=a.dtype, device=h.device)
        last = {}  # the last timed call's result

        def yours(i):
            last["y"] = learner.gather_then_matmul(a, b)

        def baseline(i):
            all_gather(buf, a)
            buf @ b[:, lo:hi]

        h.time_pair(name, bytes=W * m * K * a.element_size(), factor=(W - 1) / W,
                    metric="time", yours=yours, baseline=baseline)
        after_timing(name, n, a, b, lo, hi, last)
else:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
