#!/usr/bin/env bash
# module1 on the rig of run.sh again, with warm ranks off: run2.sh's module1 ranks were forked
# from a warm Python process started before any rank existed, so hostid_shim.c's constructor
# had run there without a rank to name, and NCCL saw one host ("Duplicate GPU detected").
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/run3.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-2hosts MGPU_LEARN_WARM=off
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
D=$R/docs/validation/nvidia-1gpu-2hosts
cc -shared -fPIC -O2 -o $HOME/hostid_shim.so $D/hostid_shim.c || exit 1
export LD_PRELOAD=$HOME/hostid_shim.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
echo "== course verify module1 (2 ranks, --no-perf, cold ranks)"
timeout -s INT 430 $bin --course $C course verify module1/ring-allreduce module1/first-allreduce module1/moe-dispatch module1/gradient-buckets module1/tensor-parallel-mlp module1/overlap-backward --ranks 2 --no-perf --report-dir $out --machine nvidia-1gpu-2hosts-module1 2>&1 | tail -40
echo "t=$((SECONDS-s)) s"
