#!/usr/bin/env bash
# scripts/integrity-module1-gpu.sh (repository root, on a GPU machine, bin/mgpu-learn built):
# module1's red-team closures on the GPUs at hand, one rank per GPU, timing on.
#  1) tensor-parallel-mlp's ledger on the GPU: the solution's figures (bytes by torch's
#     allocators and by Python, against the shard), from a course copy whose driver prints them.
#  2) course verify of gradient-buckets, overlap-backward and tensor-parallel-mlp (the census of
#     collectives, overlap by bytes, the ledger): solution, starter, every variant.
# Reports into $OUT (or /tmp/out) as MACHINE.md/.json; MACHINE defaults to the host name.
# Arguments, if any, replace the three exercises of 2).
set -u
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NO_COLOR=1 PYTHONUNBUFFERED=1
R=$(cd "$(dirname "$0")/.." && pwd); bin=$R/bin/mgpu-learn
out=${OUT:-/tmp/out}; machine=${MACHINE:-$(hostname)}
export MGPU_LEARN_CACHE=${MGPU_LEARN_CACHE:-$HOME/.cache/mgpu-integrity}  # not under /tmp: doctor says why
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$SECONDS
echo "== 1: the ledger's figures (solution, --no-perf)"
C=$HOME/ledger-course; rm -rf $C; mkdir -p $C; cp -r "$R/lessons" "$R/exercises" $C/
drv=$C/exercises/module1-pytorch/tensor-parallel-mlp/driver.py
sed -i 's/^\(        held = (a\["torch"\] or 0) + a\["python"\]\)$/\1\n        print("LEDGER", name, a, "shard", shard_bytes, file=sys.stderr)/' $drv
grep -q '"LEDGER"' $drv || { echo "the ledger print was not inserted"; exit 1; }
timeout 120 "$bin" --course $C check module1/tensor-parallel-mlp --solution --no-perf | grep -E "^(PASSED|FAILED)"
grep -h LEDGER "$MGPU_LEARN_CACHE"/work/runs/*tensor-parallel-mlp-solution*/run-*/verifier-*.log
echo "t=$((SECONDS - s)) s"
echo "== 2: course verify"
[ $# -gt 0 ] || set -- module1/tensor-parallel-mlp module1/overlap-backward module1/gradient-buckets
timeout ${VERIFY_S:-420} "$bin" course verify "$@" --report-dir "$out" --machine "$machine"
echo "rc=$? t=$((SECONDS - s)) s"
