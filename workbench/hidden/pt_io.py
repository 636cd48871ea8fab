"""Safe loading of torch pickles: ``torch.load(weights_only=True)`` only, memory-mapped when the
file is in the zip format, gzip streams inflated first. Every failure becomes one line."""

from __future__ import annotations

import gzip
import io
import pickle
import struct
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError

if TYPE_CHECKING:
    import os


def load_pt(path: str | os.PathLike[str], *, mmap: bool = True) -> Any:
    import warnings

    path = Path(path)
    with warnings.catch_warnings():  # torch warns about pickle protocols: noise beside the one line
        warnings.simplefilter("ignore")
        return _load(path, mmap)


def _load(path: Path, mmap: bool) -> Any:
    import torch

    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                data = fh.read()
            return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        if mmap and zipfile.is_zipfile(path):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unsafe pickle"
        raise InputError(f"{path}: refused to unpickle (weights_only): {first[:160]}") from None
    except (
        EOFError,
        gzip.BadGzipFile,
        zipfile.BadZipFile,
        OSError,
        zlib.error,
        struct.error,
        ValueError,
        KeyError,
        IndexError,
        TypeError,
        AttributeError,
        MemoryError,
        RecursionError,
    ) as exc:
        # a damaged stream fails inside gzip/zlib/zipfile or torch's unpickler, in many ways
        raise InputError(f"{path}: truncated or corrupt file ({type(exc).__name__}: {str(exc)[:120]})") from None
    except RuntimeError as exc:
        raise InputError(f"{path}: truncated or corrupt torch file ({str(exc).splitlines()[0][:160]})") from None
