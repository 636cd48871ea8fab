"""What a reader found in an installed package's source files, kept on disk until those files change.

Reading an installed engine's capture rules parses hundreds of modules, far more than a command's own
work (``benchmarks/capture_bench.py`` measures the table path); the answer depends only on those files
and on the reader. The cache key is every file's name, size and modification time (what Python's own bytecode
cache trusts), the folder, a name for the question, and the same for the reader's modules, so an
edited, upgraded or reinstalled package, or a changed reader, is read again. A damaged or foreign
entry is read again too; an entry is written whole (temporary file, then rename) or not at all.

Entries live under ``$EAGLE_WB_CACHE`` (default ``~/.cache/eagle-workbench``) in ``source-reads/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workbench.engine.wheels import cache_dir

SUBDIR = "source-reads"


def fingerprint(folder: Path, suffix: str = ".py", parts: Sequence[str] | None = None) -> list[tuple[str, int, int]]:
    """(name, size, mtime_ns) of each file of ``folder`` ending in ``suffix``, sorted by name; with
    ``parts`` (paths under ``folder``), of those files and of every such file in those folders and
    below them, named by their paths relative to ``folder``."""
    out = []
    if parts is None:
        with os.scandir(folder) as it:
            for e in it:
                if e.name.endswith(suffix) and e.is_file():
                    st = e.stat()
                    out.append((e.name, st.st_size, st.st_mtime_ns))
        return sorted(out)
    for part in parts:
        top = folder / part
        if top.is_file():
            st = top.stat()
            out.append((part.strip("/"), st.st_size, st.st_mtime_ns))
            continue
        for dirpath, dirs, files in os.walk(top):
            dirs.sort()
            rel = Path(dirpath).relative_to(folder).as_posix()
            for name in files:
                if name.endswith(suffix):
                    st = os.stat(os.path.join(dirpath, name))
                    out.append((f"{rel}/{name}", st.st_size, st.st_mtime_ns))
    return sorted(out)


def _module_files(names: Sequence[str]) -> list[list[Any] | None]:
    out: list[list[Any] | None] = []
    for name in names:
        src = getattr(sys.modules.get(name), "__file__", None)
        st = os.stat(src) if src else None
        out.append([src, st.st_size, st.st_mtime_ns] if st else None)
    return out


def _key(
    question: str,
    folder: Path,
    reader: Callable[..., Any],
    parts: Sequence[str] | None = None,
    modules: Sequence[str] = (),
) -> str:
    ident = [
        question,
        str(folder.resolve()),
        fingerprint(folder, parts=parts),
        *_module_files([reader.__module__, *modules]),
        getattr(reader, "__qualname__", repr(reader)),
    ]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()


def read(
    question: str,
    folder: Path,
    reader: Callable[[], dict[str, Any]],
    root: Path | None = None,
    parts: Sequence[str] | None = None,
    modules: Sequence[str] = (),
) -> dict[str, Any]:
    """``reader()`` (a JSON object) for the files of ``folder`` now (``parts``: of those files and
    folders of it, see ``fingerprint``): from the cache when an entry for exactly these files and
    this reader is there, else read and kept. ``modules``: more modules (imported) the reader's
    answer depends on, besides its own."""
    key = _key(question, folder, reader, parts, modules)
    d = (root or cache_dir()) / SUBDIR
    path = d / f"{question}-{key[:32]}.json"
    try:
        got = json.loads(path.read_text(encoding="utf-8"))
        value: Any = got.get("value") if isinstance(got, dict) and got.get("key") == key else None
        if isinstance(value, dict):
            return value
    except (OSError, ValueError):
        pass
    fresh = reader()
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{question}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "value": fresh}, fh)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a cache that cannot be written costs the next command the read, nothing else
    return fresh
