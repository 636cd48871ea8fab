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


@pytest.mark.parametrize("begin,end", [(0, 4096), (17, 5000), ((2 << 20) + 4095, (4 << 20) + 9), (0, (5 << 20) + 123),
                                       (1000, 1000)])
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
    for begin in (0, 4096 + 7, (2 << 20) + 12345):
        buf = M.map_range(path, begin, begin + (1 << 20))
        assert ctypes.addressof(buf) % M.HUGE == begin % M.HUGE


def test_writes_stay_private(blob):
    path, data = blob
    buf = M.map_range(path, 10, 20)
    np.frombuffer(buf, np.uint8)[:4] = [0, 1, 2, 3]
    assert bytes(memoryview(buf))[:4] == b"\x00\x01\x02\x03"
    assert path.read_bytes() == data


@pytest.mark.skipif(M._LIBC is None or not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_unmapped_once_no_view_is_left(blob):
    import torch

    path, _ = blob
    buf = M.map_range(path, 100, 3 << 20)
    addr = ctypes.addressof(buf)
    t = torch.frombuffer(buf, dtype=torch.uint8)[5:]
    del buf
    gc.collect()
    assert any(lo <= addr < hi for lo, hi in _mapped_ranges())       # the view keeps it
    del t
    gc.collect()
    assert not any(lo <= addr < hi for lo, hi in _mapped_ranges())
    # and no slack of the reservation is left behind either
    before = len(_mapped_ranges())
    for _ in range(20):
        M.map_range(path, 4096, 1 << 20)
    gc.collect()
    assert len(_mapped_ranges()) <= before + 2


def test_a_range_past_the_end_is_refused_not_a_bus_error(blob):
    path, data = blob
    with pytest.raises(ValueError, match="run past its end"):
        M.map_range(path, 0, len(data) + 1)
    with pytest.raises(ValueError, match="byte range"):
        M.map_range(path, 10, 5)
