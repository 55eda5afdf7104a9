#!/usr/bin/env bash
# Stop 37 on one H200: module2/hybrid-control after "a step that hands MPI nothing fails":
# two ranks on the one GPU (hostid shim), CUDA-aware Open MPI 4.1.4, --no-perf, every target.
# bin/mgpu-learn and .gpu carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/stop37/run5.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
tar xf .gpu/ompi-cuda-4.1.4.tar.xz -C /tmp && export PATH=/tmp/ompi-cuda/bin:$PATH LD_LIBRARY_PATH=/tmp/ompi-cuda/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=${OUT:-/tmp/out}
scripts/module-smoke.sh --module module2-mpi --one-gpu --ranks 2 --nccl-rig --no-perf --jobs 16 --only module2/hybrid-control --out $out/r5 2>&1 | tail -16
rm -rf $out/r5/course $out/r5/workspace $out/r5/*.so
cd $out && tar czf stop37-run5.tgz r5 && rm -rf r5
