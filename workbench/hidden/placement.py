"""Where the alignment runs, and how bytes reach the GPU.

``choose(device, tensors, nbytes)`` picks the CPU kernels or the GPU from where the candidate
bytes lie and from bandwidths measured on this machine (once per process):

- bytes already on a CUDA device: that device (nothing to move);
- no CUDA, or ``--device cpu``: the CPU;
- otherwise the estimated time of each path: the CPU path reads every byte once from host memory
  at ``min(CPU_SHARE x the host's read bandwidth, kernel rate x threads)``; the GPU path copies
  every byte into pinned memory and over the bus (``Stager``): the host copy and the DMA share the
  host's memory bandwidth, so their times add. The host's bandwidth is one all-core copy of
  buffers larger than the last-level cache (a pass over cached buffers, or a first call while the
  thread pool starts, reads anything from a fraction to several times the page cache's rate). The
  kernel rate is the table's until a CPU pass in this process measured it, and a path this process
  already ran is taken at its measured rate. Small inputs never start CUDA for the probe: below
  ``SMALL_BYTES`` the CPU wins on the start.

On the H200 host (16 cores, bf16 Kimi-sized input) the CPU kernels beat the staged GPU path: the
host copy into pinned memory costs more than the DMA, and both move host memory
(``benchmarks/results/align_h200_host*.json``). The GPU path wins where the bytes are already on
the device, or where the CPU kernels are slow (no numba, few cores against a fast bus).

``Stager`` copies host tensors to the device through a ring of pinned buffers: the host copy into
buffer k+1 overlaps the DMA out of buffer k (a side stream), and compute waits on per-copy events,
so reading, the bus and the kernels overlap.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from workbench.hidden.view import HiddenTensor

CPU_SHARE = 0.45  # the CPU kernels' share of the host's read bandwidth (see choose)
SMALL_BYTES = 256 << 20  # below this a CUDA start costs more than the whole CPU pass
# Bytes of bf16 candidates one core screens per second with the compiled kernels (S = 3 slots), a
# cautious figure below what the benchmark measured on the H200 host's Xeon and on 2-core Xeon and
# EPYC machines (``benchmarks/results/align_*.json``: bf16-fma, and fma's per-token fp32 conversion).
KERNEL_BPS = {"bf16-fma": 5.0e9, "fma": 1.5e9, "torch": 0.5e9}
STAGE_BYTES = 32 << 20  # one pinned buffer
STAGE_COUNT = 4  # buffers in the ring
COPY_PROBE_BYTES = 256 << 20  # host_copy_bps's buffers: past the last-level cache

_MEASURED: dict[tuple[object, ...], float] = {}


@dataclass
class Choice:
    device: str
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "reason": self.reason, **self.figures}


def _threads() -> int:
    import torch

    return max(1, torch.get_num_threads())


@contextmanager
def _torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op thread count set for a measurement, and put back after it."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def host_copy_bps(threads: int | None = None, nbytes: int = COPY_PROBE_BYTES) -> float:
    """Bytes per second of an all-thread host copy (what filling a pinned buffer costs), once.
    The buffers are larger than any last-level cache: a copy of cached buffers runs at about twice
    the rate a stream of candidate bytes through the pinned ring gets."""
    import torch

    threads = threads or _threads()
    key = ("copy", threads)
    if key not in _MEASURED:
        with _torch_threads(threads):
            a = torch.ones(nbytes, dtype=torch.uint8)
            b = torch.empty_like(a)
            b.copy_(a)
            best = min(_timed(lambda: b.copy_(a)) for _ in range(3))
        _MEASURED[key] = nbytes / best
    return _MEASURED[key]


def note_kernel_rate(kernel: str, threads: int, nbytes: int, seconds: float) -> None:
    """What a CPU pass achieved (bytes/s): later choices in this process use it, not the table."""
    if seconds > 0 and nbytes >= (64 << 20):
        _MEASURED[("kernel", kernel, threads)] = nbytes / seconds


def kernel_bps(kernel: str, threads: int) -> float:
    got = _MEASURED.get(("kernel", kernel, threads))
    return got if got else KERNEL_BPS.get(kernel, KERNEL_BPS["torch"]) * threads


def note_path_rate(path: str, threads: int, nbytes: int, seconds: float) -> None:
    """Candidate bytes per second a whole alignment achieved on ``path`` ("cpu", "cuda"); the best
    seen in this process (a first run's compile or CUDA start never counts against a path)."""
    if seconds > 0 and nbytes >= SMALL_BYTES:
        key = ("path", path, threads)
        _MEASURED[key] = max(_MEASURED.get(key, 0.0), nbytes / seconds)


def h2d_bps(device: str = "cuda", nbytes: int = 64 << 20) -> float:
    """Pinned host-to-device bytes per second, measured once per device."""
    key = ("h2d", device)
    if key not in _MEASURED:
        _MEASURED[key] = measure_h2d_bps(device, nbytes, repeats=3)
    return _MEASURED[key]


def measure_h2d_bps(device: str, nbytes: int, repeats: int) -> float:
    """Pinned host-to-device bytes per second: the best of ``repeats`` copies of ``nbytes`` after a
    warm-up (the benchmark's floor and the placement's estimate are this one measurement)."""
    import torch

    src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src, non_blocking=True)
        torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return nbytes / best


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def on_cuda(tensors: Iterable[HiddenTensor | torch.Tensor]) -> str | None:
    """The CUDA device the first tensor's data already lives on, or None (host memory). A tensor
    read from a file (``span``) is in host memory: it is not loaded to ask (that would make a
    mapping and give it back)."""
    for t in tensors:
        if getattr(t, "span", None) is not None:
            return None
        loaded = t.load() if hasattr(t, "load") else t
        dev = getattr(loaded, "device", None)
        return str(dev) if dev is not None and dev.type == "cuda" else None
    return None


def choose(
    device: str | None, tensors: Iterable[HiddenTensor | torch.Tensor], nbytes: int, kernel: str = "bf16-fma"
) -> Choice:
    """``device`` as asked (``None``/``auto``: the faster path for these bytes; see the module)."""
    import torch

    if device not in (None, "", "auto"):
        return Choice(device, "asked for")
    if not torch.cuda.is_available():
        return Choice("cpu", "no CUDA device")
    where = on_cuda(tensors)
    if where is not None:
        return Choice(where, "the data is already on the device")
    threads = _threads()
    cpu_rate = kernel_bps(kernel, threads)
    if nbytes < SMALL_BYTES and kernel != "torch":
        return Choice(
            "cpu",
            f"{nbytes / 1e6:.0f} MB: less than a CUDA start saves",
            {"bytes": nbytes, "cpu_kernel_gbps": round(cpu_rate / 1e9, 1)},
        )
    started = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]  # unannotated in torch
    t0 = time.perf_counter()
    bus = h2d_bps("cuda")
    start_s = 0.0 if started else time.perf_counter() - t0
    copy = host_copy_bps(threads)
    # The compiled kernels reach about half the host's read bandwidth when many cores share the
    # memory (slot rows re-read per group), and their per-core rate with few; the pinned ring's host
    # copy and the DMA share the host's memory bandwidth, so their times add (all measured on the
    # H200 host). A path this process already ran is taken at its measure.
    learned = {p: _MEASURED.get(("path", p, threads)) for p in ("cpu", "cuda")}
    cpu_s, gpu_s = estimate(nbytes, cpu_rate, copy, bus, learned)
    figures = {
        "bytes": nbytes,
        "host_copy_gbps": round(copy / 1e9, 1),
        "h2d_pinned_gbps": round(bus / 1e9, 1),
        "cpu_kernel_gbps": round(cpu_rate / 1e9, 1),
        "threads": threads,
        "cpu_est_s": round(cpu_s, 4),
        "gpu_est_s": round(gpu_s, 4),
        "cuda_start_s": round(start_s, 3),
        "measured_paths": [p for p, v in learned.items() if v],
    }
    if gpu_s < cpu_s:
        return Choice("cuda", f"GPU {gpu_s * 1e3:.0f} ms vs CPU {cpu_s * 1e3:.0f} ms (estimated)", figures)
    return Choice("cpu", f"CPU {cpu_s * 1e3:.0f} ms vs GPU {gpu_s * 1e3:.0f} ms (estimated)", figures)


def estimate(
    nbytes: int, cpu_rate: float, copy: float, bus: float, learned: dict[str, float | None] | None = None
) -> tuple[float, float]:
    """Seconds of the CPU path and of the staged GPU path for ``nbytes`` from host memory.

    The CPU kernels run at ``min(cpu_rate, CPU_SHARE x the host's read bandwidth)``, that bandwidth
    being twice the all-core ``copy`` rate (a copy reads and writes every byte). The GPU path copies
    every byte into the pinned ring (at the ``copy`` rate) and sends it over the ``bus``; both move
    host memory, so their times add. A path's ``learned`` rate wins over the model."""
    learned = learned or {}
    cpu_l, gpu_l = learned.get("cpu"), learned.get("cuda")
    cpu_s = nbytes / cpu_l if cpu_l else nbytes / min(CPU_SHARE * 2.0 * copy, cpu_rate)
    gpu_s = nbytes / gpu_l if gpu_l else nbytes / copy + nbytes / bus
    return cpu_s, gpu_s


# ------------------------------------------------------------------------------ pinned streaming
_RINGS: dict[tuple[int, str, int, int], list[torch.Tensor]] = {}


class Stager:
    """Host tensors onto ``device`` through a ring of pinned buffers, on a side stream.

    ``put(src, dst)`` copies a host tensor into the device tensor ``dst`` (same shape and dtype)
    in buffer-sized pieces and returns at once for the DMA; ``ready()`` makes the current stream
    wait for every copy put so far. A buffer is refilled only after its last DMA finished."""

    def __init__(self, device: str | torch.device, stage_bytes: int = STAGE_BYTES, count: int = STAGE_COUNT) -> None:
        import torch

        self.device = torch.device(device)
        key = (os.getpid(), str(self.device), stage_bytes, count)
        ring = _RINGS.get(key)
        if ring is None:  # pinned memory is slow to allocate: one ring per process and device
            ring = _RINGS[key] = [torch.empty(stage_bytes, dtype=torch.uint8, pin_memory=True) for _ in range(count)]
        self.ring = ring
        self.done: list[torch.cuda.Event | None] = [None] * count  # an event once its slot was used
        self.k = 0
        self.stream = torch.cuda.Stream(self.device)  # type: ignore[no-untyped-call]  # unannotated in torch
        # destinations were allocated on the current stream: copies start after its work so far
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        self.bytes = 0
        self.host_s = 0.0
        self.mode = "copy"

    def finish(self) -> None:
        """Wait for every copy put so far (the ring is free again)."""
        self.stream.synchronize()

    def put(self, src: torch.Tensor, dst: torch.Tensor) -> None:
        import torch

        if src.is_cuda:
            dst.copy_(src)
            return
        rows = src.shape[0]
        row_bytes = max(1, src[0].numel() * src.element_size()) if rows else 1
        step = max(1, self.ring[0].numel() // row_bytes)
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            k = self.k
            self.k = (k + 1) % len(self.ring)
            done = self.done[k]
            if done is not None:
                done.synchronize()  # its previous DMA has left the buffer
            n = (r1 - r0) * row_bytes
            buf = self.ring[k][:n].view(src.dtype).view((r1 - r0, *tuple(src.shape[1:])))
            t0 = time.perf_counter()
            buf.copy_(src[r0:r1])  # host copy (torch's threads), faults the pages in
            self.host_s += time.perf_counter() - t0
            with torch.cuda.stream(self.stream):
                dst[r0:r1].copy_(buf, non_blocking=True)
                ev = torch.cuda.Event()  # type: ignore[no-untyped-call]  # unannotated in torch
                ev.record(self.stream)
            self.done[k] = ev
            self.bytes += n

    def ready(self) -> None:
        import torch

        torch.cuda.current_stream(self.device).wait_stream(self.stream)
