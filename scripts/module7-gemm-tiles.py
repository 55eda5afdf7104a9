#!/usr/bin/env python3
"""Device bench (information, not a test): the GEMM kernel of module7/fused's reference, flags
preset, at the timed shapes and several tile configurations, against torch.matmul. It chose the
reference's 128 x 256 x 64 tiles (docs/validation/nvidia-h100-x1-module7-smoke.txt).

    python3 scripts/module7-gemm-tiles.py     # on a GPU machine with torch and Triton
"""
import torch, triton, triton.language as tl


@triton.jit(do_not_specialize=["epoch"])
def k(a_ptr, b_ptr, c_ptr, flags_ptr, M, N, K, m, q, splits, rank, epoch,
      sam, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
      EVEN_K: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    tm = (pid // tiles_n + (rank * m) // BM) % tiles_m
    tn = pid % tiles_n
    r0 = tm * BM
    r1 = tl.minimum(r0 + BM, M) - 1
    first = (r0 // m) * splits + (r0 % m) // q
    last = (r1 // m) * splits + (r1 % m) // q
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
        if EVEN_K:
            a = tl.load(a_ptr + rm[:, None] * sam + ka[None, :], mask=rm[:, None] < M, other=0.0)
            b = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=rn[None, :] < N, other=0.0)
        else:
            a = tl.load(a_ptr + rm[:, None] * sam + ka[None, :], mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            b = tl.load(b_ptr + ka[:, None] * sbk + rn[None, :] * sbn, mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def t(fn, n=20):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
    e0.record()
    for _ in range(n): fn()
    e1.record(); e1.synchronize()
    return e0.elapsed_time(e1) * 1e3 / n

flags = torch.ones(64, dtype=torch.uint32, device="cuda")
for M, K, N in [(8192, 8192, 1024), (8192, 8192, 2048), (8192, 8192, 4096)]:
    a = torch.randint(-4, 5, (M, K), device="cuda").to(torch.bfloat16)
    b = torch.randint(-4, 5, (K, N), device="cuda").to(torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
    ref = a @ b
    base = t(lambda: torch.matmul(a, b, out=c))
    flops = 2 * M * N * K
    print(f"M={M} K={K} N={N}: torch.matmul {base:.1f} us ({flops / base / 1e6:.0f} TFLOPS)")
    for BM, BN, BK, w, s in [(128, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 256, 64, 8, 3),
                             (128, 256, 64, 8, 4), (256, 128, 64, 8, 3), (128, 256, 32, 8, 4),
                             (128, 128, 128, 8, 3)]:
        for even in (False, True):
            grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
            def run():
                k[grid](a, b, c, flags, M, N, K, M // 2, M // 8, 4, 0, 1, a.stride(0), b.stride(0),
                        b.stride(1), c.stride(0), c.stride(1), BM=BM, BN=BN, BK=BK, EVEN_K=even,
                        num_warps=w, num_stages=s)
            try:
                us = t(run)
                ok = torch.equal(c, ref)
                print(f"  BM={BM} BN={BN} BK={BK} w={w} s={s} even_k={even}: {us:.1f} us "
                      f"({flops / us / 1e6:.0f} TFLOPS) {'exact' if ok else 'MISMATCH'}")
            except Exception as e:
                print(f"  BM={BM} BN={BN} BK={BK} w={w} s={s} even_k={even}: {type(e).__name__}: {str(e)[:100]}")
