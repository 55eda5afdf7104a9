#!/usr/bin/env bash
# module1 drivers after the last red-team fixes (ring peers and dtype, gradient-buckets' oversized
# count, overlap-backward's ready bytes), one rank, timing on. Repository root, bin/mgpu-learn built.
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-routes
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
$bin --version
timeout 400 $bin course verify module1/ring-allreduce module1/gradient-buckets module1/overlap-backward --ranks 1 \
  --report-dir $out --machine nvidia-h200-module1-last 2>&1 | grep -v "^skip"
echo "rc=$? t=$((SECONDS-s)) s"
