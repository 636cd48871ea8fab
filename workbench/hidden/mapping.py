"""A byte range of a file, memory-mapped so the kernel can map it in 2 MB pieces (``HUGE``).

A reader pays for a mapping twice besides the bytes: a fault per few 4 KB pages on first touch
and a page-table entry to clear per 4 KB page at unmap. Where the page cache holds a file in
2 MB folios (ext4, XFS and others on recent Linux) and the mapping's address agrees with the
file offset modulo 2 MB, the kernel maps each folio with one entry instead of 512, and both costs
fall several-fold (the benchmark's ``page_cache_plain_mmap_s`` against ``page_cache_aligned_s``,
``benchmarks/results/align_*.json``). ``MADV_HUGEPAGE`` asks the page cache for 2 MB folios when
the range is read from disk through the mapping.

``map_range(path, begin, end)`` returns a writable buffer over bytes ``begin..end`` of the file:
a private mapping (a write copies the page, the file never changes), unmapped when the buffer
and every view of it are gone. Where the aligned mapping cannot be made (not Linux, no libc
``mmap``) it is Python's ``mmap`` with the same semantics.

The aligned mapping is given back by a thread of its own (``settle()`` waits for it): ``munmap``
clears a page-table entry per 4 KB page the kernel did not map in 2 MB pieces and interrupts
every core that ran the process, so the thread that lets go of an alignment's candidates goes
on with its statistics while another core unmaps them (the more of a file's page cache is in
4 KB pages, the longer that takes). The range stays mapped until then, so no other mapping can be
placed over it.

Inside ``with shared():`` the ranges a thread maps of one file are views of one mapping of the
whole file, unmapped when the last view goes: a reader that takes many tensors of a file at once
makes one ``mmap`` and one ``munmap`` instead of one each (on a many-core host each ``munmap``
interrupts every core that ran the process to flush its TLB). Ranges of one block share the private copy: a write to one
range shows through a view of the same bytes taken in the same block, never through another
block's, and never in the file.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any


def _pmd_bytes() -> int:
    """What one page-table entry above the last level maps (2 MB on x86-64 and on arm64 with 4 KB
    pages; 32 MB / 512 MB with 16 KB / 64 KB pages), as the kernel says."""
    try:
        with open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as fh:
            n = int(fh.read().strip())
        return n if n > 0 and n & (n - 1) == 0 else 2 << 20
    except (OSError, ValueError):
        return 2 << 20


HUGE = _pmd_bytes()
_PAGE = mmap.PAGESIZE
# Linux's values where Python's mmap does not name them (the aligned mapping is made on Linux only)
_PROT_NONE, _PROT_READ, _PROT_WRITE = 0, getattr(mmap, "PROT_READ", 1), getattr(mmap, "PROT_WRITE", 2)
_MAP_PRIVATE, _MAP_ANONYMOUS = getattr(mmap, "MAP_PRIVATE", 0x02), getattr(mmap, "MAP_ANONYMOUS", 0x20)
_MAP_FIXED, _MAP_NORESERVE = 0x10, 0x4000
_MADV_SEQUENTIAL, _MADV_HUGEPAGE = getattr(mmap, "MADV_SEQUENTIAL", 2), getattr(mmap, "MADV_HUGEPAGE", 14)
_FAILED = ctypes.c_void_p(-1).value


def _libc() -> Any | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc()


class _Reaper:
    """A thread that unmaps what it is handed, in order; ``settle`` waits until it has."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._todo: list[tuple[Any, int, int]] = []
        self._busy = False
        threading.Thread(target=self._run, name="mapping-unmap", daemon=True).start()

    def put(self, libc: Any, addr: int, span: int) -> None:
        with self._cv:
            self._todo.append((libc, addr, span))
            self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._todo:
                    self._cv.wait()
                libc, addr, span = self._todo.pop(0)
                self._busy = True
            try:
                libc.munmap(addr, span)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def settle(self, timeout: float | None = None) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: not self._todo and not self._busy, timeout)


_REAPER: _Reaper | None = None
_REAPER_LOCK = threading.Lock()


def _after_fork() -> None:
    global _REAPER, _REAPER_LOCK
    _REAPER_LOCK = threading.Lock()  # (a fork while another thread held it would leave it held)
    _REAPER = None  # a forked child has none of its parent's threads


if hasattr(os, "register_at_fork"):  # (where there is no fork there is nothing to reset)
    os.register_at_fork(after_in_child=_after_fork)


def _reaper() -> _Reaper:
    """This process's unmapping thread, started on first use."""
    global _REAPER
    with _REAPER_LOCK:
        if _REAPER is None:
            _REAPER = _Reaper()
        return _REAPER


def _unmap(libc: Any, addr: int, span: int) -> None:
    try:
        reaper = _reaper()
    except RuntimeError:  # no new thread now (interpreter shutdown): unmap here
        libc.munmap(addr, span)
        return
    reaper.put(libc, addr, span)


def settle(timeout: float | None = None) -> bool:
    """Wait until every mapping let go of so far is unmapped; False if ``timeout`` passed first."""
    with _REAPER_LOCK:
        r = _REAPER
    return True if r is None else r.settle(timeout)


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
    """Bytes ``begin..end`` of the open file ``fd``, mapped: aligned where it can be, else by
    Python's ``mmap``."""
    mapped = _aligned(_LIBC, fd, begin, end) if _LIBC is not None else None
    if mapped is not None:
        return mapped
    start = begin - begin % mmap.ALLOCATIONGRANULARITY
    mm = mmap.mmap(fd, end - start, access=mmap.ACCESS_COPY, offset=start)
    with contextlib.suppress(AttributeError, OSError):  # (advice only: not every system takes it)
        mm.madvise(mmap.MADV_SEQUENTIAL)
    return memoryview(mm)[begin - start :]


def _aligned(libc: Any, fd: int, begin: int, end: int) -> Any | None:
    """The mapping at an address congruent to the file offset modulo ``HUGE``: where the kernel
    does not place it so itself (filesystems with large folios usually ask it to), reserve address
    space with room to slide, map the file over it and give back the slack. None where it fails."""
    start = begin - begin % _PAGE
    span = end - start
    prot, flags = _PROT_READ | _PROT_WRITE, _MAP_PRIVATE
    addr = libc.mmap(None, span, prot, flags, fd, start)
    if addr in (None, _FAILED):
        return None
    if (addr - start) % HUGE and span >= HUGE:
        libc.munmap(addr, span)
        room = span + 2 * HUGE
        res = libc.mmap(None, room, _PROT_NONE, _MAP_PRIVATE | _MAP_ANONYMOUS | _MAP_NORESERVE, -1, 0)
        if res in (None, _FAILED):
            return None
        addr = (res + HUGE - 1) // HUGE * HUGE + start % HUGE
        if libc.mmap(addr, span, prot, flags | _MAP_FIXED, fd, start) != addr:
            libc.munmap(res, room)
            return None
        if addr > res:
            libc.munmap(res, addr - res)
        tail = addr + (span + _PAGE - 1) // _PAGE * _PAGE
        if res + room > tail:
            libc.munmap(tail, res + room - tail)
    libc.madvise(addr, span, _MADV_HUGEPAGE)  # advice only: ignored where unsupported
    libc.madvise(addr, span, _MADV_SEQUENTIAL)
    buf = (ctypes.c_ubyte * (end - begin)).from_address(addr + (begin - start))
    fin = weakref.finalize(buf, _unmap, libc, addr, span)
    fin.atexit = False  # (an exiting process gives its mappings back whole)
    return buf
