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
        return {
            "names": sorted(p.name for p in src.glob("*.py")),
            "sizes": [p.stat().st_size for p in sorted(src.glob("*.py"))],
        }

    return read


def test_read_once_then_from_the_cache_until_a_file_changes(tmp_path):
    src, root, calls = _folder(tmp_path), tmp_path / "cache", []
    read = _reader(src, calls)
    first = source_cache.read("q", src, read, root=root)
    assert first == {"names": ["a.py", "b.py"], "sizes": [6, 6]} and len(calls) == 1
    assert source_cache.read("q", src, read, root=root) == first and len(calls) == 1
    (src / "notes.txt").write_text("other text, not a source")  # not a .py file: still cached
    assert source_cache.read("q", src, read, root=root) == first and len(calls) == 1

    (src / "a.py").write_text("A = 10\n")  # size changes
    assert source_cache.read("q", src, read, root=root)["sizes"] == [7, 6] and len(calls) == 2
    st = (src / "b.py").stat()
    os.utime(src / "b.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1000))  # same size, touched
    source_cache.read("q", src, read, root=root)
    assert len(calls) == 3
    (src / "c.py").write_text("C = 3\n")  # a new module
    assert source_cache.read("q", src, read, root=root)["names"] == ["a.py", "b.py", "c.py"]
    (src / "c.py").unlink()  # gone again: the files of the third read, its entry
    assert source_cache.read("q", src, read, root=root)["names"] == ["a.py", "b.py"] and len(calls) == 4
    assert source_cache.read("other-question", src, read, root=root) and len(calls) == 5


def test_a_damaged_or_foreign_entry_is_read_again_and_replaced(tmp_path):
    src, root, calls = _folder(tmp_path), tmp_path / "cache", []
    read = _reader(src, calls)
    want = source_cache.read("q", src, read, root=root)
    (entry,) = (root / source_cache.SUBDIR).iterdir()
    for bad in (
        "{not json",
        json.dumps({"key": "another", "value": {"names": []}}),
        json.dumps([1]),
        json.dumps({"key": json.loads(entry.read_text())["key"], "value": "a string"}),
    ):
        entry.write_text(bad)
        assert source_cache.read("q", src, read, root=root) == want
    assert len(calls) == 5 and json.loads(entry.read_text())["value"] == want
    assert [p.name for p in (root / source_cache.SUBDIR).iterdir()] == [entry.name]  # no temporaries left


def test_an_unwritable_cache_costs_a_read_and_nothing_else(tmp_path):
    src, calls = _folder(tmp_path), []
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    read = _reader(src, calls)
    assert source_cache.read("q", src, read, root=blocked)["names"] == ["a.py", "b.py"]
    assert source_cache.read("q", src, read, root=blocked) and len(calls) == 2


def test_parts_are_walked_whole_and_nothing_outside_them_counts(tmp_path):
    """With ``parts``, a file and folders under the root (and every folder below them) make the key:
    a change deep inside one is read again; a change elsewhere under the root is not."""
    root = tmp_path / "pkg"
    (root / "sglang" / "srt" / "models" / "deep").mkdir(parents=True)
    (root / "sglang" / "other").mkdir(parents=True)
    (root / "sglang" / "version.py").write_text("__version__ = '1'\n")
    (root / "sglang" / "srt" / "models" / "llama.py").write_text("L = 1\n")
    (root / "sglang" / "srt" / "models" / "deep" / "x.py").write_text("X = 1\n")
    (root / "sglang" / "other" / "y.py").write_text("Y = 1\n")
    parts = ("sglang/version.py", "sglang/srt/models/")
    names = [n for n, _, _ in source_cache.fingerprint(root, parts=parts)]
    assert names == ["sglang/srt/models/deep/x.py", "sglang/srt/models/llama.py", "sglang/version.py"]
    calls: list[int] = []

    def read():
        calls.append(1)
        return {"n": len(calls)}

    cache = tmp_path / "cache"
    assert source_cache.read("q", root, read, root=cache, parts=parts) == {"n": 1}
    (root / "sglang" / "other" / "y.py").write_text("Y = 22\n")  # outside the parts
    assert source_cache.read("q", root, read, root=cache, parts=parts) == {"n": 1}
    (root / "sglang" / "srt" / "models" / "deep" / "x.py").write_text("X = 22\n")  # deep inside one
    assert source_cache.read("q", root, read, root=cache, parts=parts) == {"n": 2}
    (root / "sglang" / "version.py").write_text("__version__ = '2'\n")  # the file part
    assert source_cache.read("q", root, read, root=cache, parts=parts) == {"n": 3}


def test_a_changed_module_of_the_reader_is_read_again(tmp_path, monkeypatch):
    """``modules``: the reader's answer depends on those modules' code too."""
    import importlib

    (tmp_path / "helper_mod_for_cache.py").write_text("RULE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("helper_mod_for_cache")
    src, cache, calls = _folder(tmp_path), tmp_path / "cache", []
    read = _reader(src, calls)
    for _ in range(2):
        source_cache.read("q", src, read, root=cache, modules=("helper_mod_for_cache",))
    assert len(calls) == 1
    (tmp_path / "helper_mod_for_cache.py").write_text("RULE = 22\n")
    source_cache.read("q", src, read, root=cache, modules=("helper_mod_for_cache",))
    assert len(calls) == 2


def test_a_release_read_through_the_cache_is_its_reading(tmp_path, monkeypatch):
    """An installed release's read comes from the cache until a file the extractor reads changes, and
    is what the extractor reads in the code, field for field, evidence, registry and drafts included."""
    import shutil

    import pytest

    from workbench.engine import lookup, table
    from workbench.engine.wheels import READS

    got = lookup.installed("sglang")
    if got is None:
        pytest.skip("no installed sglang")
    installed, version = got
    root = tmp_path / "site"
    for part in READS["sglang"]:  # a copy of what the extractor reads (never edit the install)
        src = os.path.join(installed, part)
        if os.path.isdir(src):
            shutil.copytree(src, root / part)
        elif os.path.isfile(src):
            (root / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / part)
    monkeypatch.setenv("EAGLE_WB_CACHE", str(tmp_path / "cache"))
    calls = []
    real = lookup.read_at

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(lookup, "read_at", counted)
    want = table.pack(real(root, version))
    assert want["rules"] and want["registry"] and want["drafts"]

    def kept():
        return table.pack(lookup.read_kept(root, "sglang", version, "installed"))

    assert kept() == want and len(calls) == 1
    assert kept() == want and len(calls) == 1  # from the cache
    llama = root / "sglang" / "srt" / "models" / "llama.py"
    llama.write_text(llama.read_text() + "\n# edited\n")
    assert kept() == want and len(calls) == 2  # a file changed: read again
