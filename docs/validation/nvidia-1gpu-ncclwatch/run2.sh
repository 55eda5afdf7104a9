#!/usr/bin/env bash
# NCCL's watch, second run on one GPU, after it came to cover patterns and ncclSend/ncclRecv:
# OUT=$OUT bash THIS (bin/mgpu-learn and .gpu/ompi-cuda-4.1.4.tar.xz carried).
#   1. what the plugin costs a call: 20000 self exchanges (ncclSend + ncclRecv, 4 KiB, one
#      group) per round, 5 rounds, without and with the watch, twice;
#   2. every exercise the watch now covers, on a one-GPU copy of the course: solution and
#      starter with one rank (module2/jacobi-sendrecv through CUDA-aware Open MPI 4.1.4), the
#      counts from the solutions' done records.
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-watch
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
[ -x /tmp/ompi-cuda/bin/mpirun ] || tar xf .gpu/ompi-cuda-4.1.4.tar.xz -C /tmp
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
$bin doctor --refresh 2>&1 | grep -E "NCCL|CUDA MPI" | head -3
echo "== 1: the plugin's cost per call"
OUT=$out WATCH_REPS=20000 bash csrc/testdata/run_watch_gpu.sh 1 2>&1 | grep -vE "^vm:|NCCL INFO" | tail -40
echo "t=$((SECONDS-s)) s"
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
echo "== 2: the exercises under the watch, one rank"
for e in module3/ring-allreduce module4/small-allreduce module4/signal-latency module4/halo-jacobi module6/one-shot module6/two-shot module6/fused-norm module2/jacobi-sendrecv module2/jacobi-overlap; do
  echo "-- $e"
  timeout 120 $bin --course $C check $e --solution --ranks 1 2>&1 | grep -E "^(PASSED|FAILED|ERROR|REFUSED|INCONCLUSIVE)|^  (run|correctness|performance|policy) " | head -6
  counts
done
echo "t=$((SECONDS-s)) s"
timeout 300 $bin --course $C course verify module4/halo-jacobi module4/signal-latency module6/one-shot module6/two-shot --ranks 1 --no-perf --report-dir $out --machine nvidia-ncclwatch-1gpu-b 2>&1 | tail -30
echo "t=$((SECONDS-s)) s"
