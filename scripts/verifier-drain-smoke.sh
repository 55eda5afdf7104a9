#!/usr/bin/env bash
# scripts/verifier-drain-smoke.sh: run from the repository root on a GPU machine, bin/mgpu-learn built.
# Python verifiers on the rank's GPU, with the drain before timing: module1 split exercises,
# course verify with one rank (timing on), and check wall time not split vs split.
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1
export MGPU_LEARN_CACHE=$PWD/.gpucache
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; s=$SECONDS
C=/tmp/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
U=/tmp/c2; rm -rf $U; cp -r $C $U; sed -i '/^verifier: true$/d' $U/exercises/*/*/exercise.yaml
mkdir -p /tmp/wa && cd /tmp/wa && $R/bin/mgpu-learn --course $C init ws >/dev/null && cd ws
for ex in module1/first-allreduce module1/ring-allreduce; do
  timeout 200 $R/bin/mgpu-learn --course $C course verify $ex --ranks 1 2>&1 | grep -v "^skip"
done
echo "t=$((SECONDS-s)) s"
for ex in module1/ring-allreduce module1/first-allreduce; do
  for c in $U $C; do
    $R/bin/mgpu-learn --course $c check $ex --solution --ranks 1 --no-perf >/dev/null 2>&1
    for i in 1 2 3; do
      t0=$(date +%s.%N); $R/bin/mgpu-learn --course $c check $ex --solution --ranks 1 --no-perf >/dev/null 2>&1; rc=$?
      echo "$ex $([ $c = $C ] && echo split || echo unsplit) run $i rc=$rc $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 2))" $(date +%s.%N) $t0) s"
    done
  done
done
echo "module1/ring-allreduce split, timing on (the drain before time_pair):"
$R/bin/mgpu-learn --course $C check module1/ring-allreduce --solution --ranks 1 --json > /tmp/j.json 2>&1
python3 - <<'PY'
import json
r = json.load(open("/tmp/j.json"))["reports"][0]
print(r["verdict"], r["stage"], r["headline"][:160])
print("notes:", [n for n in r.get("notes") or []][:5])
import glob, os
d = r["run"]["dir"]
for f in sorted(glob.glob(d + "/verifier-*.jsonl")):
    recs = [json.loads(l) for l in open(f)]
    print(os.path.basename(f), "drained records:", sum(1 for x in recs if x["t"] == "drained"), "cases:", sum(1 for x in recs if x["t"] == "case"))
PY
echo "t=$((SECONDS-s)) s"
