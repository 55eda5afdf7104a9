#!/usr/bin/env bash
# After run4.sh: the two module1 fixes it led to (tensor-parallel-mlp on 3 ranks with keep-lists
# stopping after its first case, ring-allreduce all-pairs-int8 on 3), module7's torchrun
# exercises on 2 ranks under the Python guards of stop 33. module6/symm-mem and module7/fused
# are left out: torch's symmetric memory needs peer access between two GPUs.
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/run5.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-2hosts
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
D=$R/docs/validation/nvidia-1gpu-2hosts
cc -shared -fPIC -O2 -o $HOME/hostid_shim.so $D/hostid_shim.c -ldl || exit 1
export LD_PRELOAD=$HOME/hostid_shim.so
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/; find $C -name __pycache__ -prune -exec rm -rf {} +
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
v() { # name ranks budget exercises...
  local n=$1 r=$2 b=$3; shift 3
  echo "== course verify $* (--ranks $r, --no-perf)"
  timeout -s INT $b $bin --course $C course verify "$@" --ranks $r --no-perf --report-dir $out --machine nvidia-1gpu-2hosts-$n 2>&1 | tail -30
  echo "t=$((SECONDS-s)) s"
}
c() { # budget ranks check-args...
  local b=$1 r=$2; shift 2
  echo "== check $* (--ranks $r, --no-perf)"
  MGPU_LEARN_WARM=on timeout -s INT $b $bin --course $C check "$@" --ranks $r --no-perf 2>&1 | grep -v "^  [a-z]*  *\.\.\.$" | head -40
  echo "rc=${PIPESTATUS[0]} t=$((SECONDS-s)) s"
}
v tpmlp3b 3 150 module1/tensor-parallel-mlp
c 40 3 module1/ring-allreduce --variant all-pairs-int8
v module7 2 200 module7/unfused module7/chunked-overlap module7/matmul-reduce-scatter
