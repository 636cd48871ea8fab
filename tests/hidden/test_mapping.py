"""The readers' file mappings (``workbench.hidden.mapping``): the right bytes at any offset, private
(a write never reaches the file), unmapped once no view is left, and a file's ranges in a shared
block views of one mapping."""

from __future__ import annotations

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


def _address(buf) -> int:
    return int(np.frombuffer(buf, np.uint8).ctypes.data)


@pytest.mark.parametrize(
    "begin,end", [(0, 4096), (17, 5000), ((2 << 20) + 4095, (4 << 20) + 9), (0, (5 << 20) + 123), (1000, 1000)]
)
def test_the_bytes_asked_for_at_any_offset(blob, begin, end):
    path, data = blob
    buf = M.map_range(path, begin, end)
    assert bytes(memoryview(buf)) == data[begin:end]


def test_writes_stay_private(blob):
    path, data = blob
    buf = M.map_range(path, 10, 20)
    np.frombuffer(buf, np.uint8)[:4] = [0, 1, 2, 3]
    assert bytes(memoryview(buf))[:4] == b"\x00\x01\x02\x03"
    assert path.read_bytes() == data


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_unmapped_once_no_view_is_left(blob):
    import torch

    path, _ = blob
    buf = M.map_range(path, 100, 3 << 20)
    addr = _address(buf)
    t = torch.frombuffer(buf, dtype=torch.uint8)[5:]
    del buf
    gc.collect()
    assert any(lo <= addr < hi for lo, hi in _mapped_ranges())  # the view keeps it
    del t
    gc.collect()
    assert not any(lo <= addr < hi for lo, hi in _mapped_ranges())
    with open("/proc/self/maps") as fh:  # nothing of the file is left mapped
        assert not [line for line in fh if line.rstrip().endswith(str(path))]


def test_a_range_past_the_end_is_refused_not_a_bus_error(blob):
    path, data = blob
    with pytest.raises(ValueError, match="run past its end"):
        M.map_range(path, 0, len(data) + 1)
    with pytest.raises(ValueError, match="byte range"):
        M.map_range(path, 10, 5)
    with M.shared():
        M.map_range(path, 0, 10)
        with pytest.raises(ValueError, match="run past its end"):
            M.map_range(path, 0, len(data) + 1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_ranges_of_a_file_in_a_shared_block_are_views_of_one_mapping(blob, monkeypatch):
    """In ``shared()``, a thread's ranges of one file come from one mapping of the whole file (one
    mmap, one munmap), each with its own bytes, private, living as long as any view; outside
    it, and in another thread, each range is its own mapping."""
    import threading

    import torch

    path, data = blob
    made = []
    real = M._map
    monkeypatch.setattr(M, "_map", lambda *a: made.append(a[1:]) or real(*a))
    spans = [(10, 5000), ((2 << 20) + 3, (3 << 20) + 1), (1 << 20, (1 << 20) + 64)]
    with M.shared():
        with M.shared():  # nested: the same block
            bufs = [M.map_range(path, a, b) for a, b in spans[:2]]
        bufs.append(M.map_range(path, *spans[2]))
        elsewhere = []
        th = threading.Thread(target=lambda: elsewhere.append(M.map_range(path, *spans[0])))
        th.start()
        th.join()
    assert made == [(0, len(data)), spans[0]]  # the block's whole file, then the other thread's range
    views = [torch.frombuffer(b, dtype=torch.uint8) for b in bufs]
    addrs = [v.data_ptr() for v in views]
    assert [a - addrs[0] for a in addrs] == [a - spans[0][0] for a, _ in spans]  # one mapping, file order
    assert elsewhere[0] is not None and _address(elsewhere[0]) != addrs[0]
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
    made.clear()
    outside = [M.map_range(path, a, b) for a, b in spans[:2]]  # no block: a mapping each
    assert made == spans[:2]
    del outside
    del bufs
    views.pop(0)
    gc.collect()
    assert any(lo <= addrs[0] < hi for lo, hi in _mapped_ranges())  # the other views keep it
    del views
    gc.collect()
    assert not any(lo <= addrs[0] < hi for lo, hi in _mapped_ranges())
    with open("/proc/self/maps") as fh:  # nothing of the file is left mapped
        assert not [line for line in fh if line.rstrip().endswith(str(path))]
