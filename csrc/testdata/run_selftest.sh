#!/usr/bin/env bash
# Builds gpu_selftest against the harness and runs it as WORLD local ranks (default 1).
# On the GPU machine: bash csrc/testdata/run_selftest.sh [WORLD]
set -euo pipefail
WORLD=${1:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
B=${OUT:-/tmp}/selftest-build
RUN=${OUT:-/tmp}/selftest-run
rm -rf "$B" "$RUN"; mkdir -p "$B" "$RUN/rdzv"
FL="-arch=sm_90 -O2 -I$ROOT/csrc ${EXTRA_INC:-}"
cc -std=c11 -O2 -pthread -I"$ROOT/csrc" -c "$ROOT/csrc/mgpu_core.c" -o "$B/core.o"
$NVCC $FL -c "$ROOT/csrc/mgpu_cuda.cu" -o "$B/cuda.o"
$NVCC $FL -c "$ROOT/csrc/mgpu_nccl.cu" -o "$B/nccl.o"
$NVCC $FL -c "$ROOT/csrc/testdata/gpu_selftest.cu" -o "$B/st.o"
$NVCC -arch=sm_90 "$B/st.o" "$B/core.o" "$B/cuda.o" "$B/nccl.o" ${EXTRA_LIB:-} -lnccl -o "$B/selftest"
export MGPU_RUN_DIR="$RUN" MGPU_RDZV_DIR="$RUN/rdzv" MGPU_WORLD_SIZE=$WORLD MGPU_LOCAL_WORLD_SIZE=$WORLD
export MGPU_SEED=${MGPU_SEED:-12345} MGPU_PERF=1 MGPU_PERF_BUDGET_MS=${MGPU_PERF_BUDGET_MS:-20000}
export MGPU_EXERCISE=selftest MGPU_SYNC_CHECK=${MGPU_SYNC_CHECK:-0} NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
pids=()
for ((r = 0; r < WORLD; r++)); do
  MGPU_RANK=$r MGPU_LOCAL_RANK=$r "$B/selftest" > "$RUN/out-$r.txt" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for ((r = 0; r < WORLD; r++)); do echo "--- rank $r output"; cat "$RUN/out-$r.txt"; done
echo "selftest exit: $rc"
python3 "$ROOT/csrc/testdata/selftest_check.py" "$RUN" "$WORLD" || rc=$?
exit $rc
