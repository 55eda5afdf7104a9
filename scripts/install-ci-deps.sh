#!/usr/bin/env bash
# Installs what `make test` needs on a fresh machine without GPUs, idempotently:
#   Debian: Open MPI (mpirun + headers), tmux (TUI smoke test), binutils (nm), chromium
#   (workshop dashboard test), slurm-wlm (single-node Slurm on loopback)
#   .tools/cuda: nvcc 13.0 + NCCL 2.28 + NVSHMEM 3.4.5 from PyPI wheels
#   .tools/venv: torch (CPU use, gloo) for the Python exercises
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
need=()
command -v mpirun >/dev/null || need+=(openmpi-bin)
[ -f /usr/include/x86_64-linux-gnu/openmpi/include/mpi.h ] || [ -f /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || command -v mpicc >/dev/null || need+=(libopenmpi-dev)
command -v tmux >/dev/null || need+=(tmux)
command -v nm >/dev/null || need+=(binutils)
command -v cc >/dev/null || need+=(gcc)
# workshop dashboard test (headless browser) and the loopback Slurm cluster
command -v chromium >/dev/null || need+=(chromium)
command -v slurmctld >/dev/null || need+=(slurm-wlm)
if [ ${#need[@]} -gt 0 ]; then
  echo "deps: apt-get install ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
"$root/scripts/install-cuda-tools.sh" >/dev/null
if [ -x "$root/scripts/install-torch-cpu.sh" ]; then
  "$root/scripts/install-torch-cpu.sh" >/dev/null
fi
echo "deps: ready" >&2
