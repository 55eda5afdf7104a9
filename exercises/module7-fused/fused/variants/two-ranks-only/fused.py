"""module7/fused — variant two-ranks-only: pulls the pieces of the next rank only
(the other rank, on two): the gather of a pair, which misses ranks on 3 or more."""
import torch
import triton
import triton.language as tl

BM, BN, BK = 128, 256, 64


@triton.jit(do_not_specialize=["epoch"])
def _ag_gemm(a_ptr, b_ptr, c_ptr, flags_ptr, M, N, K, m, rows_per_split, splits, rank, epoch,
             stride_am, stride_bk, stride_bn, stride_cm, stride_cn,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # Row tiles in the order their rows land: this rank's own first, then rank + 1's, ...
    tm = (pid // tiles_n + (rank * m) // BM) % tiles_m
    tn = pid % tiles_n
    r0 = tm * BM
    r1 = tl.minimum(r0 + BM, M) - 1
    # The pieces holding rows r0..r1: a tile may span two pieces, or two ranks' shards.
    first = (r0 // m) * splits + (r0 % m) // rows_per_split
    last = (r1 // m) * splits + (r1 % m) // rows_per_split
    for c in range(first, last + 1):
        while tl.atomic_add(flags_ptr + c, 0, sem="acquire", scope="gpu") < epoch:
            pass
    tl.debug_barrier()

    rm = r0 + tl.arange(0, BM)
    rn = tn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        ka = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + ka[None, :],
                    mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ka[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def fused_ag_gemm(ctx, b_shard, out):
    cur = torch.cuda.current_stream()
    # The pulls must follow what the current stream holds (this call's inputs), on a stream
    # of their own so that the GEMM below does not queue behind them.
    ctx.copy_stream.wait_stream(cur)
    with torch.cuda.stream(ctx.copy_stream):
        for p in [(ctx.rank + 1) % ctx.world]:  # "the other rank"
            for i in range(ctx.splits):
                ctx.pull(p, i)
    a = ctx.gathered
    M, K = a.shape
    N = b_shard.shape[1]
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
    _ag_gemm[grid](a, b_shard, out, ctx.progress, M, N, K, ctx.m, ctx.rows_per_split,
                   ctx.splits, ctx.rank, ctx.epoch,
                   a.stride(0), b_shard.stride(0), b_shard.stride(1), out.stride(0), out.stride(1),
                   BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=3)
    # The next call's inputs are written on the current stream: make it wait for the pulls.
    cur.wait_stream(ctx.copy_stream)
