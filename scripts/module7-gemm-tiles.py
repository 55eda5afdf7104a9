#!/usr/bin/env python3
"""Device bench (information, not a test): the GEMM kernel of module7/fused's reference, flags
preset, at the timed shapes and several tile configurations, against torch.matmul. It chose the
reference's 128 x 256 x 64 tiles (docs/validation/nvidia-h100-x1-module7-smoke.txt).

    python3 scripts/module7-gemm-tiles.py     # from the repository, on a GPU machine with Triton
"""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exercises",
                                "module7-fused", "fused", "solution"))
from fused import _ag_gemm  # noqa: E402  (the reference's kernel itself)

CONFIGS = [(128, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (128, 256, 64, 8, 4),
           (256, 128, 64, 8, 3), (128, 256, 32, 8, 4), (128, 128, 128, 8, 3)]


def timed(fn, n=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n):
        fn()
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) * 1e3 / n


def main():
    flags = torch.ones(64, dtype=torch.uint32, device="cuda")  # every piece "landed" at epoch 1
    for M, K, N in [(8192, 8192, 1024), (8192, 8192, 2048), (8192, 8192, 4096)]:
        a = torch.randint(-4, 5, (M, K), device="cuda").to(torch.bfloat16)
        b = torch.randint(-4, 5, (K, N), device="cuda").to(torch.bfloat16)
        c = torch.empty(M, N, dtype=torch.bfloat16, device="cuda")
        ref = a @ b
        flops = 2 * M * N * K
        base = timed(lambda: torch.matmul(a, b, out=c))
        print(f"M={M} K={K} N={N}: torch.matmul {base:.1f} us ({flops / base / 1e6:.0f} TFLOPS)")
        for BM, BN, BK, w, s in CONFIGS:
            grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)

            def run():
                _ag_gemm[grid](a, b, c, flags, M, N, K, M // 2, M // 8, 4, 0, 1, a.stride(0),
                               b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                               BM=BM, BN=BN, BK=BK, num_warps=w, num_stages=s)
            us = timed(run)
            print(f"  BM={BM} BN={BN} BK={BK} warps={w} stages={s}: {us:.1f} us "
                  f"({flops / us / 1e6:.0f} TFLOPS) {'exact' if torch.equal(c, ref) else 'MISMATCH'}")


if __name__ == "__main__":
    main()
