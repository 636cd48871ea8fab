"""Alignment at Kimi-K2.5 scale: 3 training slots against 62 candidate points (embedding + the
61 layer outputs), 2048 tokens, hidden 7168, bf16 on disk (1.82 GB of candidates).

Writes a SpecForge training file and a layer stack (safetensors, written one tensor at a time)
into a temporary folder, drops the stack from the page cache and reads it once through the
readers' mapping (as an alignment of a capture on disk would; ``--warm`` leaves it as written),
then measures in the same run the physical floors for those bytes:

- ``page_cache``: one all-thread pass (read and add) over the candidate bytes of the layer
  stack, freshly memory-mapped from the page cache as the readers map it (what any reader of the
  file must pay), the fastest of the passes made before the paths and before each repetition of
  them (``page_cache_runs_s``); every pass and every alignment starts on a quiet machine
  (``quiet``: torch's threads no longer spinning);
- ``screen_compute``: the CPU screen's arithmetic for those bytes, from one thread's rate on rows
  that stay in cache times the threads (``ratio_cpu_floor``: the CPU path against the larger of
  this and the page-cache pass);
- ``pinned_h2d``: the bytes over the bus from pinned host memory (CUDA only);
- ``device_memory``: the bytes read once at the device's copy bandwidth (CUDA only);

and the alignment (``workbench.hidden.align.align``) on each of ``--devices`` (default: auto, and
cpu and cuda where CUDA exists), the fastest of ``--repeat`` runs each, with the peak growth of
resident memory sampled every 2 ms, after one alignment before the clock (``first_run_s``: the
process's first compiles or loads the kernels). Goals checked: auto <= 1.3 x max(page cache,
pinned H2D) with CUDA, auto never slower than cpu, cpu <= 1.5 x the page-cache pass
(``--threads`` sets the CPU threads: run it with 2 and with all cores).

Prints one JSON line. Needs torch, numpy, safetensors and the workbench package only.
    python benchmarks/align_bench.py [--devices auto,cpu,cuda] [--threads N] [--small] [--kernel K]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch


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
        return (self.peak - self.base) / 2**20


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
    torch.save(
        {
            "input_ids": ids,
            "loss_mask": torch.ones(tokens, dtype=torch.long),
            "hidden_state": slots["final"][None],
            "aux_hidden_state": aux,
        },
        rows / "data_0.ckpt",
    )
    slots.clear()  # the training copies are on disk now: free them before the timed runs
    del aux
    return rows / "data_0.ckpt", stack, nbytes


def page_cache_pass(path: Path, begin: int, end: int) -> float:
    """Seconds of one all-thread read-and-add pass over bytes ``begin..end`` of ``path``, mapped
    afresh as the alignment's readers map (``workbench.hidden.mapping``): page-cache pages faulted
    in, as a reader must."""
    from workbench.hidden.mapping import map_range

    t0 = time.perf_counter()
    buf = map_range(path, begin, end)
    t = torch.frombuffer(buf, dtype=torch.int64, count=(end - begin) // 8)
    int(t.sum())
    dt = time.perf_counter() - t0
    del t, buf
    quiet()
    return dt


QUIET_S = 0.25  # torch's OpenMP threads spin-wait this long at most after a parallel operation


def quiet() -> None:
    """Outside the timings, let the machine go quiet: the OpenMP threads of torch's last parallel
    operation (the page-cache pass's sum) stop spinning, so the pass or alignment timed next pays
    nothing of the one before (an alignment right after the pass ran measurably slower, as a
    passive OpenMP wait policy confirmed)."""
    time.sleep(QUIET_S)


def screen_compute(hidden: int, slots: int = 3, reps: int = 5) -> tuple[float, str] | None:
    """(bytes of bf16 candidates one thread screens per second, the kernel) with every row in cache:
    4 candidate rows and ``slots`` slot rows, each read again for 1024 tokens (the token lists
    repeat 4 rows), so the time is the kernel's arithmetic and not memory. ``bytes / (this x threads)``
    is the screen's compute floor: where it is above the page-cache pass, the CPU path is bound by
    arithmetic, not by the bytes (a CPU without AVX-512 on 2 cores). None without the compiled
    kernels (no numba)."""
    try:
        from workbench.hidden import pairstats
    except ImportError:
        return None

    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(4, hidden, generator=g).bfloat16() for _ in range(slots)]
    ys = [torch.randn(4, hidden, generator=g).bfloat16() for _ in range(4)]
    rows = np.arange(1024) % 4
    ps = pairstats.PairStats(xs, rows, rows, threads=1)
    ys = [ps.prepare(y) for y in ys]
    ps.dots(ys)  # compiled (or loaded) before the clock
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        ps.dots(ys)
        best = min(best, time.perf_counter() - t0)
    return len(rows) * len(ys) * hidden * 2 / best, ps.kernel


def settle_page_cache(path: Path) -> dict:
    """The file as a read from disk leaves it in the page cache: written back, dropped, then read
    once through the readers' mapping (the folios a write left depend on how it was written).
    Returns how much of it the kernel mapped in 2 MB pieces (``FilePmdMapped`` while mapped)."""
    from workbench.hidden.mapping import map_range

    size = path.stat().st_size
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):  # (not on macOS: the pages stay as written)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    t0 = time.perf_counter()
    buf = map_range(path, 0, size)
    int(torch.frombuffer(buf, dtype=torch.uint8, count=size)[::4096].sum())
    read_s = time.perf_counter() - t0
    pmd = 0
    if os.path.exists("/proc/self/smaps_rollup"):
        with open("/proc/self/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("FilePmdMapped:"):
                    pmd = int(line.split()[1]) * 1024
    del buf
    return {"cold_read_s": round(read_s, 3), "pmd_mapped_fraction": round(pmd / size, 3)}


def pinned_h2d(nbytes: int, device: torch.device, chunk: int = 256 << 20) -> float:
    """Seconds to move ``nbytes`` from pinned host memory to the device (best of 5 of a chunk)."""
    from workbench.hidden.placement import measure_h2d_bps

    return nbytes / measure_h2d_bps(str(device), chunk, repeats=5)


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


def arguments(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", default=None, help="comma list of auto, cpu, cuda (default: auto,cpu[,cuda])")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    ap.add_argument("--small", action="store_true", help="a quick CPU-sized run (16 layers, 256 tokens, 1024 wide)")
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--dir", help="generate here instead of a temporary folder (kept; reused when present)")
    ap.add_argument("--abs-stats", default="top", choices=["top", "all"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per device (the fastest is reported)")
    ap.add_argument("--block", type=int, help="tokens per block of the CPU kernels (default: the engine's)")
    ap.add_argument("--group", type=int, help="candidates per pass of the CPU kernels (default: the engine's)")
    ap.add_argument(
        "--kernel",
        choices=["bf16-fma", "fma"],
        help="the CPU screen for bf16 data (default: bf16-fma)",
    )
    ap.add_argument(
        "--warm",
        dest="cold",
        action="store_false",
        help="leave the page cache as writing the capture left it (default: drop it and read "
        "the capture once, as from disk)",
    )
    args = ap.parse_args(argv)
    if args.small:
        args.layers, args.tokens, args.hidden = 16, 256, 1024
    return args


def engine_settings(args: argparse.Namespace) -> None:
    """The engine's settings the arguments override: threads, block, screen, group."""
    if args.threads:
        torch.set_num_threads(args.threads)
    from workbench.hidden import align as align_mod
    from workbench.hidden import pairstats

    if args.block:
        pairstats.BLOCK = args.block
    if args.kernel:
        pairstats.screen_kernel = lambda all_bf16: args.kernel if all_bf16 else "fma"
    if args.group:
        align_mod.CPU_GROUP = args.group


def compute_and_device_floors(hidden: int, nbytes: int, cuda: bool) -> dict:
    """The screen's arithmetic for the bytes and, with CUDA, the bus and the device's memory."""
    floors: dict = {}
    compute = screen_compute(hidden)
    if compute is not None:
        bps, kernel = compute
        floors.update(
            {
                "screen_compute_s": round(nbytes / (bps * torch.get_num_threads()), 4),
                "screen_compute_gbps_per_thread": round(bps / 1e9, 2),
                "screen_kernel": kernel,
            }
        )
    if cuda:
        dev = torch.device("cuda")
        torch.ones(1, device=dev).sum()
        torch.cuda.synchronize(dev)
        h2d = pinned_h2d(nbytes, dev)
        bw = copy_bandwidth(dev)
        floors.update(
            {
                "pinned_h2d_s": round(h2d, 4),
                "pinned_h2d_gbps": round(nbytes / h2d / 1e9, 1),
                "device_memory_s": round(nbytes / (2 * bw), 5),
                "device_memory_gbps": round(2 * bw / 1e9, 1),
                "gpu": torch.cuda.get_device_name(dev),
            }
        )
    return floors


class Stack(NamedTuple):
    """The capture on disk: the training file, the layer stack and its candidate bytes."""

    train: Any
    infer: Any
    path: Path
    begin: int
    end: int
    nbytes: int


def open_stack(train_path: Path, infer_path: Path) -> Stack:
    from workbench.hidden import open_capture
    from workbench.hidden.st_io import SafetensorsFile

    entries = sorted(SafetensorsFile(infer_path).entries.values(), key=lambda e: e.begin)
    return Stack(
        open_capture(train_path),
        open_capture(infer_path),
        infer_path,
        entries[0].begin,
        entries[-1].end,
        sum(e.end - e.begin for e in entries),
    )


def page_cache_passes(stack: Stack, n: int = 1) -> list[float]:
    """``n`` page-cache passes over the stack's candidate bytes."""
    return [page_cache_pass(stack.path, stack.begin, stack.end) for _ in range(n)]


def timed_runs(args: argparse.Namespace, devices: list[str], stack: Stack, pc: list[float]) -> dict:
    """Every path ``args.repeat`` times, interleaved (a noisy minute hits each alike, each after each
    other path), a page-cache pass before each round (into ``pc``), after one
    alignment before the clock: a process's first compiles (or loads) the kernels
    (``first_run_s``); timed, it took one of its runs from whichever path ran first."""
    from workbench.hidden.align import align

    t0 = time.perf_counter()
    align(stack.train, stack.infer, device=devices[0].split("-")[0], abs_stats=args.abs_stats)
    first_s = time.perf_counter() - t0
    quiet()
    times: dict[str, list[float]] = {d: [] for d in devices}
    growth: dict[str, list[float]] = {d: [] for d in devices}
    results = {}
    for rep in range(max(1, args.repeat)):
        order = devices[rep % len(devices) :] + devices[: rep % len(devices)]
        pc += page_cache_passes(stack)
        for d in order:
            if d == "auto-after" and rep == 0:
                continue  # once both paths ran
            with PeakRSS() as mem:
                t0 = time.perf_counter()
                results[d] = align(stack.train, stack.infer, device=d.split("-")[0], abs_stats=args.abs_stats)
                times[d].append(time.perf_counter() - t0)
            growth[d].append(mem.growth_mb)
            quiet()
    return {"first_s": first_s, "times": times, "growth": growth, "results": results}


def page_cache_floors(pc: list[float], nbytes: int) -> dict:
    floor = min(pc)
    return {
        "page_cache_s": round(floor, 4),
        "page_cache_gbps": round(nbytes / floor / 1e9, 1),
        "page_cache_runs_s": [round(t, 4) for t in pc],
    }


def path_report(d: str, timed: dict, floors: dict, slot_ids: list[int]) -> dict:
    """One path's figures: its fastest run, its runs, memory growth, timing and correctness, and its
    ratio to the page-cache floor (the CPU path's also to the larger of its two floors)."""
    res, times = timed["results"][d], timed["times"][d]
    best = [b.physical for b in res.best]
    run = {
        "seconds": round(min(times), 4),
        "runs_s": [round(t, 4) for t in times],
        "device": res.device,
        "precision": res.precision,
        "peak_rss_mb": round(max(timed["growth"][d]), 1),
        "timing": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.timing.items()},
        "correct": best == [f"out({k})" for k in slot_ids] and all(b.verdict == "match" for b in res.best),
    }
    if "page_cache_s" in floors:
        run["ratio_page_cache"] = round(min(times) / floors["page_cache_s"], 3)
    if res.timing.get("kernel"):  # the CPU path: against the larger of its two floors
        run["ratio_cpu_floor"] = round(min(times) / max(floors["page_cache_s"], floors.get("screen_compute_s", 0.0)), 3)
    return run


def goals(runs: dict, floors: dict, cuda: bool) -> dict:
    """The goals met (and the auto paths' ratio to the larger floor, into ``runs``)."""
    met = {}
    floor_max = max(floors["page_cache_s"], floors.get("pinned_h2d_s", 0.0))
    if "auto" in runs:
        runs["auto"]["ratio_floor"] = round(runs["auto"]["seconds"] / floor_max, 3)
        if cuda:
            met["auto_within_1.3x_floor"] = runs["auto"]["seconds"] <= 1.3 * floor_max
        if "auto-after" in runs:
            runs["auto-after"]["ratio_floor"] = round(runs["auto-after"]["seconds"] / floor_max, 3)
            met["auto_after_not_slower_than_cpu"] = runs["auto-after"]["seconds"] <= runs["cpu"]["seconds"] * 1.05
        if "cpu" in runs:
            met["auto_not_slower_than_cpu"] = runs["auto"]["seconds"] <= runs["cpu"]["seconds"] * 1.05
    if "cpu" in runs:
        met["cpu_within_1.5x_page_cache"] = runs["cpu"]["seconds"] <= 1.5 * floors["page_cache_s"]
    return met


def agreement(results: dict) -> dict:
    """Every path's rel_diff against the CPU's, per pair: the largest difference."""
    mats = {d: np.asarray(res.matrix, dtype=float) for d, res in results.items()}
    agree = {}
    for d in mats:
        if d != "cpu" and "cpu" in mats:
            a, b = mats[d], mats["cpu"]
            agree[f"{d}_vs_cpu_max_abs"] = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
    return agree


def main(argv=None) -> int:
    args = arguments(argv)
    engine_settings(args)
    cuda = torch.cuda.is_available()
    devices = (args.devices or ("auto,cpu,cuda" if cuda else "auto,cpu")).split(",")
    if "auto" in devices and "cpu" in devices and cuda and args.repeat >= 2:
        devices = [*devices, "auto-after"]  # once both paths ran: the choice from their measures
    from workbench.hidden import align as align_mod
    from workbench.hidden import pairstats

    n = args.layers
    slot_ids = [1, n // 2 - 1, n - 4]
    with contextlib.ExitStack() as cleanup:
        if args.dir:
            root = Path(args.dir)
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="align-bench-")))
        tg = time.perf_counter()
        train_path, infer_path = root / "rows_0-2000" / "data_0.ckpt", root / "infer.safetensors"
        if not (args.dir and train_path.exists() and infer_path.exists()):
            train_path, infer_path, _ = generate(root, n, args.tokens, args.hidden, slot_ids)
        gen_s = time.perf_counter() - tg
        page_cache = settle_page_cache(infer_path) if args.cold else {}
        stack = open_stack(train_path, infer_path)
        # the page-cache pass runs before the paths and again before each repetition of them, so a
        # host whose memory bandwidth drifts during the run gives the floor the same chances as the
        # paths (the first of three is left out)
        pc = page_cache_passes(stack, 3)[1:]
        floors = compute_and_device_floors(args.hidden, stack.nbytes, cuda)
        timed = timed_runs(args, devices, stack, pc)
        floors.update(page_cache_floors(pc, stack.nbytes))
        runs = {d: path_report(d, timed, floors, slot_ids) for d in devices}
        met = goals(runs, floors, cuda)
        agree = agreement(timed["results"])
        out = {
            "agreement": agree,
            "bytes": int(stack.nbytes),
            "slots": 3,
            "candidates": n + 1,
            "tokens": args.tokens,
            "hidden": args.hidden,
            "threads": torch.get_num_threads(),
            "block": pairstats.BLOCK,
            "cpus": os.cpu_count(),
            "floors": floors,
            "runs": runs,
            "goals": met,
            "generate_s": round(gen_s, 2),
            "first_run_s": round(timed["first_s"], 3),
            "page_cache": page_cache,
            "group": align_mod.CPU_GROUP,
            "correct": all(r["correct"] for r in runs.values()) and all(v < 1e-4 for v in agree.values()),
        }
    print(json.dumps(out))
    return 0 if out["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
