"""A reader's answer about a folder of sources, kept on disk until the files or the reader change."""

from __future__ import annotations

import json
import os

from workbench.engine import source_cache


def _folder(tmp_path):
    src = tmp_path / "models"
    src.mkdir()
    (src / "a.py").write_text("A = 1\n")
    (src / "b.py").write_text("B = 2\n")
    (src / "notes.txt").write_text("not a source")
    return src


def _reader(src, calls):
    def read():
        calls.append(1)
        return {"names": sorted(p.name for p in src.glob("*.py")), "sizes": [p.stat().st_size for p in
                                                                             sorted(src.glob("*.py"))]}
    return read


def test_read_once_then_from_the_cache_until_a_file_changes(tmp_path):
    src, root, calls = _folder(tmp_path), tmp_path / "cache", []
    read = _reader(src, calls)
    first = source_cache.read("q", src, read, root=root)
    assert first == {"names": ["a.py", "b.py"], "sizes": [6, 6]} and len(calls) == 1
    assert source_cache.read("q", src, read, root=root) == first and len(calls) == 1
    (src / "notes.txt").write_text("other text, not a source")         # not a .py file: still cached
    assert source_cache.read("q", src, read, root=root) == first and len(calls) == 1

    (src / "a.py").write_text("A = 10\n")                              # size changes
    assert source_cache.read("q", src, read, root=root)["sizes"] == [7, 6] and len(calls) == 2
    st = (src / "b.py").stat()
    os.utime(src / "b.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1000))  # same size, touched
    source_cache.read("q", src, read, root=root)
    assert len(calls) == 3
    (src / "c.py").write_text("C = 3\n")                               # a new module
    assert source_cache.read("q", src, read, root=root)["names"] == ["a.py", "b.py", "c.py"]
    (src / "c.py").unlink()                     # gone again: the files of the third read, its entry
    assert source_cache.read("q", src, read, root=root)["names"] == ["a.py", "b.py"] and len(calls) == 4
    assert source_cache.read("other-question", src, read, root=root) and len(calls) == 5


def test_a_damaged_or_foreign_entry_is_read_again_and_replaced(tmp_path):
    src, root, calls = _folder(tmp_path), tmp_path / "cache", []
    read = _reader(src, calls)
    want = source_cache.read("q", src, read, root=root)
    (entry,) = (root / source_cache.SUBDIR).iterdir()
    for bad in ("{not json", json.dumps({"key": "another", "value": {"names": []}}), json.dumps([1]),
                json.dumps({"key": json.loads(entry.read_text())["key"], "value": "a string"})):
        entry.write_text(bad)
        assert source_cache.read("q", src, read, root=root) == want
    assert len(calls) == 5 and json.loads(entry.read_text())["value"] == want
    assert [p.name for p in (root / source_cache.SUBDIR).iterdir()] == [entry.name]   # no temporaries left


def test_an_unwritable_cache_costs_a_read_and_nothing_else(tmp_path):
    src, calls = _folder(tmp_path), []
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    read = _reader(src, calls)
    assert source_cache.read("q", src, read, root=blocked)["names"] == ["a.py", "b.py"]
    assert source_cache.read("q", src, read, root=blocked) and len(calls) == 2


def test_the_installed_sglang_registry_through_the_cache_is_the_reading(tmp_path, monkeypatch):
    from workbench.doctor import sglang_loaders

    models, version = sglang_loaders._installed_models_dir(), sglang_loaders._installed_version()
    if models is None or version is None:
        import pytest

        pytest.skip("no installed sglang")
    monkeypatch.setenv("EAGLE_WB_CACHE", str(tmp_path))
    want = sglang_loaders.read_registry(models, version)
    for _ in range(2):                       # read and kept, then from the entry
        sglang_loaders.registry.cache_clear()
        assert sglang_loaders.registry() == want
    assert len(list((tmp_path / source_cache.SUBDIR).glob(f"sglang-registry-{version}-*.json"))) == 1
    sglang_loaders.registry.cache_clear()
