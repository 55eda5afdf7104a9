#!/usr/bin/env bash
# After run6.sh: under MPS, a variant whose ranks hang (expect run) and are killed leaves the MPS
# server unusable for a while, and the checks after it ended in "cudaErrorDevicesUnavailable"
# (module6 one-shot/two-shot) or in a hang (module5/flag-barrier). Here every check runs on its
# own: solution, starter and each variant with `check`, and the MPS server is killed after each
# one (the control daemon starts a fresh one for the next client). Expectations are read from
# the manifests; the verdict is judged as `course verify` does (stage, and the manifest's words).
#   module6's NVSHMEM exercises (one-shot, two-shot, fused-norm), module5's two multi-process
#   ones (flag-barrier, ipc-vmm), then module4's four ordering races of run6 three times each.
# bin/mgpu-learn carried: OUT=$OUT bash docs/validation/nvidia-1gpu-2hosts/run7.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH NO_COLOR=1 PYTHONUNBUFFERED=1
export MGPU_LEARN_CACHE=$HOME/.cache/mgpu-2hosts
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=WARN
R=$PWD; bin=$R/bin/mgpu-learn; out=${OUT:-/tmp/out}; mkdir -p $out; s=$SECONDS
D=$R/docs/validation/nvidia-1gpu-2hosts
$bin --version
export CUDA_MPS_PIPE_DIRECTORY=$HOME/mps-pipe CUDA_MPS_LOG_DIRECTORY=$HOME/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
nvidia-cuda-mps-control -d || { echo "no MPS"; exit 1; }
trap 'echo quit | nvidia-cuda-mps-control; sleep 1' EXIT
echo set_default_active_thread_percentage 50 | nvidia-cuda-mps-control
cc -shared -fPIC -O2 -o $HOME/hostid_shim.so $D/hostid_shim.c -ldl || exit 1
export LD_PRELOAD=$HOME/hostid_shim.so
C=$HOME/c1; rm -rf $C; mkdir -p $C; cp -r lessons exercises $C/; find $C -name __pycache__ -prune -exec rm -rf {} +
sed -i -e 's/^  gpus: 2$/  gpus: 1/' -e 's/^  peer_access: true$/  peer_access: false/' $C/exercises/*/*/exercise.yaml
E6="module6/one-shot module6/two-shot module6/fused-norm"; E5="module5/flag-barrier module5/ipc-vmm"
echo "== warm the build cache (one build at a time per exercise, exercises side by side)"
W=$HOME/ws; rm -rf $W; $bin --course $C init $W >/dev/null
for e in $E6 $E5; do
  ( $bin --course $C build $e --solution; cd $W && $bin --course $C build $e ) >/dev/null 2>&1 &
done
wait
for p in module6 module5; do python3 scripts/expect-builds.py --variants $C $bin $p 2>&1 | tail -1; done
echo "t=$((SECONDS-s)) s"
MGPU_BIN=$bin MGPU_COURSE=$C MGPU_WS=$W MGPU_ELAPSED=$((SECONDS-s)) python3 - $E6 $E5 <<'PY'
import json, os, re, subprocess, sys, time, importlib.util
spec = importlib.util.spec_from_file_location("eb", "scripts/expect-builds.py"); eb = importlib.util.module_from_spec(spec); spec.loader.exec_module(eb)
bin_, course, ws, t0 = os.environ["MGPU_BIN"], os.environ["MGPU_COURSE"], os.environ["MGPU_WS"], time.time()
elapsed = int(os.environ["MGPU_ELAPSED"])  # seconds the script had run before this
deadline = t0 + 450 - elapsed
def fresh_mps():
    subprocess.run("pkill -9 -f nvidia-cuda-mps-server; sleep 0.5", shell=True)
def check(mid, args):
    cmd = [bin_, "--course", course, "check", mid, "--ranks", "2", "--no-perf", "--json"] + args
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ws, timeout=90)
    fresh_mps()
    try:
        doc = json.loads(p.stdout); r = doc["reports"][0] if isinstance(doc, dict) else doc[0]
    except Exception:
        return "none", "none", f"no JSON report (exit {p.returncode}): {p.stderr.strip()[-200:]}", json.dumps({}), time.time() - t
    return r.get("verdict"), r.get("stage"), r.get("headline", ""), json.dumps(r).lower(), time.time() - t
def judge(expect, words, verdict, stage, text):
    if expect == "pass":
        return verdict == "passed"
    return verdict == "failed" and stage == expect and all(w.lower() in text for w in words)
def manifest(mid):
    path = os.path.join(course, "exercises")
    for m in os.popen(f"ls {path}/*/*/exercise.yaml").read().split():
        text = open(m).read()
        if eb.manifest_fields(text)[0] == mid:
            fails = eb.manifest_fields(text)[2]
            return fails, eb.variant_entries(text), text
    raise SystemExit(f"no manifest for {mid}")
def min_ranks(text, name):
    blk = re.search(r"- name: %s\b(.*?)(?=\n  - name:|\Z)" % re.escape(name), text, re.S)
    m = blk and re.search(r"min_ranks:\s*(\d+)", blk.group(1))
    return int(m.group(1)) if m else 1
ok = bad = 0
def one(mid, label, args, expect, words):
    global ok, bad
    if time.time() > deadline:
        print(f"skip  {mid:26} {label:26} (time box)"); return
    v, st, head, text, dt = check(mid, args)
    good = judge(expect, words, v, st, text)
    ok += good; bad += not good
    print(f"{'ok  ' if good else 'FAIL'}  {mid:26} {label:26} expect {expect:12} got {v} at {st} ({dt:.1f}s)")
    if not good:
        print(f"      {head[:400]}")
fresh_mps()
for mid in sys.argv[1:]:
    fails, variants, text = manifest(mid)
    one(mid, "solution", ["--solution"], "pass", [])
    one(mid, "starter", [], fails or "correctness", [])
    for name, expect, words in variants:
        if min_ranks(text, name) > 2:
            print(f"skip  {mid:26} variant:{name:18} needs {min_ranks(text, name)} ranks"); continue
        if re.search(r"- name: %s\b[^\n]*\n(?:    [^\n]*\n)*?    timed: true" % re.escape(name), text) or expect == "performance":
            print(f"skip  {mid:26} variant:{name:18} timed or performance (--no-perf)"); continue
        one(mid, "variant:" + name, ["--variant", name], expect, words)
print(f"{ok} as expected, {bad} not; t={time.time()-t0:.0f} s")
print("== module4's ordering races, three runs each (run6: passed on one GPU)")
for mid, name in [("module4/signal-latency", "no-fence"), ("module4/small-allreduce", "signal-first"),
                  ("module4/small-allreduce", "no-fence"), ("module4/small-allreduce", "single-buffer")]:
    for i in range(3):
        if time.time() > t0 + 530 - elapsed:
            print("(time box)"); break
        v, st, head, _, dt = check(mid, ["--variant", name])
        print(f"{mid} {name} run {i+1}: {v} at {st} ({dt:.1f}s) {head[:160]}")
PY
echo "t=$((SECONDS-s)) s"
tail -3 $CUDA_MPS_LOG_DIRECTORY/control.log
