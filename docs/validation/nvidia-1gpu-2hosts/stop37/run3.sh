#!/usr/bin/env bash
# Stop 37 on one H200: module6/symm-mem (Triton) with one rank: the solution with timing on
# (the probes must find nothing, PyTorch's op neither), half-slots (float16 slots) and
# skip-written (skips tiles whose out holds a number), which must fail at correctness.
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/stop37/run3.sh
set -u
export NO_COLOR=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out/r3; s=$SECONDS
C=$HOME/c3; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
W=$HOME/ws3; rm -rf $W; $bin --course $C init $W >/dev/null || exit 1
cd $W
for t in "--solution" "--variant skip-written" "--variant half-slots" "--variant relaxed-signal"; do
  f=$out/r3/symm-mem$(echo "$t" | tr ' ' '_').json
  timeout -s INT 200 $bin --course $C check module6/symm-mem $t --ranks 1 --json >$f 2>$f.stderr
  rc=$?
  python3 - "$f" "$t" "$rc" "$((SECONDS - s))" <<'PY'
import json, sys
f, t, rc, el = sys.argv[1:]
try:
    r = json.load(open(f))["reports"][0]
except Exception as e:
    print(f"{t}: rc={rc} no report ({e}) [t={el}s]"); print(open(f + ".stderr").read()[-1500:]); sys.exit()
print(f"{t}: rc={rc} {r.get('verdict')} at {r.get('stage')} | {str(r.get('headline', ''))[:300]} [t={el}s]")
for st in r.get("stages", []):
    if st.get("name") in ("run", "correctness", "performance"):
        print("   ", st.get("name"), st.get("status"), str(st.get("detail", ""))[:300])
for c in r.get("cases", []) or []:
    if not c.get("ok") or c.get("case") == "after-timing":
        print("    case", json.dumps(c)[:1200])
PY
done
cd $out && tar czf stop37-run3.tgz r3 && rm -rf r3
echo "t=$((SECONDS - s)) s"
