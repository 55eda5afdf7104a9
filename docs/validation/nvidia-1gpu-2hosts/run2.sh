#!/usr/bin/env bash
# Second call on the rig of run.sh (two ranks on one GPU, NCCL told they are two hosts), after
# the Python harness came to refuse learner code that runs after its call returned (variant
# module1/ring-allreduce forge-late-method) and course verify came to skip what only timing can
# show where the performance stage is off. bin/mgpu-learn and .gpu/ carried:
#   OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/run2.sh
#   1. course verify module1, 2 ranks, --no-perf (PyTorch's NCCL between the two ranks);
#   2. course verify module2, 2 ranks, --no-perf (CUDA-aware Open MPI 4.1.4 between two
#      processes on one GPU, NCCL through the rig), in what time is left.
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-2hosts
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
D=$R/docs/validation/nvidia-1gpu-2hosts
cc -shared -fPIC -O2 -o $HOME/hostid_shim.so $D/hostid_shim.c || exit 1
export LD_PRELOAD=$HOME/hostid_shim.so
[ -x /tmp/ompi-cuda/bin/mpirun ] || tar xf .gpu/ompi-cuda-4.1.4.tar.xz -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
echo "== 1: course verify module1 (2 ranks, --no-perf)"
timeout -s INT 340 $bin --course $C course verify module1 --ranks 2 --no-perf --report-dir $out --machine nvidia-1gpu-2hosts-module1 2>&1 | grep -vE "^ok " | tail -30
echo "t=$((SECONDS-s)) s"
echo "== 2: course verify module2 (2 ranks, --no-perf)"
timeout -s INT $((555-(SECONDS-s))) $bin --course $C course verify module2 --ranks 2 --no-perf --report-dir $out --machine nvidia-1gpu-2hosts-module2 2>&1 | grep -vE "^ok " | tail -30
echo "t=$((SECONDS-s)) s"
