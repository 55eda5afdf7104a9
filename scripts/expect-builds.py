#!/usr/bin/env python3
"""Compares `mgpu-learn build all --json` of the starters with each manifest's starter.fails_at:
a starter marked `fails_at: build` must fail to build; every other starter must build."""
import json, sys, pathlib, re

reports = json.load(open(sys.argv[1]))
if isinstance(reports, dict):
    reports = reports.get("reports", [])
root = pathlib.Path(sys.argv[2])
expect = {}
for m in root.glob("exercises/*/*/exercise.yaml"):
    text = m.read_text()
    mid = re.search(r"^id:\s*(\S+)", text, re.M).group(1)
    fails = re.search(r"^starter:\s*\n(?:\s+.*\n)*?\s+fails_at:\s*(\w+)", text, re.M) or re.search(r"fails_at:\s*(\w+)", text)
    expect[mid] = fails.group(1) if fails else ""
bad = 0
for r in reports:
    ex = r.get("exercise")
    built = r.get("verdict") == "passed"
    want_fail = expect.get(ex) == "build"
    if built == want_fail:
        bad += 1
        print(f"{ex}: starter {'built' if built else 'did not build'}, manifest says fails_at={expect.get(ex) or '-'}: {r.get('headline')}")
print(f"{len(reports)} starters built as their manifests say" if not bad else f"{bad} starters wrong")
sys.exit(1 if bad else 0)
