#!/usr/bin/env bash
# Stop 37 on one H200, after the probes moved to shared/timed_probes.cuh: module6 one-shot
# (solution, skip-unpoisoned) and fused-norm (solution) with one rank and timing on; module6
# symm-mem's solution and skip-written again (checked counts); module1 first-allreduce and
# ring-allreduce (fine exact inputs) with their half-wire variant, on NCCL with one rank.
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/stop37/run4.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out/r4; s=$SECONDS
C=$HOME/c4; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
W=$HOME/ws4; rm -rf $W; $bin --course $C init $W >/dev/null || exit 1
cd $W
plan="module6/one-shot --solution
module6/one-shot --variant skip-unpoisoned
module6/fused-norm --solution
module6/symm-mem --solution
module6/symm-mem --variant skip-written
module1/first-allreduce --solution
module1/first-allreduce --variant half-wire
module1/ring-allreduce --solution"
echo "$plan" | head -3 | xargs -P 4 -L 1 $bin --course $C build >/dev/null 2>&1
echo "built in $((SECONDS - s)) s"
while read -r t; do
  [ $((SECONDS - s)) -lt 480 ] || { echo "skipped $t (time)"; continue; }
  f=$out/r4/$(echo "$t" | tr ' /' '__' | tr -s _).json
  timeout -s INT 150 $bin --course $C check $t --ranks 1 --json >$f 2>$f.stderr
  rc=$?
  python3 - "$f" "$t" "$rc" "$((SECONDS - s))" <<'PY'
import json, sys
f, t, rc, el = sys.argv[1:]
try:
    r = json.load(open(f))["reports"][0]
except Exception as e:
    print(f"{t}: rc={rc} no report ({e}) [t={el}s]"); print(open(f + ".stderr").read()[-800:]); sys.exit()
print(f"{t:45s} rc={rc} {r.get('verdict')} at {r.get('stage')} | {str(r.get('headline', ''))[:200]} [t={el}s]")
for c in r.get("cases", []) or []:
    if c.get("case") == "after-timing" or not c.get("ok"):
        print("    case", c.get("case"), c.get("ok"), "checked", c.get("checked"), "bad", c.get("bad"), str(c.get("msg", ""))[:400])
        break
PY
done <<<"$plan"
cd $out && tar czf stop37-run4.tgz r4 && rm -rf r4
echo "t=$((SECONDS - s)) s"
