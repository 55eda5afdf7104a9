#!/usr/bin/env bash
# NCCL's watch (docs/protocol.md §4) on a one-GPU machine. From the repository root, bin/mgpu-learn
# built and carried: OUT=$OUT bash THIS
#   1. csrc/testdata/run_watch_gpu.sh: the plugin in the machine's NCCL, counts by column;
#   2. module3/ring-allreduce through mgpu-learn on a one-GPU copy of the course (gpus: 2 -> 1):
#      the solution and the starter with the watch on, the done records' counts, then course
#      verify of the exercise with one rank (variants that need 2 ranks are skipped);
#   3. forge-memwalk with one rank: the forgery finds ncclAllReduce and passes, because NCCL
#      reports no collective on a one-rank communicator (the variant asks for 2 ranks);
#   4. the other exercises under the watch whose solutions run on one GPU.
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-watch
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
$bin doctor --refresh 2>&1 | grep -E "NCCL|nvcc|GPU" | head -6
echo "== 1: run_watch_gpu.sh 1"
OUT=$out bash csrc/testdata/run_watch_gpu.sh 1 2>&1 | tail -12
echo "t=$((SECONDS-s)) s"
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
counts() { # the nccl object of the newest runs' done records
  for f in $(ls -td $MGPU_LEARN_CACHE/work/runs/*/ 2>/dev/null | head -1)run-*/rank-*.jsonl; do
    [ -f "$f" ] && python3 -c 'import json,sys
recs=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
d=[r for r in recs if r.get("t")=="done"]
print(sys.argv[1].split("/runs/")[1][:60], "nccl:", json.dumps(d[-1].get("nccl")) if d else "no done record")' "$f"
  done
}
echo "== 2: module3/ring-allreduce, one rank"
for t in --solution "" ; do
  timeout 120 $bin --course $C check module3/ring-allreduce $t --ranks 1 2>&1 | grep -vE "^\s*$" | head -14
  counts
done
MGPU_LEARN_BIN=$bin scripts/module-smoke.sh --module module3-nccl --jobs 8 --build-only --out $out/pre >/dev/null 2>&1 || true
echo "prebuilt t=$((SECONDS-s)) s"
timeout 240 $bin --course $C course verify module3/ring-allreduce --ranks 1 --report-dir $out --machine nvidia-ncclwatch-1gpu 2>&1 | tail -40
echo "t=$((SECONDS-s)) s"
echo "== 3: forge-memwalk, one rank"
timeout 100 $bin --course $C check module3/ring-allreduce --variant forge-memwalk --ranks 1 2>&1 | grep -vE "^\s*$" | head -12
counts
echo "== 4: other exercises under the watch, solutions, one rank"
for e in module4/small-allreduce module6/fused-norm module6/nccl-device; do
  timeout 100 $bin --course $C check $e --solution --ranks 1 2>&1 | grep -vE "^\s*$" | head -8
  counts
done
echo "t=$((SECONDS-s)) s"
