"""The CPU alignment's fast paths against what would stand in for each, whole alignments interleaved.

align_bench.py's data (3 slots x 62 candidates x 2048 tokens x 7168, bf16, read once as from disk)
aligned on the CPU by each variant once per round, in an order that rotates every round, each round
after a page-cache pass over the candidate bytes (align_bench's floor, ``floor_ms``), every run on a
quiet machine (align_bench's ``quiet``). Each variant is aligned once before the clock (compiles).

  kernel      what the engine runs: the compiled bf16 screen on the gang, the sample differenced in pass
  fma         the compiled portable screen (fp32 per token, fused multiply-adds) for the same bf16 data
  pool        the engine's passes on a ThreadPoolExecutor instead of the gang
  nosample    no sample: every best pair differenced after the pass from its candidate kept mapped
  torch-bf16  no compiled kernels: torch's batched bf16 matmul screen (what a CPU without numba runs)
  torch-fp32  no compiled kernels: torch's fp32 matmul screen

``--baseline DIR`` adds an earlier version of the kernels (``DIR/pairstats.py``, with the ``team.py``
it imports beside it where it has one): ``base-default`` runs it as it chose for this CPU, ``base-K-gang``
and ``base-K-team`` its screen ``K`` on the gang or on numba's parallel layer (``--base-kernels``).

``paired_ratio_median_to_first`` is the median over rounds of a variant's time over the first
variant's in the same round: on a machine with other work, the ratios in one run are the figures.
Prints one JSON object.
    python benchmarks/align_paths_bench.py [--threads N] [--rounds R] [--budget-s S] [--variants a,b]
                                           [--dir D] [--small]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

VARIANTS = ("kernel", "fma", "pool", "nosample", "torch-bf16", "torch-fp32")


class _Pool:
    """A ThreadPoolExecutor with the gang's interface (the caller runs the first call)."""

    def __init__(self, n: int) -> None:
        self.ex = concurrent.futures.ThreadPoolExecutor(max(1, n - 1))

    def run(self, calls) -> None:
        futs = [self.ex.submit(c) for c in calls[1:]]
        calls[0]()
        for f in futs:
            f.result()


def arguments(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--budget-s", type=float, default=0.0, help="start no round after this many seconds (0: none)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--dir", help="generate here (kept; reused when present)")
    ap.add_argument("--small", action="store_true", help="16 layers, 256 tokens, 1024 wide")
    ap.add_argument("--baseline", help="a folder with an earlier pairstats.py (and its team.py)")
    ap.add_argument("--base-kernels", default="", help="comma list of the baseline's screens to run on each runner")
    args = ap.parse_args(argv)
    base = [f"base-{k}-{r}" for k in args.base_kernels.split(",") if k for r in ("gang", "team")]
    if args.baseline:
        args.variants += ",".join(["", "base-default", *base])
    unknown = {v for v in args.variants.split(",") if not v.startswith("base-")} - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}")
    return args


def load_baseline(folder: str):
    """The earlier kernels as a module of the package (their ``team`` too, where they import one)."""
    import importlib.util

    mods = []
    for name, alias in (("team.py", "workbench.hidden.team"), ("pairstats.py", "workbench.hidden._base_pairstats")):
        path = Path(folder) / name
        if not path.exists():
            continue
        spec = importlib.util.spec_from_file_location(alias, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[alias] = mod
        spec.loader.exec_module(mod)
        mods.append(mod)
    return mods[-1], (mods[0] if len(mods) == 2 else None)


def switcher(args: argparse.Namespace):
    """``use(name)``: sets the modules' state for variant ``name``; returns the screen to ask for."""
    from workbench.hidden import align as align_mod
    from workbench.hidden import pairstats

    pools: dict[int, _Pool] = {}
    real = (pairstats.gang, pairstats.screen_kernel, align_mod.SAMPLE_TOKENS, align_mod._pairstats, align_mod._compiled)
    base, team = load_baseline(args.baseline) if args.baseline else (None, None)
    base_real = (base.screen_kernel, team.ready if team else None) if base else None

    def use(name: str) -> str:
        """Set the module state for ``name``; the screen ``align`` is asked for."""
        pairstats.gang, pairstats.screen_kernel, align_mod.SAMPLE_TOKENS, align_mod._pairstats, align_mod._compiled = (
            real
        )
        if name.startswith("base-"):
            base.screen_kernel = base_real[0]
            if team:
                team.ready = base_real[1]
            align_mod._pairstats, align_mod._compiled = (lambda: base), (lambda m: True)
            if name != "base-default":
                kernel, runner = name[5:].rsplit("-", 1)
                base.screen_kernel = lambda all_bf16: kernel if all_bf16 else "fma"
                if team and runner == "gang":
                    team.ready = lambda: False
        elif name == "fma":
            pairstats.screen_kernel = lambda all_bf16: "fma"
        elif name == "pool":
            pairstats.gang = lambda n: pools.setdefault(n, _Pool(n))
        elif name == "nosample":
            align_mod.SAMPLE_TOKENS = 1 << 40  # never 4 x this many tokens: no sample
        return {"torch-bf16": "bf16", "torch-fp32": "fp32"}.get(name, "kernel")

    return use


def main(argv=None) -> int:
    import align_bench as ab

    args = arguments(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from workbench.hidden import align as align_mod
    from workbench.hidden import open_capture
    from workbench.hidden.st_io import SafetensorsFile

    layers, tokens, hidden = (16, 256, 1024) if args.small else (61, 2048, 7168)
    slot_ids = [1, layers // 2 - 1, layers - 4]
    names = args.variants.split(",")
    use = switcher(args)

    with tempfile.TemporaryDirectory(prefix="align-paths-") as tmp:
        root = Path(args.dir or tmp)
        root.mkdir(parents=True, exist_ok=True)
        train_path, infer_path = root / "rows_0-2000" / "data_0.ckpt", root / "infer.safetensors"
        if not (train_path.exists() and infer_path.exists()):
            train_path, infer_path, _ = ab.generate(root, layers, tokens, hidden, slot_ids)
        page_cache = ab.settle_page_cache(infer_path)
        entries = sorted(SafetensorsFile(infer_path).entries.values(), key=lambda e: e.begin)
        begin, end = entries[0].begin, entries[-1].end
        nbytes = sum(e.end - e.begin for e in entries)
        train, infer = open_capture(train_path), open_capture(infer_path)

        def run(name: str):
            screen = use(name)
            t0 = time.perf_counter()
            res = align_mod.align(train, infer, device="cpu", screen=screen)
            dt = time.perf_counter() - t0
            ok = [b.physical for b in res.best] == [f"out({k})" for k in slot_ids] and all(
                b.verdict == "match" for b in res.best
            )
            return dt, res, ok

        load_before = os.getloadavg()
        first = {}
        for name in names:  # compile (or load) each before the clock
            t0 = time.perf_counter()
            run(name)
            first[name] = round(time.perf_counter() - t0, 3)
            ab.quiet()
        times: dict[str, list[float]] = {k: [] for k in names}
        parts: dict[str, list[dict]] = {k: [] for k in names}
        mats, floor, allok, kernels = {}, [], True, {}
        start = time.perf_counter()
        for rnd in range(args.rounds):
            if rnd and args.budget_s and time.perf_counter() - start > args.budget_s:
                break
            floor.append(ab.page_cache_pass(infer_path, begin, end))
            for name in names[rnd % len(names) :] + names[: rnd % len(names)]:
                dt, res, ok = run(name)
                allok &= ok
                times[name].append(dt)
                t = res.timing
                parts[name].append({k: float(t.get(k) or 0.0) for k in ("sample_s", "device_s", "refine_s")})
                kernels[name] = f"{t.get('kernel') or '-'} / {res.precision}"
                mats[name] = np.asarray(res.matrix, float)
                ab.quiet()
        use("kernel")
    out = {
        "cpu": ab_cpu_name(),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "rounds": len(floor),
        "bytes": int(nbytes),
        "page_cache": page_cache,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "first_run_s": first,
        **summary(names, times, parts, kernels, floor, mats),
        "correct": allok,
    }
    print(json.dumps(out))
    return 0 if allok else 1


def summary(names, times, parts, kernels, floor, mats) -> dict:
    """Each variant's figures and the ratios to the first variant, round by round."""
    r0 = times[names[0]]
    return {
        "floor_ms": [round(x * 1e3, 2) for x in floor],
        "floor_min_ms": round(min(floor) * 1e3, 2),
        "variants": {
            k: {
                "kernel": kernels[k],
                "min_ms": round(min(v) * 1e3, 2),
                "median_ms": round(statistics.median(v) * 1e3, 2),
                "runs_ms": [round(x * 1e3, 2) for x in v],
                "ratio_min_to_floor": round(min(v) / min(floor), 3),
                **{
                    f"{p[:-2]}_median_ms": round(statistics.median(x[p] for x in parts[k]) * 1e3, 2)
                    for p in ("device_s", "sample_s", "refine_s")
                },
            }
            for k, v in times.items()
        },
        "paired_ratio_median_to_first": {
            k: round(statistics.median(a / b for a, b in zip(times[k], r0, strict=True)), 3) for k in names
        },
        "max_abs_vs_first": {k: float(np.nanmax(np.abs(mats[k] - mats[names[0]]))) for k in names},
    }


def ab_cpu_name() -> str:
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
