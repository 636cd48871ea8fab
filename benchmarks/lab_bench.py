"""Lab builds, timed, and each world's figures against the lab's calibration bands.

    python benchmarks/lab_bench.py [--jobs N] [--dir DIR] [--sizes tiny,small] [--seeds 1234,1235]
                                   [--threads 1,2] [SPEC.json]

Builds into a fresh folder (no cache reuse), so the times are real. SPEC is a JSON list of
``{"name", "size", "overrides"}`` (setting overrides, e.g. ``{"seed": 1239}``); without it the grid
sizes x seeds x threads is built (default: ``tiny`` and ``small`` as they are).
Each build runs in its own process pinned to ``threads`` cores (at least one), so a many-core host
gives the same per-world figures as a two-core machine, only several at once. Prints one JSON object:
``{"worlds": [...], "bands": {...}, "build_seconds_max": {...}}``; each world carries its timings
(wall and CPU seconds, the load average when it ended), seed asked and used, retries, acc_0..k,
accept lengths (correct, broken, shifted), the demo's recovery, and which bands it meets.
The floor of a build's time is its CPU seconds over its cores: ``cpu_s / threads`` is printed as
``floor_s`` (what the build takes on idle cores if nothing but torch's kernels ran).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.lab import calibration as K  # noqa: E402  (pure Python)

# the goals, on two idle cores
BUILD_SECONDS_MAX = {"tiny": 45, "small": 75}

CHILD = """
import json, os, sys
os.sched_setaffinity(0, {cpus})
from workbench.lab.build import build
m = build({size!r}, root={root!r}, force=True, **json.loads({overrides!r}))
print(json.dumps({{"dir": m["dir"]}}))
"""


def summarize(name: str, manifest_dir: Path) -> dict:
    m = json.loads((manifest_dir / "lab.json").read_text())
    cal = m["calibration"]
    fig = cal["figures"]
    s = m["settings"]
    return {
        "name": name,
        "size": m["size"],
        "hash": m["hash"],
        "seed": cal["seed"],
        "seed_used": cal["seed_used"],
        "retries": cal["retries"],
        "ok": cal["ok"],
        "attempts": [{"seed": a["seed"], "misses": a["misses"], "seconds": a["seconds"]} for a in cal["attempts"]],
        "threads": s["threads"],
        "machine": m["machine"],
        "timings": m["timings"],
        "floor_s": round(m["timings"]["cpu"] / max(1, s["threads"]), 1),
        "drafter_steps": m["drafter_training"]["steps"],
        "acc": m["heldout"]["acc"][: s["ttt_steps"]],
        "cond": m["heldout"]["cond"],
        "accept_length": m["accept_length"]["measured"],
        "predicted": m["accept_length"]["predicted"],
        "demo": m["demo"]["measured"],
        "figures": fig,
        "in_band": cal["in_band"],
        "layers": m["layers"],
        "build_seconds_ok": m["timings"]["total"] <= BUILD_SECONDS_MAX.get(m["size"], 75),
    }


def grid(args) -> list:
    if args.spec:
        return json.loads(Path(args.spec).read_text())
    out = []
    for size in args.sizes.split(","):
        for seed in [x for x in args.seeds.split(",") if x]:
            for th in [x for x in args.threads.split(",") if x]:
                ov = {"threads": int(th)} | ({"seed": int(seed)} if seed != "default" else {})
                out.append({"name": f"{size}-s{seed}-t{th}", "size": size, "overrides": ov})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", nargs="?")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--dir", default=None)
    ap.add_argument("--sizes", default="tiny,small")
    ap.add_argument("--seeds", default="default", help="comma-separated seeds ('default': the size's)")
    ap.add_argument("--threads", default="2", help="comma-separated torch thread counts")
    ap.add_argument("--cpus", type=int, default=2, help="cores each build is pinned to")
    args = ap.parse_args(argv)
    specs = grid(args)
    root = Path(args.dir or tempfile.mkdtemp(prefix="lab-calibrate-"))
    ncpu = os.cpu_count() or 2
    pending = list(enumerate(specs))
    running: dict = {}
    results: list = [None] * len(specs)
    c = max(1, args.cpus)
    free = [[(c * i + j) % ncpu for j in range(c)] for i in range(args.jobs)]
    while pending or running:
        while pending and free:
            i, spec = pending.pop(0)
            cpus = free.pop(0)
            wroot = root / spec["name"]
            code = CHILD.format(
                cpus=set(cpus),
                size=spec.get("size", "tiny"),
                root=str(wroot),
                overrides=json.dumps(spec.get("overrides", {})),
            )
            root.mkdir(parents=True, exist_ok=True)
            with open(root / f"{spec['name']}.log", "w") as log:  # the child's stderr, kept
                p = subprocess.Popen(
                    [sys.executable, "-c", code],
                    cwd=str(ROOT),
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                )
            running[p] = (i, spec, cpus, time.time())
        time.sleep(1.0)
        for p in [p for p in running if p.poll() is not None]:
            i, spec, cpus, t0 = running.pop(p)
            free.append(cpus)
            out, _ = p.communicate()
            if p.returncode != 0:
                results[i] = {
                    "name": spec["name"],
                    "error": f"exit {p.returncode}",
                    "log": str(root / f"{spec['name']}.log"),
                }
            else:
                d = Path(json.loads(out.strip().splitlines()[-1])["dir"])
                results[i] = summarize(spec["name"], d)
                results[i]["overrides"] = spec.get("overrides", {})
            results[i]["wall_s"] = round(time.time() - t0, 1)
            results[i]["load_end"] = round(os.getloadavg()[0], 2)
            results[i]["cpus"] = cpus
            print(json.dumps(results[i]), file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "worlds": results,
                "bands": K.bands(),
                "build_seconds_max": BUILD_SECONDS_MAX,
                "all_in_band": all(r.get("ok") for r in results),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
