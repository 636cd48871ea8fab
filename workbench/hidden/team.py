"""numba's parallel layer as the runner of the compiled passes, where it is a thread-safe one.

A pass runs its kernel once on each of n threads (``workbench.hidden.pairstats``). A gang of Python
threads (``workbench.hidden.gang``) hands each call over through a lock and the GIL: on the H200
host's 16 cores a pass of trivial calls took 0.39 ms, 0.69 ms after an idle spell, and calls of
1.03 ms took 1.79 ms in all. numba's OpenMP or TBB layer starts the calls in native code, the GIL
released once, so a pass costs its work. The workqueue layer (numba's fallback) is not safe
from two Python threads at once, so it is never used: the gang runs the passes there.

The layer is chosen at numba's first parallel launch in the process: where no choice was made
(``NUMBA_THREADING_LAYER`` unset), the first pass asks for a thread-safe one (TBB or OpenMP),
and gives the choice back where neither loads. A forked child of a process whose team started
keeps to the gang (GNU OpenMP does not survive a fork).

The OpenMP layer shares the OpenMP runtime with torch: starting it set the starting thread's
OpenMP thread count (torch's ``get_num_threads``) to all of numba's threads, so a process that
had asked torch for 2 threads ran its next alignment (and every torch operation) on all the
cores. Starting it here leaves torch's count as it found it (a launch after the start leaves the
count alone: the test in ``tests/hidden/test_team.py`` checks both).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import numba
import numpy as np
from numba import njit, prange

SAFE_LAYERS = ("omp", "tbb")
_CONFIG = cast(Any, numba.config)  # (its settings are made at import: untyped)
_STARTED: tuple[int, bool] | None = None  # (pid that started the layer, whether it is safe)
_LOCK = threading.Lock()


@njit(parallel=True, cache=True)
def _probe(a: Any) -> None:
    for i in prange(a.shape[0]):
        a[i] = i


@contextlib.contextmanager
def _keeping_torch_threads() -> Iterator[None]:
    """torch's thread count (where torch is loaded) as it was before, whatever numba's layer did to
    the OpenMP runtime they share."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _start() -> bool:
    """numba's layer, started here where nothing started it: whether it is thread-safe."""
    with _keeping_torch_threads():
        return _start_layer()


def _start_layer() -> bool:
    try:
        layer: str | None = numba.threading_layer()  # started already, by other code
    except ValueError:
        layer = None
    if layer is None:
        asked = _CONFIG.THREADING_LAYER
        if asked == "default":
            _CONFIG.THREADING_LAYER = "threadsafe"
        try:
            _probe(np.zeros(2))
            layer = numba.threading_layer()
        except Exception:
            layer = None
        if layer is None:
            _CONFIG.THREADING_LAYER = asked
    return layer in SAFE_LAYERS


def ready() -> bool:
    """Whether passes run on numba's layer in this process (started on first use)."""
    global _STARTED
    with _LOCK:
        if _STARTED is None:
            _STARTED = (os.getpid(), _start())
        pid, safe = _STARTED
    return safe and pid == os.getpid()


def run(launch: Callable[..., Any], n: int, args: tuple[Any, ...]) -> bool:
    """``launch(n, *args)`` (a kernel's launcher: the kernel once on each of n threads) on numba's
    layer; False where it is not used here (the caller runs the gang)."""
    if not ready():
        return False
    numba.set_num_threads(max(1, min(int(n), _CONFIG.NUMBA_NUM_THREADS)))
    launch(n, *args)
    return True
