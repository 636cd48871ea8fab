"""A byte range of a file, memory-mapped: ``map_range(path, begin, end)``.

``map_range`` returns a writable buffer over bytes ``begin..end`` of the file: a private mapping
(a write copies the page, the file never changes), unmapped when the buffer and every view of it
are gone. Where the page cache holds a file in 2 MB folios, Linux places a file mapping so that
its address agrees with the file offset modulo 2 MB and maps each folio with one page-table entry:
a plain ``mmap`` faults in and gives back a range as fast as one placed by hand
(``benchmarks/results/align_amd_epyc_zen4_2core_kernels.json``, ``mapping``). ``MADV_HUGEPAGE``
asks the page cache for such folios when the range is read from disk through the mapping.

Inside ``with shared():`` the ranges a thread maps of one file are views of one mapping of the
whole file, unmapped when the last view goes: a reader that takes many tensors of a file at once
makes one ``mmap`` and one ``munmap`` instead of one each (on a many-core host each ``munmap``
interrupts every core that ran the process to flush its TLB). Ranges of one block share the
private copy: a write to one range shows through a view of the same bytes taken in the same
block, never through another block's, and never in the file.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections.abc import Iterator
from typing import Any

_BLOCK = threading.local()  # .files: {path: whole-file buffer} in ``shared`` (a block reads a file as it
# was at the block's first range of it)


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """A block in which this thread's ``map_range`` of one file are views of one mapping of the
    whole file (see the module). Blocks nest; the mappings outlive the block as long as a view."""
    outer = getattr(_BLOCK, "files", None)
    _BLOCK.files = {} if outer is None else outer
    try:
        yield
    finally:
        _BLOCK.files = outer


def map_range(path: str | os.PathLike[str], begin: int, end: int) -> Any:
    """A writable (copy-on-write) buffer over bytes ``begin..end`` of ``path``; see the module."""
    if not 0 <= begin <= end:
        raise ValueError(f"byte range {begin}..{end} of {path}")
    files: dict[str, Any] | None = getattr(_BLOCK, "files", None)
    whole = files.get(os.fspath(path)) if files is not None else None
    if whole is None:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if end > size:  # a page past the end would fault with SIGBUS, not an error
                raise ValueError(f"{path}: bytes {begin}..{end} run past its end ({size} bytes)")
            if end == begin:
                return bytearray()
            if files is None:
                return _map(fh.fileno(), begin, end)
            whole = files[os.fspath(path)] = _map(fh.fileno(), 0, size)
    elif end > len(whole):
        raise ValueError(f"{path}: bytes {begin}..{end} run past its end ({len(whole)} bytes)")
    return memoryview(whole)[begin:end]


def _map(fd: int, begin: int, end: int) -> Any:
    """Bytes ``begin..end`` of the open file ``fd``, mapped privately."""
    start = begin - begin % mmap.ALLOCATIONGRANULARITY
    mm = mmap.mmap(fd, end - start, access=mmap.ACCESS_COPY, offset=start)
    for advice in ("MADV_HUGEPAGE", "MADV_SEQUENTIAL"):
        with contextlib.suppress(AttributeError, OSError):  # (advice only: not every system takes it)
            mm.madvise(getattr(mmap, advice))
    return memoryview(mm)[begin - start :]
