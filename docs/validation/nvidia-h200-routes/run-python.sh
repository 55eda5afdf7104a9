#!/usr/bin/env bash
# Every Python exercise after the dispatcher-level policing of forbidden collectives (h.forbid's
# dispatch mode), timing on, one rank (a course copy set to 1 GPU for module6/symm-mem and
# module7/fused). Repository root on the GPU machine, bin/mgpu-learn built: OUT=$OUT bash THIS
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-routes
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
$bin --version
timeout 570 $bin --course $C course verify module1 module7 module6/symm-mem --ranks 1 \
  --report-dir $out --machine nvidia-h200-python-policing 2>&1 | grep -v "^skip"
echo "rc=$? t=$((SECONDS-s)) s"
