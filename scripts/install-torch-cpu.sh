#!/usr/bin/env bash
# Installs torch 2.11.0 from PyPI into .tools/venv (git-ignored) so that a machine without a GPU
# (a developer's, CI) can run every Python exercise on CPU with the gloo backend.
#
# PyPI's Linux torch wheel is the CUDA 13 build: it imports only when the CUDA libraries it links
# (cuBLAS, cuDNN, cuFFT, NCCL, NVSHMEM, ...) can be loaded, even if no GPU is ever used. We install
# exactly those nvidia-* wheels with --no-deps and skip what a CPU run never loads: triton,
# cuda-bindings, the cuda-toolkit meta-package and nvtx (optional for torch).
#
# Idempotent: a finished venv (stamp file + a working `import torch`) is left alone. Wheels that
# scripts/install-cuda-tools.sh already fetched into .tools/wheels are reused; pip's own cache
# serves the rest on a reused machine. Prints the venv's python on stdout (progress on stderr).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=$root/.tools/venv
stamp=$venv/.mgpu-torch-2.11.0-v2
py=${PYTHON:-python3}

pkgs=(
  torch==2.11.0
  # CUDA libraries torch/__init__.py preloads (all required for `import torch` to succeed).
  nvidia-cuda-runtime==13.0.96
  nvidia-cublas==13.1.0.3
  nvidia-cudnn-cu13==9.19.0.56
  nvidia-cuda-nvrtc==13.0.88
  nvidia-cuda-cupti==13.0.85
  nvidia-cufft==12.0.0.61
  nvidia-curand==10.4.0.35
  nvidia-nvjitlink==13.0.88
  nvidia-cusparse==12.6.3.3
  nvidia-cusparselt-cu13==0.8.0
  nvidia-cusolver==12.0.4.66
  nvidia-nccl-cu13==2.28.9
  nvidia-nvshmem-cu13==3.4.5
  nvidia-cufile==1.15.1.6
  # torch's pure-Python dependencies.
  filelock==3.20.0
  typing-extensions==4.15.0
  sympy==1.14.0
  mpmath==1.3.0
  networkx==3.5
  jinja2==3.1.6
  MarkupSafe==3.0.3
  fsspec==2025.10.0
  # Not required, but without it torch warns "Failed to initialize NumPy" in every rank's output.
  numpy==2.3.5
)

works() {
  "$venv/bin/python" -c 'import torch, torch.distributed as d; assert d.is_available() and d.is_gloo_available()' \
    >/dev/null 2>&1
}

if [ -f "$stamp" ] && works; then
  echo "torch: already installed in $venv" >&2
else
  start=$(date +%s)
  # Packages already in the venv at the pinned version are kept (pip skips them), so bumping
  # the stamp after adding a package costs only that package.
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  rm -f "$venv"/.mgpu-torch-*
  links=()
  [ -d "$root/.tools/wheels" ] && links=(--find-links "$root/.tools/wheels")
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: "${links[@]}" "${pkgs[@]}" >&2
  if ! works; then
    echo "torch: installed, but 'import torch' with gloo fails:" >&2
    "$venv/bin/python" -c 'import torch, torch.distributed as d; print(d.is_gloo_available())' >&2 || true
    exit 1
  fi
  touch "$stamp"
  echo "torch: installed in $venv in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1) on disk)" >&2
fi
echo "$venv/bin/python"
