#!/usr/bin/env bash
# The course on a lent 2-GPU machine, one group of modules per device call (a call may run 600 s,
# a session has 30 minutes of device time, and the whole course takes longer than one call):
#
#   OUT=$OUT scripts/x2-acceptance.sh GROUP [MACHINE]
#
#   GROUP  a: module6 module7      b: module0 module3      c: module1
#          d: module4              e: module2 (CUDA-aware Open MPI from .gpu/, see below)
#          f: module5
#   MACHINE  the report's name (default nvidia-h200-x2); reports go to $OUT/<MACHINE>-<GROUP>.md
#
# Order when a 2-GPU machine is lent: a, b, c in the first session, d, e and f in the next (past
# boxes: modules 0+3 570 s, module1 480 s; module4 alone took 576 s with --no-perf on the
# one-GPU rig of stop 35, MPS restarts included, so modules 4 and 5 have a call each since
# stop 36 added their red-team variants). Every group first builds its targets in parallel
# (scripts/module-smoke.sh --build-only), then runs `course verify` with timing on, all inside
# 560 s (a report is written after every exercise, so a run cut short keeps its findings).
# Group e needs ../shared/gpu/ompi-cuda-4.1.4.tar.xz copied into .gpu/ (git-ignored; carry it):
# it is unpacked into /tmp/ompi-cuda, where doctor looks for a CUDA-aware MPI.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
group=${1:?usage: x2-acceptance.sh GROUP [MACHINE]} machine=${2:-nvidia-h200-x2}
case $group in
  a) targets=(module6 module7) ;;
  b) targets=(module0 module3) ;;
  c) targets=(module1) ;;
  d) targets=(module4) ;;
  e) targets=(module2) ;;
  f) targets=(module5) ;;
  *) echo "unknown group $group (a..f)" >&2; exit 2 ;;
esac
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export MGPU_LEARN_CACHE=${MGPU_LEARN_CACHE:-$HOME/.cache/mgpu-x2} # not under /tmp: doctor says why
if [ "$group" = e ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  if [ ! -x /tmp/ompi-cuda/bin/mpirun ]; then
    [ -f "$root/.gpu/ompi-cuda-4.1.4.tar.xz" ] || { echo "group e needs .gpu/ompi-cuda-4.1.4.tar.xz (../shared/gpu)" >&2; exit 3; }
    tar xf "$root/.gpu/ompi-cuda-4.1.4.tar.xz" -C /tmp
  fi
fi
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
bin=${MGPU_LEARN_BIN:-$root/bin/mgpu-learn}
[ -x "$bin" ] || { echo "no $bin: build it with 'make build' here and carry bin/" >&2; exit 2; }
start=$SECONDS
"$bin" doctor --refresh > "$out/$machine-$group-doctor.txt" 2>&1
for t in "${targets[@]}"; do
  for d in "$root"/exercises/"$t"-*/; do
    pre=$(mktemp -d)
    MGPU_LEARN_BIN=$bin "$root/scripts/module-smoke.sh" --module "$(basename "$d")" --jobs 8 --build-only --out "$pre" >/dev/null 2>&1 || true
    rm -rf "$pre"
  done
done
echo "built in $((SECONDS - start)) s"
# mgpu-learn ends its ranks and writes what it has when the box's SIGTERM comes.
timeout -k 20 $((560 - (SECONDS - start))) "$bin" course verify "${targets[@]}" --report-dir "$out" --machine "$machine-$group"
rc=$?
echo "x2-acceptance: group $group (${targets[*]}) exit $rc in $((SECONDS - start)) s; report $out/$machine-$group.md"
exit $rc
