"""Lab build times and the world's figures, as JSON: ``python benchmarks/lab_build.py [tiny|small]``.

Builds into a fresh temporary cache (no reuse), so the times are real. Floors: tiny within about a
minute on two idle cores, small within five minutes; the correct drafter's accept length at 3
steps in 2.3-3.2 (small); broken <= 0.7x correct; shifted >= 0.9x correct;
|predicted - measured| <= 10 %.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time


def main(size: str = "tiny") -> dict:
    from workbench.lab.build import build

    with tempfile.TemporaryDirectory() as root:
        t = time.time()
        m = build(size, root=root)
        wall = time.time() - t
    al = m["accept_length"]
    meas = al["measured"]
    out = {
        "size": size, "wall_s": round(wall, 1), "stages_s": m["timings"], "acc": m["acc"],
        "cond": m["heldout"]["cond"], "accept_length": meas, "predicted": al["predicted"],
        "broken_ratio": round(meas["draft_broken"] / meas["draft"], 3),
        "shifted_ratio": round(meas["draft_shifted"] / meas["draft"], 3),
        "predicted_error": round(abs(al["predicted"] - meas["draft"]) / meas["draft"], 3),
        "floors": {"wall_s": 75 if size == "tiny" else 300, "broken_ratio_max": 0.7, "shifted_ratio_min": 0.9,
                   "predicted_error_max": 0.10, "accept_length_band": [2.3, 3.2]},
    }
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tiny")
