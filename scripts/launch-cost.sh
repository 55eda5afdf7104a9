#!/usr/bin/env bash
# Times the same Python check with its ranks spawned directly (the default) and through the
# torchrun program (--torchrun), alternating, after one untimed warm-up of each.
#   scripts/launch-cost.sh [-n REPS] [EXERCISE] [check flags...]
# Default: 3 repetitions of module1/first-allreduce --solution. Prints one line per run with the
# whole command's wall time and the run stage's, then the medians.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=3
if [ "${1:-}" = -n ]; then n=$2; shift 2; fi
[ $# -ge 1 ] || set -- module1/first-allreduce --solution
bin=${MGPU_LEARN_BIN:-$root/bin/mgpu-learn}
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() { # one MODE I: runs the check, prints "MODE wall_s run_s verdict"
  local mode=$1 flag=() t0 t1
  shift
  [ "$mode" = torchrun ] && flag=(--torchrun)
  t0=$(date +%s.%N)
  "$bin" check "$@" "${flag[@]}" --json > "$tmp/r.json" 2>/dev/null || true
  t1=$(date +%s.%N)
  python3 - "$tmp/r.json" "$mode" "$t0" "$t1" <<'PY'
import json, sys
path, mode, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
try:
    rep = json.load(open(path))["reports"][0]
    run = next((s["duration_s"] for s in rep["stages"] if s["name"] == "run"), float("nan"))
    v = rep["verdict"]
except Exception:
    run, v = float("nan"), "no-report"
print(f"{mode} {t1 - t0:.2f} {run:.2f} {v}")
PY
}
one direct "$@" > /dev/null
one torchrun "$@" > /dev/null
for i in $(seq 1 "$n"); do
  one direct "$@"
  one torchrun "$@"
done | tee "$tmp/all.txt"
python3 - "$tmp/all.txt" "$*" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"\n`mgpu-learn check {sys.argv[2]}`: median whole command / run stage")
for mode in ("direct", "torchrun"):
    w = [float(r[1]) for r in rows if r[0] == mode]
    s = [float(r[2]) for r in rows if r[0] == mode]
    v = sorted({r[3] for r in rows if r[0] == mode})
    print(f"{mode:9s} {statistics.median(w):6.2f} s / {statistics.median(s):6.2f} s  ({len(w)} runs, verdicts: {', '.join(v)})")
PY
