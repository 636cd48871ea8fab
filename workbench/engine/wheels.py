"""Engine releases from the package index: ``pip download --no-deps --only-binary=:all:`` into a
cache, and only the Python files the extractor reads unpacked (a vLLM wheel is hundreds of MB; its
model code a few).

Cache: ``$EAGLE_WB_CACHE`` or ``~/.cache/eagle-workbench``: ``wheels/`` holds SGLang's wheels and
``wheels/vllm/`` vLLM's (``$EAGLE_WB_WHEEL_CACHE`` moves ``wheels/``), ``<engine>-src/<version>/``
the unpacked files. Nothing in the cache is ever deleted here.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from workbench.errors import InputError, WorkbenchError

# what the extractor reads, per engine: model classes, runners, layers (capture helpers), configs
READS = {
    "sglang": (
        "sglang/version.py",
        "sglang/srt/models/",
        "sglang/srt/model_executor/",
        "sglang/srt/speculative/",
        "sglang/srt/layers/",
    ),
    "vllm": (
        "vllm/version.py",
        "vllm/_version.py",
        "vllm/model_executor/models/",
        "vllm/v1/worker/gpu_model_runner.py",
        "vllm/v1/worker/gpu/spec_decode/eagle/",
        "vllm/v1/worker/gpu/model_runner.py",
        "vllm/transformers_utils/configs/",
        "vllm/config/",
        "vllm/config.py",
    ),
}
_RELEASE = re.compile(r"[0-9][0-9A-Za-z.+-]*")


def cache_dir() -> Path:
    return Path(os.environ.get("EAGLE_WB_CACHE") or "~/.cache/eagle-workbench").expanduser()


def wheel_cache() -> Path:
    return Path(os.environ.get("EAGLE_WB_WHEEL_CACHE") or cache_dir() / "wheels").expanduser()


def _wheel_dir(engine: str) -> Path:
    return wheel_cache() / "vllm" if engine == "vllm" else wheel_cache()


def wheel_path(engine: str, version: str) -> Path | None:
    d = _wheel_dir(engine)
    hits = sorted(d.glob(f"{engine}-{version}-*.whl")) if d.is_dir() else []
    return hits[0] if hits else None


def download(engine: str, version: str, timeout: float = 900) -> Path:
    """The release's wheel, from the cache or the package index (pip's own client)."""
    if engine not in READS:
        raise InputError(f"engine {engine!r}: expected sglang or vllm")
    if not _RELEASE.fullmatch(version):
        raise InputError(f"{engine} version {version!r}: expected a release like 0.5.23")
    got = wheel_path(engine, version)
    if got:
        return got
    d = _wheel_dir(engine)
    d.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    r = subprocess.run([*cmd, f"{engine}=={version}", "-d", str(d)], capture_output=True, text=True, timeout=timeout)
    got = wheel_path(engine, version)
    if r.returncode != 0 or got is None:
        lines = [x for x in (r.stderr or r.stdout).strip().splitlines() if not x.startswith("WARNING: Location")]
        msg = lines[-1] if lines else "no wheel"
        if "No matching distribution" in msg or "Could not find a version" in msg:
            raise NoSuchReleaseError(f"{engine}=={version}: the package index has no such release ({msg})")
        raise WorkbenchError(f"pip download {engine}=={version} failed: {msg}")
    return got


class NoSuchReleaseError(InputError):
    """The index answered and has no such release (or none is reachable: pip says the same)."""


def unpacked(engine: str, version: str) -> Path:
    """The directory holding ``<engine>/`` of that release's wheel (the files the extractor reads,
    unpacked once, atomically; again when the extractor reads more files than were unpacked)."""
    dest = cache_dir() / f"{engine}-src" / version
    marker = dest / ".complete"
    if marker.is_file() and _reads_key(READS[engine]) in marker.read_text().splitlines()[1:]:
        return dest
    return unpack(download(engine, version), dest, READS[engine])


def _reads_key(reads: tuple[str, ...]) -> str:
    import hashlib

    return "reads " + hashlib.sha256("\n".join(reads).encode()).hexdigest()[:16]


def unpack(whl: Path, dest: Path, reads: tuple[str, ...]) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():  # unpacked for fewer files: the new unpacking takes its place
        old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
        with contextlib.suppress(OSError):
            os.rename(dest, old)
            shutil.rmtree(old, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        try:
            with zipfile.ZipFile(whl) as z:
                for name in z.namelist():
                    if name.endswith(".py") and name.startswith(reads) and ".." not in name.split("/"):
                        z.extract(name, tmp)
        except zipfile.BadZipFile:
            raise InputError(f"{whl}: not a wheel (a wheel is a zip archive)") from None
        (tmp / ".complete").write_text(f"{whl.name}\n{_reads_key(reads)}\n")
        try:
            os.rename(tmp, dest)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)  # another process unpacked it first
    finally:
        if tmp.exists() and tmp != dest:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def releases(engine: str, minimum: str) -> list[str]:
    """Every final release of ``engine`` on the index from ``minimum`` (``pip index versions``)."""
    from workbench.engine.version import Version

    r = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", engine], capture_output=True, text=True, timeout=120
    )
    m = re.search(r"Available versions:\s*(.+)", r.stdout)
    if not m:
        raise WorkbenchError(f"pip index versions {engine}: no version list (is the index reachable?)")
    lo = Version.parse(minimum)
    out = []
    for v in (x.strip() for x in m.group(1).split(",")):
        if re.search(r"(rc|dev|a|b)\d*$", v):
            continue
        try:
            if Version.parse(v) >= lo:
                out.append(v)
        except InputError:
            continue
    return sorted(out, key=Version.parse)
