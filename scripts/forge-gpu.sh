#!/usr/bin/env bash
# scripts/forge-gpu.sh (repository root, on a machine with one GPU or more, bin/mgpu-learn built):
# the forge variants of module0/devices and module3/ring-allreduce, forge-seed-from-stack split
# against unsplit, and moe-dispatch's byte budget on NCCL (the solution's after-timing case).
# Course copies with 2-GPU exercises set to 1 GPU. Reports into $OUT (or /tmp/out).
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=${MGPU_LEARN_CACHE:-$HOME/.cache/mgpu-forge}  # not under /tmp: doctor says why
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
U=$HOME/c2; rm -rf $U; cp -r $C $U; sed -i '/^verifier: true$/d' $U/exercises/*/*/exercise.yaml
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
echo "== 1: course verify module0/devices module3/ring-allreduce --ranks 1 (timing on)"
timeout 330 $bin --course $C course verify module0/devices module3/ring-allreduce --ranks 1 \
  --report-dir $out --machine ${MACHINE:-nvidia-h200-forge} 2>&1
echo "rc=$? t=$((SECONDS-s)) s"
echo "== 2: forge-seed-from-stack, not split, then split (--no-perf)"
for c in $U $C; do
  timeout 90 $bin --course $c check module3/ring-allreduce --variant forge-seed-from-stack --ranks 1 --no-perf 2>&1 | grep -E "^(PASSED|FAILED)|unwritten" | head -3
done
echo "t=$((SECONDS-s)) s"
echo "== 3: module1/moe-dispatch solution with timing, one rank: the after-timing case's byte budget on NCCL"
timeout 150 $bin --course $C check module1/moe-dispatch --solution --json > $out/moe.json 2>$out/moe.err
echo "rc=$?"
python3 - $out/moe.json <<'PY'
import glob, json, os, sys
r = json.load(open(sys.argv[1]))["reports"][0]
print(r["verdict"], r["stage"], r["headline"][:200])
for f in sorted(glob.glob(r["run"]["dir"] + "/verifier-*.jsonl")):
    for line in open(f):
        x = json.loads(line)
        if x.get("t") == "case":
            print(os.path.basename(f), x.get("case"), "ok" if x.get("ok") else "FAIL", (x.get("msg") or "")[:300])
PY
echo "t=$((SECONDS-s)) s"
echo "== 4: moe-dispatch course verify --ranks 1 --no-perf"
timeout 120 $bin --course $C course verify module1/moe-dispatch --ranks 1 --no-perf 2>&1 | tail -12
echo "t=$((SECONDS-s)) s"
