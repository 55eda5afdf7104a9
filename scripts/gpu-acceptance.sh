#!/usr/bin/env bash
# GPU acceptance suite: proves the course on this machine's GPUs in one command.
#   scripts/gpu-acceptance.sh [--machine NAME] [--out DIR] [--jobs N] [TARGET...]
# Runs `mgpu-learn doctor`, then `mgpu-learn course verify` over TARGET (default: all): every
# runnable exercise's solution must pass, its pristine starter must fail at its stage, every GPU
# adversarial variant must fail as its manifest says; exercises this machine can't run are
# listed as skipped with doctor's reason. Writes OUT/NAME.md and OUT/NAME.json
# (default docs/validation/) and fails if anything is left running or holds GPU memory.
# Uses bin/mgpu-learn (or $MGPU_LEARN_BIN); builds it with Go only when there is none.
# --jobs N first builds every solution, starter and variant of the modules named (or all), N at a
# time (scripts/module-smoke.sh --build-only): course verify builds one target after another,
# which on a fresh machine costs more than the checks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
machine=$(hostname) out=$root/docs/validation targets=() jobs=0
while [ $# -gt 0 ]; do
  case $1 in
    --machine) machine=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) targets+=("$1"); shift ;;
  esac
done
bin=${MGPU_LEARN_BIN:-$root/bin/mgpu-learn}
if [ ! -x "$bin" ]; then
  command -v go >/dev/null || { echo "no $bin and no Go to build it: build it elsewhere with 'make build' and copy it here" >&2; exit 4; }
  make -C "$root" build
fi
# NVLink multicast stays off in everything this suite starts.
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NO_COLOR=1
mkdir -p "$out"
start=$SECONDS
"$bin" doctor --refresh | tee "$out/$machine-doctor.txt"
if [ "$jobs" -gt 0 ]; then
  # The module folders behind the targets: moduleN or moduleN/exercise -> exercises/moduleN-*.
  mods=()
  for t in "${targets[@]:-all}"; do
    if [ "$t" = all ]; then
      for d in "$root"/exercises/module*/; do mods+=("$(basename "$d")"); done
    else
      for d in "$root"/exercises/"${t%%/*}"-*/; do [ -d "$d" ] && mods+=("$(basename "$d")"); done
    fi
  done
  for m in $(printf '%s\n' "${mods[@]}" | sort -u); do
    pre=$(mktemp -d)
    MGPU_LEARN_BIN=$bin "$root/scripts/module-smoke.sh" --module "$m" --jobs "$jobs" --build-only --out "$pre" || true
    rm -rf "$pre"
  done
fi
rc=0
"$bin" course verify "${targets[@]:-all}" --report-dir "$out" --machine "$machine" || rc=$?
echo "gpu-acceptance: $machine finished in $((SECONDS - start)) s (exit $rc); report in $out/$machine.md"
exit $rc
