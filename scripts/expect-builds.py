#!/usr/bin/env python3
"""Build expectations that CI can check without GPUs.

  expect-builds.py BUILD_JSON ROOT
      Compares `mgpu-learn build all --json` of the starters with each manifest's
      starter.fails_at: a starter marked `fails_at: build` or `fails_at: policy` must fail at
      that stage; every other starter must build and pass the policy stage.

  expect-builds.py --variants ROOT MGPU_LEARN [EXERCISE_PREFIX]
      Builds every variant of every cuda and c exercise (`mgpu-learn build ID --variant NAME
      --json`; the build stage runs the policy stage too) and compares with the manifest's
      `expect`: `build` must fail at build, `policy` must fail at policy with the manifest's
      message words in the report, anything else must build and pass the policy stage. Python
      variants are policed while they run, so they are left to `course verify`.

Manifests are read with regular expressions (no YAML module on the CI machine): the
`variants:` block is split into entries at each `- `, in block or flow style.
"""
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys


def manifest_fields(text):
    mid = re.search(r"^id:\s*(\S+)", text, re.M).group(1)
    kind = re.search(r"^kind:\s*(\w+)", text, re.M)
    fails = re.search(r"^starter:\s*\n(?:\s+.*\n)*?\s+fails_at:\s*(\w+)", text, re.M) or re.search(r"fails_at:\s*(\w+)", text)
    return mid, kind.group(1) if kind else "", fails.group(1) if fails else ""


def variant_entries(text):
    """[(name, expect, [message words])] of the manifest's variants block."""
    m = re.search(r"^variants:[ \t]*\n((?:[ \t]+.*\n|[ \t]*#.*\n|[ \t]*\n|-.*\n)*)", text + "\n", re.M)
    if not m:
        return []
    out = []
    for entry in re.split(r"\n?[ \t]*-[ \t]+(?=\{|name:)", m.group(1)):
        name = re.search(r"\bname:\s*\"?([\w.-]+)", entry)
        if not name:
            continue
        expect = re.search(r"\bexpect:\s*\"?(\w+)", entry)
        words = []
        msg = re.search(r"\bmessage:\s*\[([^\]]*)\]", entry)
        if msg:
            words = [w.strip().strip("\"'") for w in re.findall(r"\"[^\"]*\"|'[^']*'|[^,]+", msg.group(1))]
            words = [w for w in words if w]
        exp = expect.group(1) if expect else ""
        if exp == "policy" and re.search(r"\bcaught_at_run:\s*true\b", entry):
            exp = "policy-at-run"  # found while the program runs: the build must pass policy
        out.append((name.group(1), exp, words))
    return out


def check_starters(build_json, root):
    reports = json.load(open(build_json))
    if isinstance(reports, dict):
        reports = reports.get("reports", [])
    expect = {}
    for m in pathlib.Path(root).glob("exercises/*/*/exercise.yaml"):
        mid, _, fails = manifest_fields(m.read_text())
        expect[mid] = fails
    bad = 0
    for r in reports:
        ex = r.get("exercise")
        verdict, stage = r.get("verdict"), r.get("stage")
        want = expect.get(ex)
        if want in ("build", "policy"):
            # Decided before anything runs, so it must end exactly there.
            ok = verdict == "failed" and stage == want
        else:
            ok = verdict == "passed"  # built and through the policy stage
        if not ok:
            bad += 1
            got = "built" if verdict == "passed" else f"{verdict} at {stage}"
            print(f"{ex}: starter {got}, manifest says fails_at={want or '-'}: {r.get('headline')}")
    print(f"{len(reports)} starters built as their manifests say" if not bad else f"{bad} starters wrong")
    return 1 if bad else 0


def build_variant(binary, mid, name, expect, words):
    """The problem with one variant's build, or None when it ended as its manifest says."""
    proc = subprocess.run([binary, "build", mid, "--variant", name, "--json"], capture_output=True, text=True)
    try:
        doc = json.loads(proc.stdout)
        r = doc["reports"][0] if isinstance(doc, dict) else doc[0]
    except (ValueError, KeyError, IndexError):
        return f"no JSON report (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    verdict, stage = r.get("verdict"), r.get("stage")
    text_all = json.dumps(r).lower()
    if expect in ("build", "policy"):
        ok = verdict == "failed" and stage == expect
        missing = [w for w in words if w.lower() not in text_all]
        if ok and missing:
            return f"the report lacks {missing}"
        return None if ok else f"ended {verdict} at {stage}: {r.get('headline')}"
    if verdict == "passed":
        return None
    return f"expected to build and pass policy (expect {expect}), ended {verdict} at {stage}: {r.get('headline')}"


def check_variants(root, binary, prefix=""):
    """Builds run side by side, one per CPU (MGPU_BUILD_JOBS overrides): the build cache takes
    concurrent writers (each artifact is written aside and renamed into place), and nvcc uses
    one core. Problems print in manifest order."""
    bad = 0
    jobs = []
    for m in sorted(pathlib.Path(root).glob("exercises/*/*/exercise.yaml")):
        text = m.read_text()
        mid, kind, _ = manifest_fields(text)
        if kind not in ("cuda", "c") or not mid.startswith(prefix):
            continue
        entries = variant_entries(text)
        folders = sorted(p.name for p in (m.parent / "variants").glob("*") if p.is_dir())
        if sorted(e[0] for e in entries) != folders:
            bad += 1
            print(f"{mid}: variants read from the manifest {sorted(e[0] for e in entries)} do not match the folders {folders}")
            continue
        jobs += [(mid, name, expect, words) for name, expect, words in entries]
    workers = int(os.environ.get("MGPU_BUILD_JOBS") or 0) or os.cpu_count() or 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        results = pool.map(lambda j: build_variant(binary, *j), jobs)
        for (mid, name, _, _), problem in zip(jobs, results):
            if problem:
                bad += 1
                print(f"{mid} variant {name}: {problem}")
    checked = len(jobs)
    print(f"{checked} cuda/c variants built as their manifests say ({workers} at a time)" if not bad else f"{bad} of {checked} variant builds wrong")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--variants":
        sys.exit(check_variants(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else ""))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(check_starters(sys.argv[1], sys.argv[2]))
