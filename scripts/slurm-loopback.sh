#!/usr/bin/env bash
# A real single-node Slurm cluster on the loopback, for testing mgpu-learn's Slurm support
# (docs/slurm.md) on a machine without one. Needs root and Debian's slurm-wlm (22.05) with
# munge: scripts/install-ci-deps.sh installs them.
#
#   scripts/slurm-loopback.sh start [DIR]   start munged, slurmctld and slurmd with everything
#                                           (config, key, state, logs, sockets) in DIR (default:
#                                           a new temporary folder); prints the SLURM_CONF to export
#   scripts/slurm-loopback.sh stop [DIR]    stop the daemons of DIR (default: $SLURM_CONF's folder)
#                                           and delete DIR
#   scripts/slurm-loopback.sh run-check     start a cluster, run the Slurm checks below against it,
#                                           stop it (also on failure or Ctrl-C); exit 0 when all pass
#
# run-check, in about half a minute:
#   1. the launcher's live tests (runtime/launch TestSlurmLive*) inside `salloc -n2`: ranks and
#      their environment, a crash named, a hung job gone after its timeout, a cancel;
#   2. `srun -n1 mgpu-learn check --solution` of a two-rank CPU exercise: the check runs in a
#      one-CPU step and starts its ranks as a second step (--overlap, --overcommit);
#   3. inside `salloc -n2`: the same solution passes and a crashing variant fails at the run
#      stage, both with launcher "srun"; module1's torch-on-CPU exercise too when
#      MGPU_LEARN_PYTHON has torch;
#   4. `mgpu-learn check --slurm` from outside an allocation: passes, and a failing variant's
#      exit code comes through;
#   5. nothing left: no job in the queue, no process of the checks.
# SLURM_LOOPBACK_VERBOSE=1 shows every step's output, not only a failed one's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "slurm-loopback: $*" >&2; exit 1; }

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# wait_for SECONDS CMD...: runs CMD every 0.2 s until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

start() {
  local dir=${1:-}
  [ "$(id -u)" -eq 0 ] || die "needs root (slurmd and munged run as root here)"
  for p in munged slurmctld slurmd srun salloc scontrol sinfo; do
    command -v "$p" >/dev/null || [ -x "/usr/sbin/$p" ] || die "$p not found: install slurm-wlm and munge (scripts/install-ci-deps.sh)"
  done
  export PATH=$PATH:/usr/sbin
  [ -n "$dir" ] || dir=$(mktemp -d /tmp/mgpu-slurm.XXXXXX)
  mkdir -p "$dir"/{munge,state,spool}
  # munged refuses a socket folder that others cannot enter, and a key others can read.
  chmod 755 "$dir" "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" ||
    die "munged did not start: $(tail -n 3 "$dir/munge/munged.log" 2>/dev/null)"

  local node ctld_port node_port hw mem
  node=$(hostname -s)
  ctld_port=$(freeport); node_port=$(freeport)
  while [ "$node_port" = "$ctld_port" ]; do node_port=$(freeport); done
  # The hardware as slurmd sees it, with a little less memory than there is (a node that
  # reports less than its configuration says is drained).
  hw=$(slurmd -C | head -n 1 | sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//')
  mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
  cat >"$dir/slurm.conf" <<EOF
# single-node loopback cluster made by scripts/slurm-loopback.sh
ClusterName=mgpuloop
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$node_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=5
MinJobAge=10
NodeName=$node NodeAddr=127.0.0.1 $hw RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=60 State=UP
EOF
  : >"$dir/plugstack.conf"
  export SLURM_CONF=$dir/slurm.conf
  slurmctld -f "$SLURM_CONF" || die "slurmctld did not start: $(tail -n 5 "$dir/slurmctld.log" 2>/dev/null)"
  slurmd -f "$SLURM_CONF" -N "$node" || die "slurmd did not start: $(tail -n 5 "$dir/slurmd.log" 2>/dev/null)"
  if ! wait_for 30 node_idle; then
    sinfo >&2 || true
    tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
    die "the node did not come up (logs above)"
  fi
  echo "export SLURM_CONF=$SLURM_CONF"
}

node_idle() { [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]; }

# stop_pid PIDFILE: SIGTERM, then SIGKILL after 5 s.
stop_pid() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local dir=${1:-}
  [ -n "$dir" ] || { [ -n "${SLURM_CONF:-}" ] && dir=$(dirname "$SLURM_CONF"); } || true
  [ -n "$dir" ] && [ -d "$dir" ] || die "stop: no cluster folder (give DIR or set SLURM_CONF)"
  # Jobs first, so slurmd does not leave their steps behind.
  if [ -f "$dir/slurm.conf" ] && [ -f "$dir/slurmctld.pid" ]; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --quiet --full --partition=debug 2>/dev/null || true
  fi
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  # slurmstepd of finished steps exit on their own; one still running belongs to this cluster.
  for pid in $(pgrep -f "slurmstepd" 2>/dev/null || true); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_CONF=$dir/slurm.conf"; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  stop_pid "$dir/munge/munged.pid"
  rm -rf "$dir"
}

# --- run-check -------------------------------------------------------------------------------

pass=0 fail=0
step() {
  local name=$1; shift
  local t0=$SECONDS
  if "$@" >"$work/step.log" 2>&1; then
    pass=$((pass + 1)); echo "ok    slurm: $name ($((SECONDS - t0)) s)"
    [ -z "${SLURM_LOOPBACK_VERBOSE:-}" ] || sed 's/^/      /' "$work/step.log"
  else
    fail=$((fail + 1)); echo "FAIL  slurm: $name ($((SECONDS - t0)) s)"; tail -n 40 "$work/step.log" | sed 's/^/      /'
  fi
}

# write_expect writes $work/expect.py FILE VERDICT LAUNCHER: the first report of a check --json
# has that verdict, ran its ranks with that launcher and left no process behind.
write_expect() {
  cat >"$work/expect.py" <<'EOF'
import json, sys
path, verdict, launcher = sys.argv[1:4]
r = json.load(open(path))["reports"][0]
run = r.get("run") or {}
print(r["exercise"], r["target"], r["verdict"], r.get("headline"), "launcher:", run.get("launcher"), "leftover:", run.get("leftover"))
sys.exit(0 if r["verdict"] == verdict and run.get("launcher") == launcher and not run.get("leftover") else 1)
EOF
}

bin=$root/bin/mgpu-learn
fixture=$root/testdata/fixture-course

# check_json EXIT-CODE VERDICT LAUNCHER CMD...: runs CMD (a check --json), expects its exit code
# and the verdict and launcher of its report.
check_json() {
  local want=$1 verdict=$2 launcher=$3 rc=0; shift 3
  "$@" >"$work/out.json" || rc=$?
  echo "exit $rc (want $want)"
  python3 "$work/expect.py" "$work/out.json" "$verdict" "$launcher" && [ "$rc" -eq "$want" ]
}

live_tests() {
  cd "$root/runtime/launch"
  MGPU_LEARN_SLURM_TEST=1 timeout 60 salloc --quiet -n2 --time=2 "$work/launch.test" -test.run 'TestSlurmLive' -test.v -test.count=1
}

in_step() {
  cd "$root"
  check_json 0 passed srun timeout 60 srun --quiet -n1 --time=2 "$bin" --course "$fixture" check module0/sum --solution --json
}

in_salloc() {
  cd "$root"
  # shellcheck disable=SC2016
  timeout 90 salloc --quiet -n2 --time=2 bash -c '
    set -e
    check_json() { local want=$1 verdict=$2 rc=0; shift 2
      "$@" >"$W/out.json" || rc=$?; echo "exit $rc (want $want)"
      python3 "$W/expect.py" "$W/out.json" "$verdict" srun && [ $rc -eq $want ]; }
    check_json 0 passed "$B" --course "$F" check module0/sum --solution --json
    check_json 1 failed "$B" --course "$F" check module0/sum --variant crash-rank1 --json
    if [ -n "${MGPU_LEARN_PYTHON:-}" ]; then
      check_json 0 passed "$B" check module1/first-allreduce --solution --ranks 2 --json
    fi'
}

via_slurm() {
  cd "$root"
  check_json 0 passed srun timeout 60 "$bin" --course "$fixture" check module0/sum --solution --json --slurm --time 2 &&
    check_json 1 failed srun timeout 60 "$bin" --course "$fixture" check module0/sum --variant exit1 --json --slurm --time 2
}

nothing_left() {
  wait_for 15 queue_empty || { squeue; return 1; }
  wait_for 10 no_job_process || { echo "left running:"; job_processes; return 1; }
}

queue_empty() { [ -z "$(squeue -h 2>/dev/null)" ]; }

# job_processes lists the processes started in a job of this cluster (they carry its
# SLURM_CONF and a SLURM_JOB_ID).
job_processes() {
  local f pid
  for f in /proc/[0-9]*/environ; do
    pid=${f#/proc/}; pid=${pid%/environ}
    if tr '\0' '\n' <"$f" 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF" &&
      tr '\0' '\n' <"$f" 2>/dev/null | grep -q '^SLURM_JOB_ID='; then
      echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
    fi
  done
}

no_job_process() { [ -z "$(job_processes)" ]; }

run_check() {
  local t0=$SECONDS dir
  [ "$(id -u)" -eq 0 ] || { echo "skip  slurm: needs root"; return 0; }
  [ -x "$bin" ] || die "build mgpu-learn first (make build)"
  work=$(mktemp -d)
  dir=$(mktemp -d /tmp/mgpu-slurm.XXXXXX)
  # shellcheck disable=SC2064
  trap "stop '$dir' >/dev/null 2>&1 || true; rm -rf '$work'" EXIT
  trap 'exit 130' INT TERM
  local out
  out=$(start "$dir") || exit 1
  eval "$out"
  export PATH=$PATH:/usr/sbin
  echo "ok    slurm: loopback cluster up ($((SECONDS - t0)) s, $(srun --version))"
  write_expect
  export W=$work B=$bin F=$fixture
  if command -v go >/dev/null; then
    (cd "$root" && go test -c -o "$work/launch.test" ./runtime/launch) || die "go test -c failed"
    step "launcher live tests in salloc -n2" live_tests
  fi
  step "srun -n1 mgpu-learn check (2 ranks as a nested step)" in_step
  step "checks inside salloc -n2 (srun launcher)" in_salloc
  if "$bin" check --help 2>/dev/null | grep -q -- '--slurm'; then
    step "check --slurm from outside an allocation" via_slurm
  else
    echo "skip  slurm: check --slurm (not in this build of mgpu-learn)"
  fi
  step "nothing left in the queue or the process table" nothing_left
  echo "slurm-loopback: $pass passed, $fail failed ($((SECONDS - t0)) s)"
  [ "$fail" -eq 0 ]
}

case "${1:-}" in
  start) shift; start "${1:-}" ;;
  stop) shift; stop "${1:-}" ;;
  run-check) run_check ;;
  *) echo "usage: $0 start [DIR] | stop [DIR] | run-check" >&2; exit 2 ;;
esac
