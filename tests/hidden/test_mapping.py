"""The readers' file mappings (``workbench.hidden.mapping``): the right bytes at any offset, private
(a write never reaches the file), at an address the kernel can map in 2 MB pieces, unmapped once
no view is left, and Python's ``mmap`` where the aligned mapping cannot be made."""

from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
import pytest

from workbench.hidden import mapping as M


@pytest.fixture
def blob(tmp_path):
    data = np.random.default_rng(0).integers(0, 256, (5 << 20) + 123, dtype=np.uint8).tobytes()
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    return path, data


def _mapped_ranges() -> list[tuple[int, int]]:
    with open("/proc/self/maps") as fh:
        return [tuple(int(x, 16) for x in line.split()[0].split("-")) for line in fh]


class _Noting:
    """libc that notes every stretch of address space the kernel places for a mapping: what a
    test checks is left mapped (not the count of the process's mappings, which other threads change)."""

    def __init__(self, real):
        self.real, self.regions = real, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def mmap(self, addr, n, *rest):
        res = self.real.mmap(addr, n, *rest)
        if addr is None:
            self.regions.append((res, res + n))
        return res

    def left(self) -> list[tuple[int, int]]:
        """The process's mappings that overlap any stretch noted."""
        return [(lo, hi) for lo, hi in _mapped_ranges() for a, b in self.regions if lo < b and a < hi]


@pytest.mark.parametrize(
    "begin,end", [(0, 4096), (17, 5000), ((2 << 20) + 4095, (4 << 20) + 9), (0, (5 << 20) + 123), (1000, 1000)]
)
@pytest.mark.parametrize("aligned", [True, False])
def test_the_bytes_asked_for_at_any_offset(blob, begin, end, aligned, monkeypatch):
    path, data = blob
    if not aligned:
        monkeypatch.setattr(M, "_LIBC", None)
    buf = M.map_range(path, begin, end)
    assert bytes(memoryview(buf)) == data[begin:end]


@pytest.mark.skipif(M._LIBC is None, reason="no libc mmap here: Python's mmap is used")
def test_the_address_agrees_with_the_file_offset_modulo_2mb(blob):
    path, _ = blob
    for begin in (0, 4096 + 7, (2 << 20) + 12345):  # ranges that can hold a 2 MB piece
        buf = M.map_range(path, begin, begin + (5 << 19))
        assert ctypes.addressof(buf) % M.HUGE == begin % M.HUGE


@pytest.mark.skipif(M._LIBC is None, reason="no libc mmap here: Python's mmap is used")
def test_a_mapping_the_kernel_places_off_the_2mb_grid_is_moved_onto_it(blob, monkeypatch):
    """Where the kernel places a file mapping without regard to 2 MB, the range is mapped again
    into reserved address space at a congruent address (and the misplaced mapping let go)."""
    path, data = blob

    class OffGrid(_Noting):
        """Whose first placement of a file mapping is one page off the 2 MB grid."""

        def mmap(self, addr, n, prot, flags, fd, off):
            if addr is not None or fd < 0 or self.regions:
                return super().mmap(addr, n, prot, flags, fd, off)
            room = n + 2 * M.HUGE
            res = super().mmap(None, room, 0, 0x22 | 0x4000, -1, 0)
            at = (res + M.HUGE - 1) // M.HUGE * M.HUGE + (off + 4096) % M.HUGE
            assert self.real.mmap(at, n, prot, flags | 0x10, fd, off) == at
            self.real.munmap(res, at - res)
            tail = at + (n + 4095) // 4096 * 4096
            self.real.munmap(tail, res + room - tail)
            return at

    libc = OffGrid(M._LIBC)
    monkeypatch.setattr(M, "_LIBC", libc)
    begin = 4096 + 100
    buf = M.map_range(path, begin, begin + (3 << 20))
    assert ctypes.addressof(buf) % M.HUGE == begin % M.HUGE
    assert bytes(memoryview(buf)) == data[begin : begin + (3 << 20)]
    assert len(libc.regions) == 2  # the misplaced mapping's room, then the reader's reservation
    del buf
    gc.collect()
    assert M.settle(10)
    assert not libc.left()  # nor the misplaced mapping, nor the slack either side, nor the mapping


def test_writes_stay_private(blob):
    path, data = blob
    buf = M.map_range(path, 10, 20)
    np.frombuffer(buf, np.uint8)[:4] = [0, 1, 2, 3]
    assert bytes(memoryview(buf))[:4] == b"\x00\x01\x02\x03"
    assert path.read_bytes() == data


@pytest.mark.skipif(M._LIBC is None or not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_unmapped_once_no_view_is_left(blob, monkeypatch):
    import torch

    path, _ = blob
    buf = M.map_range(path, 100, 3 << 20)
    addr = ctypes.addressof(buf)
    t = torch.frombuffer(buf, dtype=torch.uint8)[5:]
    del buf
    gc.collect()
    assert any(lo <= addr < hi for lo, hi in _mapped_ranges())  # the view keeps it
    del t
    gc.collect()
    assert M.settle(10)  # (unmapped by a thread of its own)
    assert not any(lo <= addr < hi for lo, hi in _mapped_ranges())
    # and nothing of any reservation is left behind either
    libc = _Noting(M._LIBC)
    monkeypatch.setattr(M, "_LIBC", libc)
    for _ in range(20):
        M.map_range(path, 4096, 1 << 20)
    gc.collect()
    assert M.settle(10)
    assert len(libc.regions) >= 20 and not libc.left()


@pytest.mark.skipif(M._LIBC is None or not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_the_unmap_runs_on_a_thread_of_its_own_and_settle_waits_for_it(blob, monkeypatch):
    """Letting go of the last view hands the mapping to the unmapping thread and returns at once;
    ``settle`` waits until it is gone (and says False while it is not, past its timeout)."""
    import threading

    path, _ = blob
    real, gate, who = M._LIBC, threading.Event(), {}

    class Held:  # libc whose munmap of the range waits for the gate
        def __getattr__(self, name):
            return getattr(real, name)

        def munmap(self, addr, span):
            if addr == who.get("addr"):
                who["thread"] = threading.current_thread().name
                gate.wait(10)
            return real.munmap(addr, span)

    monkeypatch.setattr(M, "_LIBC", Held())
    buf = M.map_range(path, 0, 3 << 20)
    who["addr"] = ctypes.addressof(buf)
    del buf
    gc.collect()  # returns while the munmap waits on the gate
    assert not M.settle(0.2)
    assert who["thread"] == "mapping-unmap"
    assert any(lo <= who["addr"] < hi for lo, hi in _mapped_ranges())
    gate.set()
    assert M.settle(10)
    assert not any(lo <= who["addr"] < hi for lo, hi in _mapped_ranges())


@pytest.mark.skipif(M._LIBC is None or not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_where_no_thread_can_start_the_range_is_unmapped_at_once(blob, monkeypatch):
    """At interpreter shutdown no new thread starts: the mapping is then given back on the spot."""
    path, _ = blob

    def no_thread():
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(M, "_reaper", no_thread)
    buf = M.map_range(path, 0, 3 << 20)
    addr = ctypes.addressof(buf)
    del buf
    gc.collect()
    assert not any(lo <= addr < hi for lo, hi in _mapped_ranges())


def test_a_range_past_the_end_is_refused_not_a_bus_error(blob):
    path, data = blob
    with pytest.raises(ValueError, match="run past its end"):
        M.map_range(path, 0, len(data) + 1)
    with pytest.raises(ValueError, match="byte range"):
        M.map_range(path, 10, 5)


@pytest.mark.skipif(M._LIBC is None or not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
@pytest.mark.parametrize("aligned", [True, False])
def test_ranges_of_a_file_in_a_shared_block_are_views_of_one_mapping(blob, aligned, monkeypatch):
    """In ``shared()``, a thread's ranges of one file come from one mapping of the whole file (one
    mmap, one munmap), each with its own bytes, private, living as long as any view; outside
    it, and in another thread, each range is its own mapping."""
    import threading

    import torch

    path, data = blob
    if not aligned:
        monkeypatch.setattr(M, "_LIBC", None)
    spans = [(10, 5000), ((2 << 20) + 3, (3 << 20) + 1), (1 << 20, (1 << 20) + 64)]
    with M.shared():
        with M.shared():  # nested: the same block
            bufs = [M.map_range(path, a, b) for a, b in spans[:2]]
        bufs.append(M.map_range(path, *spans[2]))
        elsewhere = []
        th = threading.Thread(target=lambda: elsewhere.append(M.map_range(path, *spans[0])))
        th.start()
        th.join()
    views = [torch.frombuffer(b, dtype=torch.uint8) for b in bufs]
    addrs = [v.data_ptr() for v in views]
    assert [a - addrs[0] for a in addrs] == [a - spans[0][0] for a, _ in spans]  # one mapping, file order
    assert elsewhere[0] is not None and torch.frombuffer(elsewhere[0], dtype=torch.uint8).data_ptr() != addrs[0]
    elsewhere.clear()
    for i, (a, b) in enumerate(spans):
        assert bytes(views[i].numpy()) == data[a:b]
    views[0][:3] = 7  # private: another range, the file, a new block
    assert bytes(views[2].numpy()) == data[spans[2][0] : spans[2][1]]
    assert path.read_bytes() == data
    with M.shared():
        again = M.map_range(path, *spans[0])
    assert bytes(memoryview(again)) == data[spans[0][0] : spans[0][1]]
    del again
    outside = [M.map_range(path, a, b) for a, b in spans[:2]]  # no block: a mapping each
    gap = (
        torch.frombuffer(outside[1], dtype=torch.uint8).data_ptr()
        - torch.frombuffer(outside[0], dtype=torch.uint8).data_ptr()
    )
    assert gap != spans[1][0] - spans[0][0] or not aligned
    del outside, gap
    whole = [(lo, hi) for lo, hi in _mapped_ranges() if lo <= addrs[0] < hi]
    assert whole and whole[0][1] - whole[0][0] >= len(data) - 4096
    del bufs
    views.pop(0)
    gc.collect()
    assert any(lo <= addrs[0] < hi for lo, hi in _mapped_ranges())  # the other views keep it
    del views
    gc.collect()
    assert M.settle(10)
    assert not any(lo <= addrs[0] < hi for lo, hi in _mapped_ranges())
    with open("/proc/self/maps") as fh:  # nothing of the file is left mapped
        assert not [line for line in fh if line.rstrip().endswith(str(path))]
