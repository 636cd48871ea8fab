"""How the process uses Python's cyclic garbage collector.

Start-up (torch, transformers, SGLang's modules, a model's weights, a release's parsed source)
makes millions of long-lived objects without reference cycles; the collector's passes over them
cost a quarter to three quarters of what such work takes (a lab server's start 8.0 -> 3.9 s, an
SGLang release's extraction 6.0 -> 1.5 s, torch + transformers' import 3.9 -> 2.9 s, here).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

# a command's collections: every 50,000 allocations instead of 700 (cyclic garbage waits longer;
# a start-up's millions of objects are not walked a thousand times)
COMMAND_THRESHOLD = (50_000, 20, 20)


@contextmanager
def paused() -> Iterator[None]:
    """No collection inside (for work that builds large graphs without cycles)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def for_a_command() -> None:
    """A one-shot command's process: collections far apart."""
    gc.set_threshold(*COMMAND_THRESHOLD)


def started() -> None:
    """A long-running process after its start-up (with the collector off until here): what the
    start made is kept out of every later pass, and the collector runs again."""
    gc.freeze()
    gc.enable()
