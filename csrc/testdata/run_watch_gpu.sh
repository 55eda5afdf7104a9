#!/usr/bin/env bash
# NCCL's watch on the GPU machine: builds csrc/mgpu_ncclwatch.c (cc) and watch_gpu.cu with the
# harness (nvcc, the system's NCCL unless EXTRA_INC/EXTRA_LIB say otherwise), runs WORLD local
# ranks (default 1) with the watch named as the checker names it, and prints every rank's
# counts from its done record. bash csrc/testdata/run_watch_gpu.sh [WORLD]
set -euo pipefail
WORLD=${1:-1}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
B=${OUT:-/tmp}/watch-build
RUN=${OUT:-/tmp}/watch-run
rm -rf "$B" "$RUN"; mkdir -p "$B" "$RUN/rdzv"
cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden "$ROOT/csrc/mgpu_ncclwatch.c" -o "$B/watch.so"
FL="-arch=sm_90 -O2 -I$ROOT/csrc ${EXTRA_INC:-}"
cc -std=c11 -O2 -pthread -I"$ROOT/csrc" -c "$ROOT/csrc/mgpu_core.c" -o "$B/core.o"
cc -std=c11 -O2 -pthread -I"$ROOT/csrc" -c "$ROOT/csrc/mgpu_chan.c" -o "$B/chan.o"
$NVCC $FL -c "$ROOT/csrc/mgpu_cuda.cu" -o "$B/cuda.o"
$NVCC $FL -c "$ROOT/csrc/mgpu_nccl.cu" -o "$B/nccl.o"
$NVCC $FL -c "$ROOT/csrc/testdata/watch_gpu.cu" -o "$B/w.o"
$NVCC -arch=sm_90 "$B/w.o" "$B/core.o" "$B/chan.o" "$B/cuda.o" "$B/nccl.o" ${EXTRA_LIB:-} -lnccl -ldl -lpthread -o "$B/watch_gpu"
export MGPU_RUN_DIR="$RUN" MGPU_RDZV_DIR="$RUN/rdzv" MGPU_WORLD_SIZE=$WORLD MGPU_LOCAL_WORLD_SIZE=$WORLD
export MGPU_EXERCISE=watch NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export MGPU_NCCL_WATCH="$B/watch.so" NCCL_PROFILER_PLUGIN="$B/watch.so" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT
pids=()
for ((r = 0; r < WORLD; r++)); do
  MGPU_RANK=$r MGPU_LOCAL_RANK=$r "$B/watch_gpu" > "$RUN/out-$r.txt" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
for ((r = 0; r < WORLD; r++)); do
  echo "--- rank $r: NCCL on the plugin"; grep -i "profiler" "$RUN/out-$r.txt" | head -5 || true
  echo "--- rank $r: done record"; tail -1 "$RUN/rank-$r.jsonl"; echo
done
echo "watch_gpu exit: $rc"
if [ -n "${WATCH_REPS:-}" ]; then
  # What the plugin costs a call: the same exchanges without the watch, then with it, twice.
  for k in 1 2; do
    echo "--- timing $k, no watch"; env -u MGPU_NCCL_WATCH -u NCCL_PROFILER_PLUGIN MGPU_RUN_DIR="$RUN/t$k-off" MGPU_RDZV_DIR="$RUN/t$k-off/rdzv" MGPU_RANK=0 MGPU_LOCAL_RANK=0 MGPU_WORLD_SIZE=1 MGPU_LOCAL_WORLD_SIZE=1 NCCL_DEBUG=WARN "$B/watch_gpu" | grep "per self"
    echo "--- timing $k, watch";    env MGPU_RUN_DIR="$RUN/t$k-on" MGPU_RDZV_DIR="$RUN/t$k-on/rdzv" MGPU_RANK=0 MGPU_LOCAL_RANK=0 MGPU_WORLD_SIZE=1 MGPU_LOCAL_WORLD_SIZE=1 NCCL_DEBUG=WARN "$B/watch_gpu" | grep "per self"
  done
fi
exit $rc
