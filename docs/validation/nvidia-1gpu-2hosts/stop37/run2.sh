#!/usr/bin/env bash
# Stop 37 on one H200: the harness's fine exact values in the C exercises of modules 2-5 (the
# reference solutions must still pass; module3/init-allreduce's half-wire must fail), and
# module3/ring-allreduce's forge-seed-from-stack with the new formula.
# bin/mgpu-learn and .gpu (the CUDA-aware Open MPI) carried:
#   OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/stop37/run2.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out/r2; s=$SECONDS
tar xf .gpu/ompi-cuda-4.1.4.tar.xz -C /tmp && export PATH=/tmp/ompi-cuda/bin:$PATH LD_LIBRARY_PATH=/tmp/ompi-cuda/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
C=$HOME/c2; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
W=$HOME/ws2; rm -rf $W; $bin --course $C init $W >/dev/null || exit 1
cd $W
# target | ranks | extra env (rig: the hostid shim for two NCCL ranks on one GPU)
plan="module3/init-allreduce --solution|1|
module3/init-allreduce --variant half-wire|1|
module3/ring-allreduce --solution|1|
module3/ring-allreduce --variant forge-seed-from-stack|1|
module3/grouped-collectives --solution|1|
module3/single-process --solution|1|
module4/small-allreduce --solution|1|
module4/ring-hello --solution|1|
module5/ipc-vmm --solution|2|
module5/flag-barrier --solution|1|
module2/mpi-vs-nccl --solution|2|rig
module2/hybrid-control --solution|2|rig
module3/fault-tolerance --solution|2|rig"
cc -shared -fPIC -O2 -o $HOME/hostid_shim.so $R/docs/validation/nvidia-1gpu-2hosts/hostid_shim.c -ldl || exit 1
echo "$plan" | cut -d'|' -f1 | xargs -P 12 -L 1 $bin --course $C build >/dev/null 2>&1
echo "built in $((SECONDS - s)) s"
while IFS='|' read -r t r env; do
  [ $((SECONDS - s)) -lt 500 ] || { echo "skipped $t (time)"; continue; }
  f=$out/r2/$(echo "$t" | tr ' /' '__' | tr -s _).json
  if [ "$env" = rig ]; then
    LD_PRELOAD=$HOME/hostid_shim.so NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 timeout -s INT 120 $bin --course $C check $t --ranks $r --no-perf --json >$f 2>$f.stderr
  else
    timeout -s INT 120 $bin --course $C check $t --ranks $r --no-perf --json >$f 2>$f.stderr
  fi
  rc=$?
  python3 - "$f" "$t" "$rc" "$((SECONDS - s))" <<'PY'
import json, sys
f, t, rc, el = sys.argv[1:]
try:
    r = json.load(open(f))["reports"][0]
    print(f"{t:55s} rc={rc} {r.get('verdict')} at {r.get('stage')} | {str(r.get('headline', ''))[:260]} [t={el}s]")
except Exception as e:
    print(f"{t:55s} rc={rc} no report ({e}) [t={el}s]"); print(open(f + ".stderr").read()[-600:])
PY
done <<<"$plan"
cd $out && tar czf stop37-run2.tgz r2 && rm -rf r2
echo "t=$((SECONDS - s)) s"
