#!/usr/bin/env bash
# Two ranks on one GPU, NCCL told they are on two hosts (hostid_shim.c, LD_PRELOAD): NCCL's
# collectives between ranks, and what NCCL reports of them to the course's watch, on a machine
# with one GPU. From the repository root on the GPU machine, bin/mgpu-learn carried:
#   OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/run.sh
#   1. csrc/testdata/watch_gpu.cu as 2 ranks: each rank's counts (a collective is reported
#      with 2 ranks, unlike with one);
#   2. module3/ring-allreduce forge-memwalk with 2 ranks: the central claim of NCCL's watch;
#   3. every module1 solution with 2 ranks (PyTorch's NCCL), --no-perf;
#   4. course verify of module3 (but single-process, which needs 2 GPUs in one process) with 2
#      ranks, --no-perf, in what time is left;
#   5. the other solutions under the watch with 2 ranks, --no-perf, for what they show.
# A one-GPU copy of the course (gpus: 2 -> 1). Timings under the rig mean nothing.
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
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
counts() {
  for f in $(ls -td $MGPU_LEARN_CACHE/work/runs/*/ 2>/dev/null | head -1)run-*/rank-*.jsonl; do
    [ -f "$f" ] && python3 -c 'import json,sys
recs=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
d=[r for r in recs if r.get("t")=="done"]
print("   ", sys.argv[1].split("/runs/")[1][:70], "nccl:", json.dumps(d[-1].get("nccl")) if d else "no done record")' "$f"
  done
}
verdict() { grep -E "^(PASSED|FAILED|ERROR|REFUSED|INCONCLUSIVE)|^  (build|policy|run|correctness|performance) |reported by NCCL" | head -${1:-8}; }
echo "== 1: watch_gpu.cu, 2 ranks"
OUT=$out timeout 60 bash csrc/testdata/run_watch_gpu.sh 2 2>&1 | grep -vE "NCCL INFO" | tail -16
echo "t=$((SECONDS-s)) s"
echo "== 2: module3/ring-allreduce forge-memwalk, 2 ranks"
timeout 90 $bin --course $C check module3/ring-allreduce --variant forge-memwalk --ranks 2 --no-perf 2>&1 | verdict 12
counts
echo "-- the solution, 2 ranks"
timeout 90 $bin --course $C check module3/ring-allreduce --solution --ranks 2 --no-perf 2>&1 | verdict
counts
echo "t=$((SECONDS-s)) s"
echo "== 3: module1 solutions, 2 ranks, --no-perf"
for e in first-allreduce ring-allreduce gradient-buckets overlap-backward tensor-parallel-mlp moe-dispatch; do
  [ $((SECONDS-s)) -gt 330 ] && { echo "(time box: $e and later not run)"; break; }
  echo "-- module1/$e"
  timeout 60 $bin --course $C check module1/$e --solution --ranks 2 --no-perf 2>&1 | verdict 6
done
echo "t=$((SECONDS-s)) s"
echo "== 4: course verify module3 (2 ranks, --no-perf)"
timeout -s INT $((560-(SECONDS-s)-60)) $bin --course $C course verify module3/init-allreduce module3/ring-allreduce module3/grouped-collectives module3/training-loop module3/fault-tolerance --ranks 2 --no-perf --report-dir $out --machine nvidia-1gpu-2hosts-module3 2>&1 | tail -30
echo "t=$((SECONDS-s)) s"
echo "== 5: the other solutions under the watch, 2 ranks, --no-perf"
for e in module4/small-allreduce module4/signal-latency module4/halo-jacobi module6/one-shot module6/two-shot module6/fused-norm; do
  [ $((SECONDS-s)) -gt 555 ] && { echo "(time box: $e and later not run)"; break; }
  echo "-- $e"
  timeout 40 $bin --course $C check $e --solution --ranks 2 --no-perf 2>&1 | verdict 6
  counts
done
echo "t=$((SECONDS-s)) s"
