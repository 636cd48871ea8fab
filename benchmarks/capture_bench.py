"""The static doctor against the capture tables: how long a run takes once the tables are loaded.

Prints JSON: loading each engine's table (every release read), the first doctor run of the process
(its releases unpacked from the table once) and warm runs on published drafts under both engines,
next to their floor measured in the same run: reading and parsing the run's own input files (the
draft's and the target's config.json and the draft's safetensors header), which any doctor must do.
The target: a warm run stays under one second.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "doctor" / "corpus"
CASES = {
    "kimi_broken@sglang==0.5.12.post1": (
        ROOT / "sample_configs" / "drafts" / "kimi-k2.5-eagle3-broken",
        ROOT / "sample_configs" / "targets" / "kimi-k2.5",
        "sglang==0.5.12.post1",
    ),
    "eagle3.1_qwen3_30b@vllm==0.20.0": (
        CORPUS / "drafts" / "specforge-qwen3-30b-a3b-eagle3.1",
        CORPUS / "targets" / "qwen3-30b-a3b.json",
        "vllm==0.20.0",
    ),
    "kimi@sglang==0.5.23": (
        CORPUS / "drafts" / "specforge-kimi-k2.5",
        ROOT / "sample_configs" / "targets" / "kimi-k2.5",
        "sglang==0.5.23",
    ),
}
TARGET_S = 1.0
RUNS = 15


def timed(fn, runs=RUNS):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median_ms": round(statistics.median(times) * 1000, 2), "best_ms": round(min(times) * 1000, 2)}


def floor(draft: Path, target: Path) -> None:
    """Reading the run's inputs: both config.json files and the draft's safetensors header."""
    for p in (draft / "config.json", target / "config.json" if target.is_dir() else target):
        json.loads(p.read_text())
    st = draft / "model.safetensors"
    if st.is_file():
        with st.open("rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            json.loads(fh.read(n))


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


def main() -> int:
    from workbench.engine import table

    t0 = time.perf_counter()
    sizes = {e: len(table.load(e)) for e in ("sglang", "vllm")}
    load_ms = round((time.perf_counter() - t0) * 1000, 2)
    from workbench.doctor import run_static

    first = {}
    t0 = time.perf_counter()
    d, t, e = next(iter(CASES.values()))
    run_static(d, t, engine=e)
    first["first_run_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    figures = {}
    for name, (d, t, e) in CASES.items():
        figures[name] = {
            "doctor": timed(lambda d=d, t=t, e=e: run_static(d, t, engine=e, algorithm="EAGLE3")),
            "floor_inputs": timed(lambda d=d, t=t: floor(d, t)),
        }
    worst = max(f["doctor"]["median_ms"] for f in figures.values())
    ok = worst <= TARGET_S * 1000
    import os
    import platform

    out = {
        "what": "python benchmarks/capture_bench.py",
        "host": f"{_cpu()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python "
        f"{platform.python_version()}; load average at the end {os.getloadavg()[0]:.1f} (a shared machine)",
        "tables": {"releases": sizes, "load_ms": load_ms},
        "first": first,
        "warm": figures,
        "target_ms": TARGET_S * 1000,
        "ok": ok,
    }
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
