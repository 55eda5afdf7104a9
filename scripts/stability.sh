#!/usr/bin/env bash
# Runs the same check N times and reports each verdict and the headline ratio's spread.
#   scripts/stability.sh [-n N] [--out DIR] EXERCISE [check flags...]
# e.g. scripts/stability.sh -n 5 module3/ring-allreduce --solution
# Every run goes through `mgpu-learn check --json`; the JSON of run i is kept as DIR/run-i.json
# (default: a temporary directory). Exits 1 when the verdicts differ between runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=5 out=
while [ $# -gt 0 ]; do
  case $1 in
    -n) n=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,6p' "$0" >&2; exit 2; }
bin=${MGPU_LEARN_BIN:-$root/bin/mgpu-learn}
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
for i in $(seq 1 "$n"); do
  "$bin" check "$@" --json > "$out/run-$i.json" || true
done
python3 - "$out" "$n" "$*" <<'PY'
import json, statistics, sys
out, n, what = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows, verdicts, ratios = [], set(), []
for i in range(1, n + 1):
    try:
        rep = json.load(open(f"{out}/run-{i}.json"))["reports"][0]
    except Exception as e:  # a run that printed no JSON is a runner failure, and a difference
        rows.append(f"| {i} | no report ({e}) | | | |")
        verdicts.add("no report")
        continue
    v = f"{rep['verdict']} ({rep['stage']})"
    verdicts.add(v)
    p = rep.get("perf") or {}
    r = p.get("ratio")
    if isinstance(r, (int, float)):
        ratios.append(r)
    ci = f"[{p.get('ci_low', ''):.3f}, {p.get('ci_high', ''):.3f}]" if isinstance(p.get("ci_low"), float) and isinstance(p.get("ci_high"), float) else ""
    rr = f"{r:.3f}" if isinstance(r, (int, float)) else ""
    rows.append(f"| {i} | {v} | {rr} | {ci} | {rep['duration_s']:.1f} s |")
print(f"`mgpu-learn check {what}`, {n} runs\n")
print("| run | verdict | ratio | 95 % CI | duration |\n| --- | --- | --- | --- | --- |")
print("\n".join(rows))
if ratios:
    lo, hi, med = min(ratios), max(ratios), statistics.median(ratios)
    print(f"\nratio: median {med:.3f}, min {lo:.3f}, max {hi:.3f}, spread {(hi - lo) / med * 100:.1f} % of the median")
print(f"verdicts: {'the same every run' if len(verdicts) == 1 else 'DIFFER: ' + ', '.join(sorted(verdicts))}")
sys.exit(0 if len(verdicts) == 1 else 1)
PY
