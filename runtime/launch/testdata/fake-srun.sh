#!/bin/sh
# A stand-in for srun in the launch tests that need no Slurm. It starts --ntasks copies of the
# program outside its own process tree (re-parented to init, as srun's tasks are slurmstepd's),
# labels their output "N: " like srun --label, and waits for them. It forwards no signal and
# ignores SIGTERM, so only the supervisor's own signals can end the tasks. Its command line is
# written to $FAKE_SRUN_ARGV when that is set.
[ -n "${FAKE_SRUN_ARGV:-}" ] && printf '%s\n' "$@" >"$FAKE_SRUN_ARGV"
trap '' TERM
n=1
while [ $# -gt 0 ]; do
  case "$1" in
    --ntasks=*) n=${1#--ntasks=} ;;
    --*) ;;
    *) break ;;
  esac
  shift
done
d=$(mktemp -d "${MGPU_RDZV_DIR:-/tmp}/fake-srun.XXXXXX") # the run folder: removed with it
i=0
while [ $i -lt "$n" ]; do
  (
    export SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_STEP_ID=7 SLURM_JOB_ID="${SLURM_JOB_ID:-1}" D="$d" R=$i
    setsid sh -c '{ "$@"; echo $? >"$D/rc.$R"; } 2>&1 | sed -u "s/^/$R: /"' fake-task "$@" &
    echo $! >"$d/pid.$i"
  )
  i=$((i + 1))
done
# Wait for the tasks (not our children): until every one has written its status or is gone.
while :; do
  left=0
  i=0
  while [ $i -lt "$n" ]; do
    if [ ! -f "$d/rc.$i" ] && kill -0 "$(cat "$d/pid.$i")" 2>/dev/null; then left=1; fi
    i=$((i + 1))
  done
  [ $left -eq 0 ] && break
  sleep 0.05
done
worst=0
i=0
while [ $i -lt "$n" ]; do
  rc=$(cat "$d/rc.$i" 2>/dev/null || echo 137)
  if [ "$rc" -ne 0 ]; then
    echo "srun: error: fake: task $i: Exited with exit code $rc" >&2
    [ "$rc" -gt $worst ] && worst=$rc
  fi
  i=$((i + 1))
done
rm -rf "$d"
exit $worst
