"""Doctor and config-history timings.

Prints JSON: reading the header of a safetensors file with 2,000 tensors (by hand, no weight data),
a full static doctor run on the sample Kimi-K2.5 draft (all engines compared), and a config
``set`` + ``revert`` round trip (each with fsync) on the journal; each with its floor.
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from workbench.api import Workbench  # noqa: E402
from workbench.doctor import run_static  # noqa: E402
from workbench.draftconfig import read_header, write_safetensors  # noqa: E402

FLOORS_MS = {"header_2000_tensors": 50.0, "doctor_kimi": 100.0, "config_set_and_revert": 150.0}
RUNS = 9


def timed(fn, runs=RUNS):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "best_ms": round(min(times), 2)}


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="doctor-bench-"))
    try:
        st = tmp / "many.safetensors"
        write_safetensors(st, {f"layers.{i}.w": np.zeros(4, np.float32) for i in range(2000)})
        draft = tmp / "draft"
        shutil.copytree(ROOT / "sample_configs" / "drafts" / "kimi-k2.5-eagle3-broken", draft)
        target = ROOT / "sample_configs" / "targets" / "kimi-k2.5"
        wb = Workbench.open(tmp / "ws")
        cfg = str(draft / "config.json")
        wb.config_track(cfg)

        def set_and_revert():
            wb.config_set(cfg, {"eagle_config.eagle_aux_hidden_state_layer_ids": [2, 30, 58]})
            wb.config_revert(cfg, 1, confirm=True)

        figures = {
            "header_2000_tensors": timed(lambda: read_header(st)),
            "doctor_kimi": timed(
                lambda: run_static(draft, target, engine="sglang==0.5.12.post1", trained_layers=[2, 30, 58])
            ),
            "config_set_and_revert": timed(set_and_revert),
        }
        wb.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = all(figures[k]["median_ms"] <= FLOORS_MS[k] for k in FLOORS_MS)
    print(json.dumps({"figures": figures, "floors_ms": FLOORS_MS, "ok": ok}, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
