#!/usr/bin/env bash
# Installs, into .tools/ (git-ignored), what a machine without a GPU needs to build every
# exercise: the CUDA 13.0 compiler and headers, NCCL 2.28 and NVSHMEM 3.4.5 from PyPI wheels.
# Idempotent: a finished install is skipped; downloaded wheels are kept in .tools/wheels.
# Prints the prefix to use as CUDA_HOME (its bin/nvcc) and the NCCL/NVSHMEM homes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/.tools
stamp=$tools/cuda/.installed-v1
wheels=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
  nvidia-nccl-cu13==2.28.9
  nvidia-nvshmem-cu13==3.4.5
)
if [ -f "$stamp" ]; then
  echo "cuda tools: already installed in $tools/cuda" >&2
else
  mkdir -p "$tools/wheels"
  py=$(command -v python3)
  "$py" -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_18_x86_64 --python-version 3.12 --implementation py \
    -d "$tools/wheels" "${wheels[@]}"
  rm -rf "$tools/cuda.tmp" && mkdir -p "$tools/cuda.tmp"
  for w in "$tools"/wheels/*.whl; do
    "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$tools/cuda.tmp"
  done
  chmod -R u+x "$tools/cuda.tmp/nvidia/cu13/bin" "$tools/cuda.tmp/nvidia/cu13/nvvm/bin"
  # Wheels ship versioned libraries only; add the unversioned names a linker looks for.
  ln -sf libcudart.so.13 "$tools/cuda.tmp/nvidia/cu13/lib/libcudart.so"
  ln -sf libnccl.so.2 "$tools/cuda.tmp/nvidia/nccl/lib/libnccl.so"
  rm -rf "$tools/cuda" && mv "$tools/cuda.tmp" "$tools/cuda"
  touch "$stamp"
  echo "cuda tools: installed in $tools/cuda" >&2
fi
echo "CUDA_HOME=$tools/cuda/nvidia/cu13"
echo "NCCL_HOME=$tools/cuda/nvidia/nccl"
echo "NVSHMEM_HOME=$tools/cuda/nvidia/nvshmem"
