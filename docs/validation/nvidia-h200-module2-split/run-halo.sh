#!/usr/bin/env bash
# module4/halo-jacobi split on one GPU (one PE: NVSHMEM and NCCL take one PE per GPU), and the
# module2 Jacobi solutions again with the verifiers' integer reference. From the repository
# root on the GPU machine, bin/mgpu-learn built: OUT=$OUT bash THIS (ONLY_MODULE2=1: the second part)
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
cases() { # the verifiers' case records of the newest run of $1 (exercise id with _ for /)
  for f in $(ls -td $MGPU_LEARN_CACHE/work/runs/*$1-solution*/run-* | head -1)/verifier-*.jsonl; do
    python3 - "$f" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
print(sys.argv[1].split("/")[-1], [(r.get("case"), "ok" if r.get("ok") else "FAIL: " + (r.get("msg") or "")[:200]) for r in recs if r.get("t") == "case"])
PY
  done
}
if [ -z "${ONLY_MODULE2:-}" ]; then
echo "== course verify module4/halo-jacobi --ranks 1 (timing on)"
timeout 300 $bin --course $C course verify module4/halo-jacobi --ranks 1 \
  --report-dir $out --machine nvidia-h200-halo-jacobi-split 2>&1 | tail -12
echo "rc=$? t=$((SECONDS-s)) s"
cases module4_halo-jacobi
echo "== unsplit: check module4/halo-jacobi --solution --ranks 1"
timeout 120 $bin --course $U check module4/halo-jacobi --solution --ranks 1 2>&1 | grep -E "^(PASSED|FAILED|ERROR)" | head -2
fi
for e in jacobi-sendrecv jacobi-overlap; do
  for n in 1 2; do
    p=""; [ $n = 2 ] && p=--no-perf
    echo "== check module2/$e --solution --ranks $n $p (integer reference)"
    /usr/bin/time -f "wall %e s" timeout 150 $bin --course $C check module2/$e --solution --ranks $n $p 2>&1 | grep -E "^(PASSED|FAILED|ERROR)|^wall" | head -3
    cases module2_$e
  done
done
echo "t=$((SECONDS-s)) s"
