#!/usr/bin/env bash
# The course checks CI runs on a machine without GPUs, through mgpu-learn itself:
#   - the built-in course lints clean;
#   - every reference solution and every starter compiles and links (nvcc from .tools/cuda,
#     NCCL and NVSHMEM from its pip wheels), and a starter meant not to compile fails to;
#   - every variant of the cuda and c exercises builds and goes through the policy stage as its
#     manifest says (expect build/policy: fails there with the stated words; else: passes);
#   - the CPU fixture course: solutions pass, starters and every variant fail at their stage;
#   - module2 (CUDA-aware MPI) is refused, with its reason, on a machine without such an MPI;
#   - the Python exercises on CPU (gloo) on 2 ranks (references pass, starters and variants fail
#     as stated), then on 4 ranks what 2 cannot show (references, variants needing 3 or 4).
# Ends with "N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/bin/mgpu-learn
export MGPU_LEARN_CACHE=${MGPU_LEARN_CACHE:-$root/.tools/cache}
[ -x "$root/.tools/venv/bin/python" ] && export MGPU_LEARN_PYTHON=$root/.tools/venv/bin/python
export MGPU_LEARN_TOOLS=$root/.tools
export NO_COLOR=1
pass=0 fail=0
step() {
  local name=$1; shift
  local t0=$SECONDS
  if "$@" >"$tmp/step.log" 2>&1; then
    pass=$((pass + 1)); echo "ok    $name ($((SECONDS - t0)) s)"
  else
    fail=$((fail + 1)); echo "FAIL  $name ($((SECONDS - t0)) s)"; tail -n 60 "$tmp/step.log" | sed 's/^/      /'
  fi
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

step "doctor runs" "$bin" doctor --refresh
step "course lint (built-in)" "$bin" course lint
step "build all --solution" "$bin" build all --solution
starters() {
  "$bin" init "$tmp/ws" >/dev/null && cd "$tmp/ws" &&
  "$bin" build all --json >"$tmp/build.json"
  local rc=$?
  cd "$root" && python3 "$root/scripts/expect-builds.py" "$tmp/build.json" "$root" || return 1
  [ $rc -le 1 ]
}
step "build all (starters compile unless marked)" starters
step "variants build, policy variants fail at policy" python3 "$root/scripts/expect-builds.py" --variants "$root" "$bin"
step "fixture course verify (CPU)" "$bin" --course "$root/testdata/fixture-course" course verify
# module2 hands device pointers to MPI: without a CUDA-aware MPI (CI has Debian's plain Open
# MPI) a check must be refused (exit 3) with the reason, never run.
module2_refused() {
  "$bin" check module2/pingpong --solution >"$tmp/m2.log" 2>&1
  local rc=$?
  cat "$tmp/m2.log"
  [ $rc -eq 3 ] && grep -q "MPIX_Query_cuda_support" "$tmp/m2.log" && grep -q "built_with_cuda_support" "$tmp/m2.log"
}
if ! "$bin" doctor --json 2>/dev/null | grep -q '"cuda_mpi": *{'; then
  step "module2 refused without a CUDA-aware MPI" module2_refused
fi
if [ -n "${MGPU_LEARN_PYTHON:-}" ]; then
  step "module1 on CPU, 2 ranks" "$bin" course verify module1 --ranks 2
  # With 4 ranks, only what 2 could not show (--beyond 2): the solutions and the variants
  # that need 3 or 4 ranks; the 2-rank run proved the starters and the other variants.
  step "module1 on CPU, 4 ranks (beyond 2)" "$bin" course verify module1 --ranks 4 --beyond 2
  step "module7 on CPU, 2 and 4 ranks (beyond 2)" sh -c '"$0" course verify module7 --ranks 2 && "$0" course verify module7 --ranks 4 --beyond 2' "$bin"
fi
# ---- Slurm (issue #18; scripts/slurm-loopback.sh, docs/slurm.md) --------------------------------
# A real single-node Slurm on the loopback: the srun launcher inside allocations and steps, and
# check --slurm from outside one. Needs root and slurm-wlm; stops its daemons even on failure.
if [ "$(id -u)" -eq 0 ] && { command -v slurmctld >/dev/null || [ -x /usr/sbin/slurmctld ]; }; then
  step "Slurm on the loopback (slurm-loopback.sh run-check)" timeout 150 "$root/scripts/slurm-loopback.sh" run-check
else
  echo "skip  Slurm on the loopback (needs root and slurm-wlm)"
fi
# ---- end of the Slurm block ---------------------------------------------------------------------
echo "course-checks: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
