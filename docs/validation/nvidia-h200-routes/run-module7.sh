#!/usr/bin/env bash
# The route checks of module7 (census, FLOP count) and the harness wrappers without a way back
# to the original, on one GPU with one rank: solutions must stay correct, after-timing included.
# From the repository root on the GPU machine, bin/mgpu-learn built: OUT=$OUT bash THIS
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-routes
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
echo "== course verify --ranks 1, timing on"
timeout 540 $bin course verify module7/unfused module7/chunked-overlap module7/matmul-reduce-scatter \
  module1/ring-allreduce module1/first-allreduce --ranks 1 --report-dir $out --machine nvidia-h200-module7-routes 2>&1
echo "rc=$? t=$((SECONDS-s)) s"
for f in $MGPU_LEARN_CACHE/work/runs/*solution*/run-*/verifier-0.jsonl; do
  python3 - "$f" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
bad = [r.get("case") for r in recs if r.get("t") == "case" and not r.get("ok")]
print(sys.argv[1].split("/runs/")[1][:70], "cases:", sum(r.get("t") == "case" for r in recs), "failing:", bad)
PY
done
