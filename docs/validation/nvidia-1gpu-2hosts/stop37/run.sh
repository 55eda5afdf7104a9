#!/usr/bin/env bash
# Stop 37 on one H200: module6's fine exact values and the probes of its timed calls.
#   1. one rank, timing on (NCCL of one rank as the baseline): the solutions of one-shot, two-shot
#      and fused-norm must pass correctness with the case after-timing (the probes among it), and
#      one-shot's skip-unpoisoned must fail it ("a timed call left out"). On one GPU the ratios
#      mean nothing (the performance stage may fail: not a verdict here).
#   2. two ranks on the one GPU (hostid shim, CUDA MPS, --no-perf): every target of one-shot,
#      two-shot and fused-norm through scripts/module-smoke.sh, two-shot's half-gather included.
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/stop37/run.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
W=$HOME/ws1; rm -rf $W; $bin --course $C init $W >/dev/null || exit 1
cd $W
targets=("module6/one-shot --solution" "module6/one-shot --variant skip-unpoisoned" "module6/two-shot --solution" "module6/fused-norm --solution")
printf '%s\n' "${targets[@]}" | xargs -P 8 -L 1 $bin --course $C build >/dev/null 2>&1
echo "built in $((SECONDS - s)) s"
for t in "${targets[@]}"; do
  f=$out/perf1-$(echo "$t" | tr ' /' '__' | tr -s _).json
  timeout -s INT 150 $bin --course $C check $t --ranks 1 --json >$f 2>$f.stderr
  echo "== $t rc=$? t=$((SECONDS - s)) s"
  python3 - "$f" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["reports"][0]
except Exception as e:
    print("  no report:", e); sys.exit()
print("  verdict:", r.get("verdict"), "stage:", r.get("stage"), "|", str(r.get("headline", ""))[:300])
for st in r.get("stages", []):
    if st.get("name") in ("correctness", "performance"):
        print("  ", st.get("name"), st.get("status"), str(st.get("detail", ""))[:600])
for c in r.get("cases", []) or []:
    if "after" in str(c.get("case", "")):
        print("   case", json.dumps(c)[:900])
PY
done
cd $R
for e in module6/two-shot module6/one-shot module6/fused-norm; do
  [ $((SECONDS - s)) -lt 420 ] || { echo "skipped $e (time)"; continue; }
  echo "== rig $e t=$((SECONDS - s)) s"
  timeout -s INT $((540 - (SECONDS - s))) scripts/module-smoke.sh --module module6-collectives --one-gpu --ranks 2 --nccl-rig --mps --no-perf --jobs 16 --only $e --out $out/rig-${e#module6/} 2>&1 | tail -22
done
rm -rf $out/rig-*/course $out/rig-*/workspace $out/rig-*/mps-* 2>/dev/null
cd $out && tar czf stop37-run.tgz perf1-* rig-* 2>/dev/null && rm -rf perf1-* rig-*
echo "t=$((SECONDS - s)) s"
