#!/usr/bin/env python3
"""Compile (never launch) the Triton kernels of module6/symm-mem and module7/fused, reference
and variants, for this machine's GPU and write each kernel's PTX to OUT/<exercise>-<name>.ptx.

  scripts/triton-ptx-harvest.py OUT

The PTX is what checker/testdata/ordering/triton holds for the tests of the ordering rule
(checker/ordering.go), which reads Triton's PTX after a run: Triton compiles at run time, so its
PTX can only be made where Triton and a GPU are. Needs torch with CUDA and Triton.
"""
import importlib.util
import os
import pathlib
import sys

import torch

root = pathlib.Path(__file__).resolve().parent.parent
out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
dev = torch.device("cuda", 0)


def load(path):
    spec = importlib.util.spec_from_file_location(f"m{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def targets(ex, fname):
    d = root / "exercises" / ex
    yield "solution", d / "solution" / fname
    for v in sorted((d / "variants").iterdir()):
        if (v / fname).exists():
            yield v.name, v / fname


def symm(mod):
    f32 = torch.zeros(4096, device=dev)
    ptrs = torch.zeros(8, dtype=torch.int64, device=dev)
    k = mod._one_shot_kernel.warmup(f32, f32, ptrs, ptrs, 4096, 0, 2, 1, BLOCK=mod.BLOCK,
                                    num_warps=8, grid=(1,))
    return k.asm["ptx"]


def fused(mod):
    a = torch.zeros(256, 256, device=dev, dtype=torch.bfloat16)
    flags = torch.zeros(16, dtype=torch.int32, device=dev)
    k = mod._ag_gemm.warmup(a, a, a, flags, 256, 256, 256, 128, 64, 2, 0, 1,
                            256, 256, 1, 256, 1, BM=mod.BM, BN=mod.BN, BK=mod.BK,
                            num_warps=8, num_stages=3, grid=(1,))
    return k.asm["ptx"]


bad = 0
for ex, fname, make in (("module6-collectives/symm-mem", "symm_allreduce.py", symm),
                        ("module7-fused/fused", "fused.py", fused)):
    for name, path in targets(ex, fname):
        try:
            ptx = make(load(path))
        except Exception as e:  # a variant whose kernel differs: say so, go on
            print(f"{ex} {name}: {type(e).__name__}: {e}"[:400])
            bad += 1
            continue
        dst = out / f"{ex.split('/')[1]}-{name}.ptx"
        dst.write_text(ptx)
        print(f"{ex} {name}: {len(ptx)} bytes -> {dst.name}")
print(f"{bad} not compiled")
