#!/usr/bin/env bash
# A try, in what device time stop 35 had left: torch's symmetric memory with two ranks on one GPU
# under CUDA MPS (run6.sh's daemon), where kernels of the two ranks can spin on each other's
# flags. module6/symm-mem and module7/fused map their peers' buffers through torch's
# symmetric memory; on one GPU the "peer" is the same device, mapped from another process.
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/run8.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-2hosts
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
D=$R/docs/validation/nvidia-1gpu-2hosts
export CUDA_MPS_PIPE_DIRECTORY=$HOME/mps-pipe CUDA_MPS_LOG_DIRECTORY=$HOME/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d || { echo "no MPS"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control; sleep 1' EXIT
echo set_default_active_thread_percentage 50 | nvidia-cuda-mps-control
cc -shared -fPIC -O2 -o $HOME/hostid_shim.so $D/hostid_shim.c -ldl || exit 1
export LD_PRELOAD=$HOME/hostid_shim.so
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/; find $C -name __pycache__ -prune -exec rm -rf {} +
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
for e in module6/symm-mem module7/fused; do
  echo "== check $e --solution (--ranks 2, --no-perf)"
  timeout -s INT 80 $bin --course $C check $e --solution --ranks 2 --no-perf 2>&1 | grep -v "^  [a-z]*  *\.\.\.$" | head -30
  echo "rc=${PIPESTATUS[0]} t=$((SECONDS-s)) s"
  pkill -9 -f nvidia-cuda-mps-server; sleep 0.5
done
if [ $((SECONDS-s)) -lt 100 ]; then
  timeout -s INT $((200 - (SECONDS - s))) $bin --course $C course verify module6/symm-mem --ranks 2 --no-perf --report-dir $out --machine nvidia-1gpu-2hosts-symm-mem 2>&1 | tail -14
fi
echo "t=$((SECONDS-s)) s"
