"""Driver of module7/chunked-overlap (course-owned; the learner edits overlap.py).

overlapped(a_shard, b_shard): every rank holds m rows of the activations A (world*m x K), rank
r rows [r*m, (r+1)*m), and its own K x n column shard of the weight; it must return
A @ b_shard (world*m x n) while overlapping the gather with the GEMM: chunks travel around a
ring (or any schedule the learner likes) and each chunk's GEMM runs as soon as it arrived. A
case's n is m; K = 2n + 1 and the shard has n + 3 columns.

Correctness is exact, as in module7/unfused: h.exact integers in [-64, 64] in float32, so
every dot product is exact (K <= 4096), compared element by element on every rank with the
float64 product. On every iteration the ranks other than 0 call overlapped DELAY_S late, so
rank 0's transfers cannot have finished when its host reaches the next GEMM: a GEMM that
does not wait for its chunk (handle.wait(), which on a GPU is the compute stream waiting on
the transfer's event) reads a buffer that does not hold the chunk yet, and the rows of that
chunk are wrong. Wrong row blocks are diagnosed: a block that holds another rank's rows is a
chunk-order mistake (the chunk held at step k of a ring comes from rank (r - k) mod world,
which is (r + k) only on 2 ranks), any other wrong block is a chunk used before it arrived.
Before the cases, the driver makes one ring exchange itself, so that NCCL's point-to-point
connections exist and the learner's sends and receives do not block the host.

Performance (GPU, bfloat16, M = K = 8192, N = the perf case's n, each rank N/world columns):
time against the unfused form written by the course (all_gather_into_tensor, then one
matmul). A hidden full gather before the GEMMs passes correctness and fails here. After each
timed case, case "after-timing": the last timed call's result must still be A @ b_shard (its
inputs never changed), and one more call with new whole numbers written into the timed a and b
must give the new product, so that a function that skips repeated work fails (bfloat16 results
are compared with the float32 product, allowing for rounding: bf16_result).

The checks are made by each rank's verifier, a second process that runs this file without the
learner's module (docs/protocol.md §4, "The verifier"): the rank hands over every result of
overlapped (the timed case's last one and the one after it too); the verifier makes the
products from every rank's rows of A, which the rank itself cannot make.
"""
import sys
import time

import torch
import torch.distributed as dist

import mgpu_harness

ITERS = 2
DELAY_S = 0.3
PERF_M = 8192
PERF_K = 8192
PERF_ITER = 1 << 19   # iter of the timed data
AFTER_ITER = 1 << 20  # iter of the after-timing data: no checked call used it


def dims(n):
    return n, 2 * n + 1, n + 3  # m, K, columns of this rank's shard


h = mgpu_harness.init(default_cases={"small": 8, "odd": 5})
learner = h.import_learner("overlap")  # None in the verifier
if h.computes:
    h.init_process_group()
torch.backends.cuda.matmul.allow_tf32 = False
W, R = h.world, h.rank

# The exercise is split (verifier: true, docs/protocol.md §4): this rank calls the learner and
# hands its results over; its verifier, which never loads the learner's module and alone knows
# every rank's inputs, makes the expected products and records the cases.

# Warm up the point-to-point path (NCCL connects lazily, blocking the host).
if h.computes and W > 1:
    t = torch.zeros(4, device=h.device)
    u = torch.empty_like(t)
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (R + 1) % W),
                                     dist.P2POp(dist.irecv, u, (R - 1) % W)]):
        q.wait()
    if h.on_gpu:
        torch.cuda.synchronize()

# The only collectives that may carry the chunks: the ring's sends and receives. Anything else,
# through any route, is counted (h.count_collectives): an all-gather of the whole of A started
# asynchronously beside the own rows' GEMM has the ring's timeline on 2 GPUs and passed every
# check before (a red-team pass).
P2P = ("send", "recv")


def route_problem(when, others):
    """when: "iteration 0", ... or "after timing"."""
    return (f"{when}: besides sends and receives your code launched other collectives: "
            f"{mgpu_harness.describe_collectives(others)}. The chunks must travel around the "
            "ring in point-to-point messages only (dist.batch_isend_irecv with P2POp "
            "isend/irecv), one chunk per step: a library collective that gathers A is the "
            "unfused form")


for name, n in h.cases.items():
    m, K, cols = dims(n)
    result = None
    problems = []
    for it in range(ITERS):
        y = others = None
        if h.computes:
            a_in = h.exact((m, K), iter=it, salt=1)
            b_in = h.exact((K, cols), iter=it, salt=2)  # this rank's own shard
            if h.on_gpu:
                torch.cuda.synchronize()
            dist.barrier()
            if R != 0:
                time.sleep(DELAY_S)  # rank 0 runs ahead: its chunks arrive late
            with h.count_collectives() as census, h.forbid():
                y = learner.overlapped(a_in, b_in)
            others = mgpu_harness.collectives_besides(census, P2P)
        y = h.hand_over(f"{name}/{it}/y", y)
        others = h.hand_over(f"{name}/{it}/other-collectives", others)
        if not h.verifies:
            continue
        if others and not problems:
            problems.append(route_problem(f"iteration {it}", others))
        b = h.exact((K, cols), iter=it, salt=2, device=h.device, dtype=torch.float64)
        blocks = [h.exact((m, K), rank=s, iter=it, salt=1, dtype=torch.float64) @ b
                  for s in range(W)]
        want = torch.cat(blocks)
        r = h.compare(y, want)
        if result is None or (result.ok() and not r.ok()):
            result = r
        if r.ok() or problems or not isinstance(y, torch.Tensor) \
                or tuple(y.shape) != tuple(want.shape):
            continue
        got = y.detach().to(torch.float64)
        wrong = [s for s in range(W) if not torch.equal(got[s * m:(s + 1) * m], blocks[s])]
        moved = [s for s in wrong
                 if any(torch.equal(got[s * m:(s + 1) * m], blocks[t]) for t in range(W))]
        if moved:
            problems.append(f"iteration {it}: the rows of rank {moved[0]} hold another rank's "
                            "chunk times b_shard: wrong chunk order (on a ring, the chunk held "
                            "at step k came from rank (rank - k) mod world; (rank + k) is the "
                            "same rank only on 2 ranks)")
        else:
            problems.append(f"iteration {it}: the rows of rank(s) {wrong} are wrong while "
                            "the other ranks were late: was a chunk multiplied before its "
                            "receive finished? Wait on the transfer's handles (on a GPU: the "
                            "compute stream waits on its event) before the GEMM uses the "
                            "chunk, and write every chunk's rows")
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


def product(m, K, cols, it):
    """The verifier: A @ b_shard of the timed shapes' data of iteration it, and the sums of
    its products' magnitudes (float32: exact for these whole numbers, TF32 off)."""
    full = torch.cat([small((m, K), s, it, 1) for s in range(W)])
    bs = small((K, cols), R, it, 2)
    return full @ bs, full.abs() @ bs.abs()


if h.timing:
    all_gather = h.real("torch.distributed.all_gather_into_tensor")
    for name, n in h.perf_cases.items():
        m, K, cols = PERF_M // W, PERF_K, n // W
        y_last = y_fresh = others = None
        if h.computes:
            a = small((m, K), R, PERF_ITER, 1).to(torch.bfloat16)
            b = small((K, cols), R, PERF_ITER, 2).to(torch.bfloat16)
            buf = torch.empty(W * m, K, dtype=a.dtype, device=h.device)
            last = {}  # the last timed call's result

            def yours(i):
                last["y"] = learner.overlapped(a, b)

            def baseline(i):
                all_gather(buf, a)
                buf @ b

            h.time_pair(name, bytes=W * m * K * a.element_size(), factor=(W - 1) / W,
                        metric="time", yours=yours, baseline=baseline)
            y_last = last.get("y")
        # Case after-timing: the last timed call's result (a and b did not change), then new
        # data in a and b and one more call as the timed ones made it; the verifier compares
        # each with the product of its data. The same collective calls on every rank.
        y_last = h.hand_over(f"after-timing/{name}/last", y_last)
        last_res = None
        if h.verifies:
            last_res = bf16_result(y_last, *product(m, K, cols, PERF_ITER))
        if h.computes:
            a.copy_(small(a.shape, R, AFTER_ITER, 1))
            b.copy_(small(b.shape, R, AFTER_ITER, 2))
            with h.count_collectives() as census, h.forbid():
                y_fresh = learner.overlapped(a, b)
            others = mgpu_harness.collectives_besides(census, P2P)
            if h.on_gpu:
                torch.cuda.synchronize()
        y_fresh = h.hand_over(f"after-timing/{name}/fresh", y_fresh)
        others = h.hand_over(f"after-timing/{name}/other-collectives", others)
        if h.verifies:
            fresh = bf16_result(y_fresh, *product(m, K, cols, AFTER_ITER))
            if others:
                fresh.forced = True
                fresh.msg_parts.append(route_problem("after timing", others))
            h.record_after_timing(name, last_res, fresh, n=n)
elif h.computes:
    h.note("performance not timed on this run (no GPU, or MGPU_PERF=0)")

sys.exit(h.finish())
