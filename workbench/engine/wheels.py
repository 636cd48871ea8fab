"""SGLang releases from PyPI: ``pip download --no-deps`` into a cache, the Python sources unpacked.

Cache: ``$EAGLE_WB_CACHE`` or ``~/.cache/eagle-workbench``: ``wheels/`` holds the wheels,
``sglang-src/<version>/sglang/`` the unpacked ``.py`` files the extractor reads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from workbench.errors import InputError, WorkbenchError

# what the extractor reads: model classes, runners, layers (capture helpers), the version
READS = (
    "sglang/version.py",
    "sglang/srt/models/",
    "sglang/srt/model_executor/",
    "sglang/srt/speculative/",
    "sglang/srt/layers/",
)


def cache_dir() -> Path:
    return Path(os.environ.get("EAGLE_WB_CACHE") or "~/.cache/eagle-workbench").expanduser()


def wheel_path(version: str) -> Path | None:
    d = cache_dir() / "wheels"
    hits = sorted(d.glob(f"sglang-{version}-*.whl")) if d.is_dir() else []
    return hits[0] if hits else None


def download(version: str, timeout: float = 300) -> Path:
    """The release's wheel, from the cache or ``pip download --no-deps sglang==version``."""
    if not re.fullmatch(r"[0-9][0-9A-Za-z.+-]*", version):
        raise InputError(f"sglang version {version!r}: expected a release like 0.5.23")
    got = wheel_path(version)
    if got:
        return got
    d = cache_dir() / "wheels"
    d.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"sglang=={version}", "-d", str(d)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    got = wheel_path(version)
    if r.returncode != 0 or got is None:
        msg = (r.stderr or r.stdout).strip().splitlines()
        raise WorkbenchError(f"pip download sglang=={version} failed: {msg[-1] if msg else 'no wheel'}")
    return got


def unpacked(version: str) -> Path:
    """The directory holding ``sglang/`` of that release (unpacked once, atomically)."""
    dest = cache_dir() / "sglang-src" / version
    if (dest / ".complete").is_file():
        return dest
    whl = download(version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=dest.parent))
    try:
        with zipfile.ZipFile(whl) as z:
            for name in z.namelist():
                if name.endswith(".py") and name.startswith(READS) and ".." not in name.split("/"):
                    z.extract(name, tmp)
        (tmp / ".complete").write_text(whl.name)
        try:
            os.rename(tmp, dest)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process unpacked it first
    finally:
        if tmp.exists() and tmp != dest:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def releases(minimum: str = "0.4.9") -> list[str]:
    """Every sglang release on the index from ``minimum`` (``pip index versions sglang``)."""
    from workbench.engine.version import Version

    r = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "sglang"], capture_output=True, text=True, timeout=120
    )
    m = re.search(r"Available versions:\s*(.+)", r.stdout)
    if not m:
        raise WorkbenchError("pip index versions sglang: no version list")
    lo = Version.parse(minimum)
    out = []
    for v in (x.strip() for x in m.group(1).split(",")):
        try:
            if Version.parse(v) >= lo and not re.search(r"(rc|dev|a|b)\d*$", v):
                out.append(v)
        except InputError:
            continue
    return sorted(out, key=Version.parse)
