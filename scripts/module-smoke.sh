#!/usr/bin/env bash
# One module on this machine's GPUs, one table: every exercise's reference solution (must pass),
# pristine starter (must fail at its manifest's fails_at) and variants (must end as their
# manifests say, with the stated words in the report), each through `mgpu-learn check --json`.
#
#   scripts/module-smoke.sh [--module DIR] [--one-gpu] [--ranks N] [--no-perf] [--only EXERCISE]
#                           [--nccl-rig] [--mps] [--out DIR]
#
# --module    the module's folder under exercises/ (default module5-uva)
# --one-gpu   for a machine with a single GPU: runs a copy of the course whose manifests of that
#             module ask for 1 GPU and no peer access, with 1 rank (2 for module5/ipc-vmm: two
#             processes on one GPU); variants that need more ranks are skipped. Performance
#             verdicts then mean little (a GPU copying to itself).
# --ranks N   every check with N ranks (with --one-gpu: N processes sharing the GPU)
# --jobs N    build every target first, N builds at a time (a fresh machine's cache is empty;
#             the checks then only run)
# --build-only  stop after that (with --jobs): fills the build cache for `course verify`
# --nccl-rig  with --one-gpu and --ranks N: NCCL told each rank is a host of its own
#             (docs/validation/nvidia-1gpu-2hosts/hostid_shim.c), so N NCCL ranks share the GPU
# --mps       with --one-gpu: a CUDA MPS daemon of this script's own (50% of the SMs a client),
#             so ranks' kernels that wait on each other run side by side (NVSHMEM's full
#             multi-PE-per-GPU mode); its server is restarted after every check, since a killed
#             hung client leaves it refusing new ones for a while. Quit on exit.
# --no-perf   no timing: as `course verify --no-perf`, variants whose mistake is a speed
#             (expect: performance) or shows in the timed calls (timed: true) are skipped.
# A starter check refused for too few ranks (one rank on one GPU) is skipped too.
# Writes every JSON report to OUT (default: a temporary folder, printed at the end) and exits
# non-zero when any row is not as expected. `mgpu-learn course verify module5` checks the
# same expectations; this script shows them side by side with the stage and the headline.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${MGPU_LEARN_BIN:-$root/bin/mgpu-learn}
one_gpu=0 perf=() only="" out="" mod=module5-uva ranks="" jobs=0 build_only=0 rig=0 mps=0
while [ $# -gt 0 ]; do
  case $1 in
    --module) mod=${2%/}; shift 2 ;;
    --one-gpu) one_gpu=1; shift ;;
    --ranks) ranks=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --nccl-rig) rig=1; shift ;;
    --mps) mps=1; shift ;;
    --no-perf) perf=(--no-perf); shift ;;
    --only) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -d "$root/exercises/$mod" ] || { echo "no exercises/$mod" >&2; exit 2; }
[ -x "$bin" ] || { echo "no $bin: run 'make build' (or set MGPU_LEARN_BIN)" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NO_COLOR=1
[ -n "$out" ] || out=$(mktemp -d "/tmp/$mod-smoke.XXXXXX")
mkdir -p "$out"
if [ $rig = 1 ] || [ $mps = 1 ]; then
  [ $one_gpu = 1 ] || { echo "--nccl-rig and --mps are for --one-gpu" >&2; exit 2; }
fi
if [ $rig = 1 ]; then
  cc -shared -fPIC -O2 -o "$out/hostid_shim.so" "$root/docs/validation/nvidia-1gpu-2hosts/hostid_shim.c" -ldl || exit 4
  export LD_PRELOAD=$out/hostid_shim.so NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1
fi
fresh_mps() { :; }
if [ $mps = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$out/mps-pipe CUDA_MPS_LOG_DIRECTORY=$out/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  LD_PRELOAD= nvidia-cuda-mps-control -d || { echo "cannot start an MPS control daemon" >&2; exit 4; }
  trap 'echo quit | nvidia-cuda-mps-control; sleep 1' EXIT
  echo set_default_active_thread_percentage 50 | nvidia-cuda-mps-control >/dev/null
  # Only this daemon's server: it was started with our pipe folder in its environment.
  fresh_mps() {
    local pid
    for pid in $(pgrep -f nvidia-cuda-mps-server); do
      # the server's own environment, or its parent's (the control daemon that started it)
      for p in "$pid" "$(ps -o ppid= -p "$pid" | tr -d ' ')"; do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY"; then
          kill -9 "$pid"; break
        fi
      done
    done
    sleep 0.5
  }
fi

course=() course_dir=$root
if [ $one_gpu = 1 ]; then
  course_dir=$out/course
  rm -rf "$course_dir" && mkdir -p "$course_dir"
  cp -r "$root/lessons" "$root/exercises" "$course_dir/"
  sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' "$course_dir"/exercises/"$mod"/*/exercise.yaml
  course=(--course "$course_dir")
fi

ws=$out/workspace
rm -rf "$ws"
"$bin" "${course[@]}" init "$ws" >/dev/null || { echo "mgpu-learn init failed" >&2; exit 4; }

# One line per target: exercise|kind-of-target|name|expect|min_ranks|words|timed (| separated).
plan=$(python3 - "$course_dir" "$only" "$mod" <<'PY'
import pathlib, re, sys
root, only, mod = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
for m in sorted(root.glob(f"exercises/{mod}/*/exercise.yaml")):
    text = m.read_text()
    mid = re.search(r"^id:\s*(\S+)", text, re.M).group(1)
    if only and mid != only and mid.split("/")[-1] != only:
        continue
    fails = (re.search(r"^starter:\s*\n(?:\s+.*\n)*?\s+fails_at:\s*(\w+)", text, re.M)
             or re.search(r"^starter:\s*\{[^}]*\bfails_at:\s*(\w+)", text, re.M))
    print(f"{mid}|solution|-|pass|0||")
    print(f"{mid}|starter|-|{fails.group(1) if fails else '?'}|0||")
    block = re.search(r"^variants:[ \t]*\n((?:[ \t]+.*\n|[ \t]*#.*\n|[ \t]*\n)*)", text + "\n", re.M)
    if not block:
        continue
    for entry in re.split(r"\n[ \t]*-[ \t]+(?=name:)", "\n" + block.group(1)):
        name = re.search(r"\bname:\s*\"?([\w.-]+)", entry)
        if not name:
            continue
        expect = re.search(r"\bexpect:\s*\"?(\w+)", entry)
        ranks = re.search(r"\bmin_ranks:\s*(\d+)", entry)
        msg = re.search(r"\bmessage:\s*\[([^\]]*)\]", entry)
        words = [w.strip().strip("\"'") for w in msg.group(1).split(",")] if msg else []
        timed = re.search(r"\btimed:\s*true\b", entry)
        print(f"{mid}|variant|{name.group(1)}|{expect.group(1) if expect else '?'}|{ranks.group(1) if ranks else 0}|{';'.join(words)}|{'timed' if timed else ''}")
PY
)

ranks_for() { # the --ranks a target runs with
  [ -z "$ranks" ] || { echo "$ranks"; return 0; }
  [ $one_gpu = 1 ] || return 0
  case $1 in
    module5/ipc-vmm) echo 2 ;;
    *) echo 1 ;;
  esac
}

if [ "$jobs" -gt 0 ]; then
  start=$SECONDS
  while IFS='|' read -r ex what name _; do
    [ -n "$ex" ] || continue
    case $what in
      solution) echo "$ex --solution" ;;
      variant) echo "$ex --variant $name" ;;
      *) echo "$ex" ;;
    esac
  done <<<"$plan" | (cd "$ws" && xargs -P "$jobs" -L 1 "$bin" "${course[@]}" build >/dev/null 2>&1)
  echo "built every target in $((SECONDS - start)) s ($jobs at a time)" >&2
fi
if [ $build_only = 1 ]; then
  [ "$jobs" -gt 0 ] || { echo "--build-only needs --jobs N" >&2; exit 2; }
  rm -rf "$ws"
  exit 0
fi

rows=() bad=0 n=0 skipped=0
while IFS='|' read -r ex what name expect min_ranks words timed; do
  [ -n "$ex" ] || continue
  n=$((n + 1))
  r=$(ranks_for "$ex")
  args=("$bin" "${course[@]}" check "$ex" --json "${perf[@]}")
  [ -n "$r" ] && args+=(--ranks "$r")
  label=$what
  case $what in
    solution) args+=(--solution) ;;
    variant) args+=(--variant "$name"); label="variant $name" ;;
  esac
  if [ -n "$r" ] && [ "$min_ranks" -gt "$r" ]; then
    rows+=("$ex|$label|$expect|skipped (needs $min_ranks ranks)|-|")
    skipped=$((skipped + 1))
    continue
  fi
  # As course verify: without timing, a speed or the timed calls cannot show the mistake.
  if [ ${#perf[@]} -gt 0 ] && { [ "$expect" = performance ] || [ "$timed" = timed ]; }; then
    rows+=("$ex|$label|$expect|skipped (--no-perf)|-|")
    skipped=$((skipped + 1))
    continue
  fi
  file=$out/$(echo "$ex-$what-$name" | tr '/' '_').json
  start=$SECONDS
  (cd "$ws" && "${args[@]}" >"$file" 2>"$file.stderr")
  rc=$?
  fresh_mps
  secs=$((SECONDS - start))
  # A check of the learner's own files is refused with fewer than 2 ranks where they
  # communicate (a usage error): not a verdict.
  if [ "$what" = starter ] && [ $rc -eq 2 ] && grep -q "is too few" "$file.stderr"; then
    rows+=("$ex|$label|$expect|skipped (a starter check needs 2 ranks)|-|")
    skipped=$((skipped + 1))
    continue
  fi
  row=$(python3 - "$file" "$expect" "$words" "$rc" "$secs" <<'PY'
import json, sys
path, expect, words, rc, secs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
try:
    text = open(path).read()
    rep = json.loads(text)["reports"][0]
except Exception as e:
    print(f"no report (exit {rc})|NO|{e}")
    sys.exit()
verdict, stage = rep.get("verdict", ""), rep.get("stage", "")
got = "pass" if verdict == "passed" else f"{verdict} at {stage or '-'}"
if expect == "pass":
    ok = verdict == "passed"
else:
    ok = verdict == "failed" and stage == expect
missing = [w for w in words.split(";") if w and w.lower() not in text.lower()]
if ok and missing:
    ok = False
    got += f" (report lacks {', '.join(missing)})"
print(f"{got}|{'ok' if ok else 'NO'}|{rep.get('headline', '')[:110]} [{secs}s]")
PY
)
  rows+=("$ex|$label|$expect|$row")
  case $row in *"|NO|"*) bad=$((bad + 1)) ;; esac
  echo "$ex $label: ${row%%|*}" >&2
done <<<"$plan"

echo
printf '%-22s %-28s %-12s %-34s %-4s %s\n' exercise target expected got ok headline
for row in "${rows[@]}"; do
  IFS='|' read -r ex label expect got ok head <<<"$row"
  printf '%-22s %-28s %-12s %-34s %-4s %s\n' "${ex#*/}" "$label" "$expect" "$got" "$ok" "$head"
done
echo
echo "$mod smoke: $((n - bad - skipped)) passed, $bad failed, $skipped skipped (reports in $out)"
[ $bad -eq 0 ]
