#!/usr/bin/env bash
# scripts/verifier-smoke.sh (run from the repository root on a GPU machine, bin/mgpu-learn built):
# the verifier process (docs/protocol.md §4) on one H100, one rank.
# 1) module3/ring-allreduce (verifier: true): solution, starter and every variant, timing on.
# 2) The same forgery with the exercise not split (verifier removed from a copy): it passes
#    correctness there, which is what shows the forgery is real.
# 3) The rest of module3 and module0, with the changed harness, no timing.
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1
export MGPU_LEARN_CACHE=$PWD/.gpucache
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; s=$SECONDS
C=/tmp/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
U=/tmp/c2; rm -rf $U; cp -r $C $U; sed -i '/^verifier: true$/d' $U/exercises/*/*/exercise.yaml
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
mkdir -p /tmp/wa && cd /tmp/wa && $R/bin/mgpu-learn --course $C init ws >/dev/null && cd ws
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== 1: course verify module3/ring-allreduce --ranks 1 (verifier)"
timeout 330 $R/bin/mgpu-learn --course $C course verify module3/ring-allreduce --ranks 1 2>&1 | tail -25
echo "t=$((SECONDS-s)) s"
echo "== 2: forge-seed-from-stack with the exercise not split"
timeout 90 $R/bin/mgpu-learn --course $U check module3/ring-allreduce --variant forge-seed-from-stack --ranks 1 --no-perf 2>&1 | grep -E "^(PASSED|FAILED)|  (run|correctness) "
echo "== 2b: the same with the verifier"
timeout 90 $R/bin/mgpu-learn --course $C check module3/ring-allreduce --variant forge-seed-from-stack --ranks 1 --no-perf 2>&1 | grep -E "^(PASSED|FAILED)|  (run|correctness) "
echo "t=$((SECONDS-s)) s"
echo "== 3: course verify module3 module0 --ranks 1 --no-perf"
timeout $((560-SECONDS+s)) $R/bin/mgpu-learn --course $C course verify module3 module0 --ranks 1 --no-perf 2>&1 | grep -v "^ok " | tail -30
echo "t=$((SECONDS-s)) s"
