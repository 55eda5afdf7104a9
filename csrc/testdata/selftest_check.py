"""Checks the records gpu_selftest wrote: python3 selftest_check.py RUN_DIR WORLD."""
import json, statistics, sys

run, world = sys.argv[1], int(sys.argv[2])
fails = 0
def expect(cond, msg):
    global fails
    if not cond:
        fails += 1
        print("CHECK FAIL:", msg)
timing = {}
for r in range(world):
    recs = [json.loads(l) for l in open(f"{run}/rank-{r}.jsonl")]
    expect(recs[0]["t"] == "start" and recs[-1]["t"] == "done", f"rank {r}: start/done order")
    print(f"rank {r}: gpu={recs[0]['gpu']!r} device={recs[0]['device']}")
    for x in recs:
        if x["t"] == "timing":
            timing[(r, x["case"], x["who"])] = x
            us, wall = statistics.median(x["us"]), statistics.median(x["wall_us"])
            gbs = x["bytes"] * x["factor"] / us / 1e3
            print(f"rank {r} {x['case']:>9}/{x['who']:<8} n={len(x['us']):2d} us={us:9.1f} "
                  f"wall={wall:9.1f} wall/us={wall/us:7.2f} {gbs:7.1f} GB/s")
        elif x["t"] == "note":
            print(f"rank {r} note: {x['msg']}")
        elif x["t"] == "case":
            print(f"rank {r} case {x['case']}: ok={x['ok']} bad={x['bad']} unw={x['unwritten']} "
                  f"guard={x['guard_hits']} first={x['first'][:2]}")
def ratio(r, case, who):
    x = timing[(r, case, who)]
    return statistics.median(x["wall_us"]) / statistics.median(x["us"])
for r in range(world):
    expect(ratio(r, "copy", "yours") < 1.3, "honest kernel: wall ~ us")
    expect(ratio(r, "copy", "baseline") < 1.3, "memcpy: wall ~ us")
    expect(ratio(r, "side", "yours") > 5, "side stream: us << wall")
    expect(len(timing[(r, "side", "yours")]["us"]) == len(timing[(r, "side", "baseline")]["us"]),
           "paired sample counts")
if (0, "peer", "yours") in timing:
    expect(ratio(0, "peer", "yours") < 1.3, "peer memcpy: wall ~ us")
    expect(ratio(0, "peer-side", "yours") > 5, "peer copy on the other GPU's side stream: us << wall")
for case in ["copy", "side", "sync"] + (["allreduce"] if world > 1 else []):
    ns = {len(timing[(r, case, "yours")]["us"]) for r in range(world)}
    expect(len(ns) == 1, f"{case}: every rank took the same number of samples {ns}")
print("selftest_check:", "FAIL" if fails else "ok")
sys.exit(1 if fails else 0)
