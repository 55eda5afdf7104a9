#!/usr/bin/env bash
# scripts/verifier-smoke.sh (run from the repository root on a GPU machine, bin/mgpu-learn built):
# the verifier process (docs/protocol.md §4) on one GPU, one rank.
# 1) The split exercises (verifier: true): solution, starter and every variant, timing on.
# 2) module3/ring-allreduce's forge-seed-from-stack with the exercise not split (verifier
#    removed from a copy): it passes correctness there, which shows the forgery is real; split,
#    it fails.
# 3) The time a check takes, split and not split (module1 first-allreduce and ring-allreduce).
# 4) The rest of module3 with the changed harness, no timing.
# 5) module1/ring-allreduce split with timing on: its verifier answers the rank's drain (the
#    rank waits for it before timing), and the report carries no note that it did not.
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1
export MGPU_LEARN_CACHE=$PWD/.gpucache
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; s=$SECONDS
C=/tmp/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
U=/tmp/c2; rm -rf $U; cp -r $C $U; sed -i '/^verifier: true$/d' $U/exercises/*/*/exercise.yaml
split=$(grep -l '^verifier: true$' $C/exercises/*/*/exercise.yaml | sed -E 's|.*/exercises/module([0-9]+)-[^/]*/([^/]*)/exercise.yaml|module\1/\2|' | sort)
mkdir -p /tmp/wa && cd /tmp/wa && $R/bin/mgpu-learn --course $C init ws >/dev/null && cd ws
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "split exercises:" $split
echo "== 1: course verify (each split exercise) --ranks 1"
for ex in $split; do
  timeout 200 $R/bin/mgpu-learn --course $C course verify $ex --ranks 1 2>&1 | grep -v "^skip"
done
echo "t=$((SECONDS-s)) s"
echo "== 2: forge-seed-from-stack, not split, then split"
for c in $U $C; do
  timeout 90 $R/bin/mgpu-learn --course $c check module3/ring-allreduce --variant forge-seed-from-stack --ranks 1 --no-perf 2>&1 | grep -E "^(PASSED|FAILED)"
done
echo "== 3: wall time of a check, not split then split (solution, --no-perf, warm cache)"
for ex in module1/first-allreduce module1/ring-allreduce; do
  for c in $U $C; do
    $R/bin/mgpu-learn --course $c check $ex --solution --ranks 1 --no-perf >/dev/null 2>&1
    for i in 1 2 3; do
      t0=$(date +%s.%N); $R/bin/mgpu-learn --course $c check $ex --solution --ranks 1 --no-perf >/dev/null 2>&1; rc=$?
      echo "$ex $([ $c = $C ] && echo split || echo unsplit) run $i rc=$rc $(python3 -c "import sys; print(round(float(sys.argv[1]) - float(sys.argv[2]), 2))" $(date +%s.%N) $t0) s"
    done
  done
done
echo "t=$((SECONDS-s)) s"
echo "== 4: the rest of module3, --ranks 1 --no-perf (not ok lines)"
timeout $((580-SECONDS+s)) $R/bin/mgpu-learn --course $C course verify module3/grouped-collectives module3/training-loop module3/single-process module3/fault-tolerance --ranks 1 --no-perf 2>&1 | grep -v "^ok "
echo "t=$((SECONDS-s)) s"
echo "== 5: module1/ring-allreduce split, timing on (the drain before time_pair)"
$R/bin/mgpu-learn --course $C check module1/ring-allreduce --solution --ranks 1 --json > /tmp/j.json 2>&1
python3 - <<'PY'
import glob, json, os
r = json.load(open("/tmp/j.json"))["reports"][0]
print(r["verdict"], r["stage"], r["headline"][:160])
print("notes:", (r.get("notes") or [])[:5])
for f in sorted(glob.glob(r["run"]["dir"] + "/verifier-*.jsonl")):
    recs = [json.loads(line) for line in open(f)]
    print(os.path.basename(f), "drained records:", sum(x["t"] == "drained" for x in recs),
          "cases:", sum(x["t"] == "case" for x in recs))
PY
echo "t=$((SECONDS-s)) s"
