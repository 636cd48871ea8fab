"""Time a predictor sweep over 10,000+ (steps, topk, draft_tokens) configurations.

Prints JSON: the configuration count, the sweep time (median and best of several runs), the time
to build its JSON table, the same sweep through ``Workbench.predict_sweep`` (journaled), and the floor.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench import predict as P

FLOOR_MS = 50.0
RUNS = 15
STEPS = range(1, 25)  # 1..24 steps
TOPKS = range(1, 9)  # chains and trees of width 2..8
HITS = [
    [0.74, 0.84, 0.89, 0.92, 0.94, 0.955, 0.965, 0.972],  # cumulative top-1..top-8 per depth
    [0.71, 0.82, 0.87, 0.90, 0.92, 0.935, 0.945, 0.952],
    [0.69, 0.80, 0.85, 0.88, 0.90, 0.915, 0.925, 0.932],
]
VERIFY = {2: 20.0, 4: 20.8, 8: 22.1, 16: 24.9, 32: 30.5, 64: 41.0, 128: 63.0, 193: 86.0}


def run_once():
    return P.sweep(
        "acc",
        [0.75, 0.72, 0.70, 0.68],
        verify_ms=VERIFY,
        draft_ms=1.1,
        baseline_ms=19.0,
        steps=STEPS,
        topks=TOPKS,
        topk_hits=HITS,
    )


def timed(fn, runs=RUNS):
    times = []
    out = None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return out, times


def main() -> int:
    run_once()  # warm caches
    sweep, times = timed(run_once)
    _, dict_times = timed(sweep.to_dict, runs=5)
    from workbench.api import Workbench

    with tempfile.TemporaryDirectory() as ws, Workbench.open(ws) as wb:
        _, api_times = timed(
            lambda: wb.predict_sweep(
                acc=[0.75, 0.72, 0.70, 0.68],
                verify_ms=VERIFY,
                draft_ms=1.1,
                baseline_ms=19.0,
                steps=STEPS,
                topks=TOPKS,
                topk_hits=HITS,
            ),
            runs=5,
        )
    median = statistics.median(times)
    best = sweep.best
    print(
        json.dumps(
            {
                "benchmark": "predict_sweep",
                "configurations": len(sweep),
                "sweep_ms_median": round(median, 2),
                "sweep_ms_best": round(min(times), 2),
                "to_dict_ms_median": round(statistics.median(dict_times), 2),
                "api_sweep_ms_median": round(statistics.median(api_times), 2),
                "floor_ms": FLOOR_MS,
                "ok": median <= FLOOR_MS and len(sweep) >= 10_000,
                "best": {
                    "steps": best.steps,
                    "topk": best.topk,
                    "draft_tokens": best.draft_tokens,
                    "tokens_per_s": round(best.tokens_per_s, 2),
                },
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
