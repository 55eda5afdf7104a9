#!/usr/bin/env python3
# Usage: scripts/watch-time.py "<mgpu-learn command>" <exercise> <learner file> <re-checks>
# Times re-checks through `mgpu-learn watch`: after each report, rewrites the learner's file
# unchanged and measures the write -> verdict line; prints the run stage's own time too.
import os, queue, re, subprocess, sys, threading, time
mgpu, ex, f, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
import shlex
p = subprocess.Popen(shlex.split(mgpu) + ["watch", ex], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
q = queue.Queue()
threading.Thread(target=lambda: [q.put((time.time(), l)) for l in p.stdout], daemon=True).start()
touched, results, run = time.time(), [], ""
while len(results) < n + 1:
    t, line = q.get(timeout=120)
    if m := re.match(r"\s*run\s+ok\s+\((\S+)\)", line):
        run = m.group(1)
    if line.startswith(("PASSED", "FAILED")):
        results.append((t - touched, run, line.split(":")[0].strip()))
    if line.startswith("Watching"):
        time.sleep(1.0)
        data = open(f).read(); open(f, "w").write(data); touched = time.time()
p.terminate(); p.wait()
for i, (dt, run, v) in enumerate(results):
    print(f"{'first' if i == 0 else 're-check'}: {dt:.2f} s; run stage {run}; {v}")
