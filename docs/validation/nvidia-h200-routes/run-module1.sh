#!/usr/bin/env bash
# The harness wrappers and Collective.received under module1's census users and module6/symm-mem
# (a course copy set to 1 GPU), timing on, one rank. Repository root, bin/mgpu-learn built.
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-routes
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
timeout 560 $bin --course $C course verify module1/moe-dispatch module1/gradient-buckets module1/tensor-parallel-mlp \
  module1/overlap-backward module6/symm-mem --ranks 1 --report-dir $out --machine nvidia-h200-module1-harness 2>&1 | grep -v "^skip"
echo "rc=$? t=$((SECONDS-s)) s"
