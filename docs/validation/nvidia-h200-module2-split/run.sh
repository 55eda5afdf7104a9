#!/usr/bin/env bash
# module2's split exercises on one GPU, through CUDA-aware Open MPI 4.1.4 (../shared/gpu, carried
# in .gpu/ and unpacked into /tmp/ompi-cuda, where doctor looks). From the repository root on
# the GPU machine, bin/mgpu-learn built: OUT=$OUT bash THIS
#   1. course verify of the three exercises with one rank, timing on (NCCL takes one rank per
#      GPU, so the NCCL baselines run only so);
#   2. jacobi-sendrecv with 2 and 3 ranks on the one GPU, timing off (no NCCL then: the MPI
#      exchange and the verifiers' halos between ranks);
#   3. the same solutions with the verifier off (the one-process path of the split drivers).
# Course copies with 2-GPU exercises set to 1 GPU.
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-m2split  # not under /tmp: doctor says why
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
[ -x /tmp/ompi-cuda/bin/mpirun ] || tar xf .gpu/ompi-cuda-4.1.4.tar.xz -C /tmp
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
U=$HOME/c2; rm -rf $U; cp -r $C $U; sed -i '/^verifier: true$/d' $U/exercises/*/*/exercise.yaml
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$bin --version
EX=${EX:-module2/jacobi-sendrecv module2/mpi-vs-nccl module2/hybrid-control}
echo "== 1: course verify $EX --ranks 1 (timing on)"
timeout 420 $bin --course $C course verify $EX --ranks 1 --report-dir $out --machine nvidia-h200-module2-split 2>&1 | tail -40
echo "rc=$? t=$((SECONDS-s)) s"
for f in $MGPU_LEARN_CACHE/work/runs/*solution*/run-*/verifier-0.jsonl; do
  python3 - "$f" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
bad = [r.get("case") for r in recs if r.get("t") == "case" and not r.get("ok")]
print(sys.argv[1].split("/runs/")[1][:70], "cases:", [r.get("case") for r in recs if r.get("t") == "case"], "failing:", bad)
PY
done
for n in 2 3; do
  echo "== 2: course verify module2/jacobi-sendrecv --ranks $n --no-perf (one GPU)"
  timeout 150 $bin --course $C course verify module2/jacobi-sendrecv --ranks $n --no-perf 2>&1 | tail -12
  echo "rc=$? t=$((SECONDS-s)) s"
done
echo "== 3: solutions not split (one process checks), --ranks 1, timing on"
for e in $EX; do
  timeout 100 $bin --course $U check $e --solution --ranks 1 2>&1 | grep -E "^(PASSED|FAILED|ERROR)|correctness|performance" | head -4
done
echo "t=$((SECONDS-s)) s"
