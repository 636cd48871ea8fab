"""Alignment at Kimi-K2.5 scale: 3 training slots against 62 candidate points (embedding + the
61 layer outputs), 2048 tokens, hidden 7168, bf16 on disk.

Writes a SpecForge training file and a layer stack (safetensors, written one tensor at a time)
into a temporary folder, then times in the same run:

- floor: one streaming read-and-reduce pass over the same candidate bytes through the same reader
  (each tensor loaded and summed; on --device cuda moved to the device and summed there), the
  fastest of a pass before and after each alignment run; on a CPU each time both with torch's
  threads and with one thread (on a loaded machine one thread often reads faster);
- the alignment itself (``workbench.hidden.align.align``), the fastest of --repeat runs, with the
  peak growth of resident memory sampled every 2 ms while it runs (the largest growth of any run).

Prints one JSON line: seconds, floor_seconds, ratio, bytes, peak_rss_mb (+ context). With
--device cuda also the device-to-device copy bandwidth measured here and the fraction of it the
alignment's on-device work achieved (candidate bytes / device time).

Needs torch, numpy, safetensors and the workbench package only.
    python benchmarks/align_bench.py [--device cuda] [--small]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples resident memory in a thread; ``peak - base`` is the growth while it ran."""

    def __init__(self, every: float = 0.002):
        self.every, self.base, self.peak = every, 0, 0
        self._stop = threading.Event()

    def __enter__(self):
        self.base = self.peak = rss_bytes()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.every)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / 2 ** 20


def generate(root: Path, layers: int, tokens: int, hidden: int, slot_ids, seed: int = 0):
    """A residual stream that drifts a little per layer (adjacent rel_diff ~0.01-0.03), the
    training slots taken from it with a small cross-engine perturbation."""
    from workbench.hidden.st_io import write_streaming

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 160000, (tokens,), generator=g)
    names = ["embed"] + [f"layers.{k}" for k in range(layers)]
    specs = [(n, "bfloat16", (tokens, hidden)) for n in names]
    slots = {}

    def stream():
        x = torch.randn(tokens, hidden, generator=g) * 0.05
        yield x.bfloat16()
        for k in range(layers):
            x = x + torch.randn(tokens, hidden, generator=g) * (0.1 + 0.002 * k)
            if k in slot_ids:
                noise = torch.randn(tokens, hidden, generator=g) * 2e-3 * x.std()
                slots[k] = (x + noise).bfloat16()
            if k == layers - 1:
                slots["final"] = (x / x.pow(2).mean(-1, keepdim=True).sqrt()).bfloat16()
            yield x.bfloat16()

    stack = root / "infer.safetensors"
    nbytes = write_streaming(stack, specs, stream(), metadata={"token_ids": json.dumps(ids.tolist())})
    rows = root / "rows_0-2000"
    rows.mkdir()
    aux = torch.cat([slots[k] for k in slot_ids], dim=-1)[None]
    torch.save({"input_ids": ids, "loss_mask": torch.ones(tokens, dtype=torch.long),
                "hidden_state": slots["final"][None], "aux_hidden_state": aux}, rows / "data_0.ckpt")
    del slots, aux
    return rows / "data_0.ckpt", stack, nbytes


def floor_pass(infer, hidden: int, device: torch.device, threads: int = 0) -> float:
    """One pass: every candidate loaded through the reader and summed. ``threads`` (CPU) sets
    torch's thread count for the pass (0: as it is)."""
    old = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        t0 = time.perf_counter()
        acc = []
        for cand in infer.candidates(hidden):
            t = cand.load()
            if device.type == "cuda":
                t = t.to(device)
            acc.append(t.sum())
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        float(sum(a.float() for a in acc))
        return time.perf_counter() - t0
    finally:
        torch.set_num_threads(old)


def floor_passes(infer, hidden: int, device: torch.device) -> dict:
    """The floor on a CPU is the faster of a single-threaded pass and one with torch's threads: on
    a busy machine one thread can read faster than several (a reduction waits for its slowest
    thread), and the floor is the fastest honest read."""
    out = {"default": floor_pass(infer, hidden, device)}
    if device.type == "cpu" and torch.get_num_threads() > 1:
        out["1"] = floor_pass(infer, hidden, device, threads=1)
    return out


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device-to-device copy: bytes copied per second (each byte read once and written once)."""
    a = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        b.copy_(a)
    end.record()
    torch.cuda.synchronize(device)
    return nbytes * reps / (start.elapsed_time(end) / 1000.0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    ap.add_argument("--small", action="store_true", help="a quick CPU-sized run (16 layers, 256 tokens, 1024 wide)")
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--dir", help="generate here instead of a temporary folder (kept; reused when present)")
    ap.add_argument("--abs-stats", default="top", choices=["top", "all"])
    ap.add_argument("--repeat", type=int, default=2, help="alignment runs (the fastest is reported; the floor "
                                                           "is the fastest of a pass before and after each)")
    args = ap.parse_args(argv)
    if args.small:
        args.layers, args.tokens, args.hidden = 16, 256, 1024

    from workbench.hidden import open_capture
    from workbench.hidden.align import align, pick_device
    from workbench.hidden.st_io import SafetensorsFile

    device = pick_device(args.device)
    n = args.layers
    slot_ids = [1, n // 2 - 1, n - 4]
    tmp = None
    if args.dir:
        root = Path(args.dir)
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="align-bench-")
        root = Path(tmp.name)
    try:
        tg = time.perf_counter()
        train_path, infer_path = root / "rows_0-2000" / "data_0.ckpt", root / "infer.safetensors"
        if args.dir and train_path.exists() and infer_path.exists():
            nbytes = sum(e.end - e.begin for e in SafetensorsFile(infer_path).entries.values())
        else:
            train_path, infer_path, nbytes = generate(root, n, args.tokens, args.hidden, slot_ids)
        gen_s = time.perf_counter() - tg
        train = open_capture(train_path)
        infer = open_capture(infer_path)
        if device.type == "cuda":  # start the context and kernels outside the timed parts
            torch.ones(1, device=device).sum()
            torch.cuda.synchronize(device)
        floors = [floor_passes(infer, args.hidden, device)]
        times, growth = [], []
        for _ in range(max(1, args.repeat)):
            with PeakRSS() as mem:
                t0 = time.perf_counter()
                res = align(train, infer, device=str(device), abs_stats=args.abs_stats)
                times.append(time.perf_counter() - t0)
            growth.append(mem.growth_mb)
            floors.append(floor_passes(infer, args.hidden, device))
        seconds, floor = min(times), min(min(f.values()) for f in floors)
        cand = [c for c in infer.candidates(args.hidden)]
        out = {
            "seconds": round(seconds, 4), "floor_seconds": round(floor, 4),
            "ratio": round(seconds / floor, 3), "bytes": int(nbytes), "peak_rss_mb": round(max(growth), 1),
            "device": str(device), "precision": res.precision, "slots": len(res.rows),
            "candidates": len(cand), "tokens": args.tokens, "hidden": args.hidden,
            "align_runs_s": [round(t, 4) for t in times],
            "floor_runs_s": [{k: round(v, 4) for k, v in f.items()} for f in floors],
            "timing": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.timing.items()},
            "best": [b.physical for b in res.best], "verdicts": [b.verdict for b in res.best],
            "expected": [f"out({k})" for k in slot_ids], "generate_s": round(gen_s, 2),
            "threads": torch.get_num_threads(),
        }
        out["correct"] = out["best"] == out["expected"] and all(v == "match" for v in out["verdicts"])
        if device.type == "cuda":
            bw = copy_bandwidth(device)
            dev_s = res.timing.get("device_s") or float("nan")
            achieved = res.timing["candidate_bytes"] / dev_s
            out.update({"d2d_copy_gbps": round(bw / 1e9, 1), "device_gbps": round(achieved / 1e9, 1),
                        "device_fraction_of_copy": round(achieved / bw, 3),
                        "gpu": torch.cuda.get_device_name(device)})
        print(json.dumps(out))
        return 0
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    sys.exit(main())
