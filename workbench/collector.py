"""How the process uses Python's cyclic garbage collector.

Start-up (torch, transformers, SGLang's modules, a model's weights, a release's parsed source)
makes millions of long-lived objects without reference cycles, and the collector's passes over
them are a large share of what such work takes: start-up runs without them.

At exit the interpreter runs one more full collection over every object still tracked, which
grows with every module imported. A process here closes its files, journals and connections
explicitly, so it has nothing for that pass to find: what is left is frozen out of it instead.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

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
    """A one-shot command's process: collections far apart, none at exit."""
    gc.set_threshold(*COMMAND_THRESHOLD)
    no_pass_at_exit()


def no_pass_at_exit() -> None:
    """The interpreter's last collection has nothing to walk: an exit handler freezes every
    object first (once per process, however often this is called)."""
    global _FREEZE_AT_EXIT
    if not _FREEZE_AT_EXIT:
        _FREEZE_AT_EXIT = True
        atexit.register(gc.freeze)


_FREEZE_AT_EXIT = False


def started() -> None:
    """A long-running process after its start-up (with the collector off until here): what the
    start made is kept out of every later pass, and the collector runs again."""
    gc.freeze()
    gc.enable()
    no_pass_at_exit()
