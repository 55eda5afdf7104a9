#!/usr/bin/env bash
# NVSHMEM with two PEs on one GPU. NVSHMEM runs several PEs per GPU ("MPG"); without CUDA MPS
# the support is limited (run.sh: module4/signal-latency's solution ended in a run error, its
# kernels spin on a flag the other PE's kernel, which cannot run beside it, must set). Under MPS
# the two PEs' kernels run side by side, and with each client held to 50% of the SMs NVSHMEM
# turns on its full MPG mode (src/host/init/init.cu, nvshmemi_determine_mpg_support_level).
# The MPS daemon here is this script's own (its own pipe folder, quit on exit); no setting of the
# GPU changes. The NCCL rig of run.sh stays on for the drivers' NCCL parts.
#   module4 course verify on 2 PEs; then module6's NVSHMEM exercises (one-shot, two-shot,
#   fused-norm) and module5's two multi-process ones (flag-barrier, ipc-vmm), in what time is left.
# Builds are warmed first, side by side (scripts/expect-builds.py), so verify mostly runs.
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/run6.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-2hosts
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
D=$R/docs/validation/nvidia-1gpu-2hosts
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader
$bin --version
export CUDA_MPS_PIPE_DIRECTORY=$HOME/mps-pipe CUDA_MPS_LOG_DIRECTORY=$HOME/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
mps=no
if command -v nvidia-cuda-mps-control >/dev/null && nvidia-cuda-mps-control -d; then
  mps=yes; trap 'echo quit | nvidia-cuda-mps-control; sleep 1' EXIT
  echo set_default_active_thread_percentage 50 | nvidia-cuda-mps-control
fi
echo "MPS: $mps"
cc -shared -fPIC -O2 -o $HOME/hostid_shim.so $D/hostid_shim.c -ldl || exit 1
export LD_PRELOAD=$HOME/hostid_shim.so
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/; find $C -name __pycache__ -prune -exec rm -rf {} +
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
echo "== warm the build cache: solutions, starters and variants, side by side"
W=$HOME/ws; rm -rf $W; $bin --course $C init $W >/dev/null
for m in module4 module6/one-shot module6/two-shot module6/fused-norm module5/flag-barrier module5/ipc-vmm; do
  $bin --course $C build $m --solution >/dev/null 2>&1 &
  (cd $W && $bin --course $C build $m >/dev/null 2>&1) &
done
for p in module4 module6 module5; do python3 scripts/expect-builds.py --variants $C $bin $p >$out/builds-$p.log 2>&1 & done
wait; tail -qn1 $out/builds-*.log
echo "t=$((SECONDS-s)) s"
echo "== probe: module4/signal-latency solution on 2 PEs"
timeout -s INT 60 $bin --course $C check module4/signal-latency --solution --ranks 2 --no-perf 2>&1 | tail -12
echo "t=$((SECONDS-s)) s"
v() { # name ranks budget exercises...
  local n=$1 r=$2 b=$3; shift 3
  [ $b -lt 20 ] && { echo "(time box: $* not run)"; return; }
  echo "== course verify $* (--ranks $r, --no-perf, $b s)"
  timeout -s INT $b $bin --course $C course verify "$@" --ranks $r --no-perf --report-dir $out --machine nvidia-1gpu-2hosts-$n 2>&1 | tail -60
  echo "t=$((SECONDS-s)) s"
}
v module4 2 $((430 - (SECONDS - s))) module4
v module6-nvshmem 2 $((520 - (SECONDS - s))) module6/one-shot module6/two-shot module6/fused-norm
v module5-procs 2 $((575 - (SECONDS - s))) module5/flag-barrier module5/ipc-vmm
[ $mps = yes ] && tail -5 $CUDA_MPS_LOG_DIRECTORY/control.log
