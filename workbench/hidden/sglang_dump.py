"""SGLang tensor dumps: the per-pass dump folders and DUMPER ``*.pt`` files.

Per-pass dumps (``--debug-tensor-dump-output-folder DIR``; under EAGLE ``DIR/target`` and
``DIR/draft``): ``TP{t}_PP{p}_Rank{r}_pid{pid}/Pass{NNNNN}.pt``, each a dict of leaf-module outputs
plus ``model.forward_batch_info.{input_ids,positions,seq_lens}``. Decoder layers are not leaves,
so the residual stream is read from the norms that take it: ``model.layers.{k}.input_layernorm``
returns ``[normed, residual]`` for k >= 1 and its ``residual`` is out(k-1); ``model.norm`` returns
``[post-norm, pre-norm residual]``; ``model.embed_tokens`` is the embedding output. The top-level
``model`` entry is written into the *next* pass file by the hook, so it is ignored.

DUMPER files (``DUMPER_DIR/<exp>/step=S___rank=R___dump_index=I___name=NAME___k=v.pt`` holding
``{"value", "meta"}``): one tensor per file, grouped by name and tags, concatenated over steps.
``non_intrusive__…layers.{k}.output`` pairs ``(hidden, residual)`` are summed (that sum is what
SGLang captures), ``…input_layernorm.output`` / ``…norm.output`` pairs map as above.

Rows of all passes/steps are concatenated in order, with their token ids and positions; the
alignment keeps, per (position, token id), the first row (a prefill row before any re-verified one).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import numpy as np

from workbench.errors import InputError
from workbench.hidden.pt_io import load_pt
from workbench.hidden.view import FINAL, LAYER, Capture, HiddenTensor, as_int_array, dtype_name
from workbench.numbers import NON_NEGATIVE, integer

if TYPE_CHECKING:
    import numpy.typing as npt
    import torch

RANK_DIR = re.compile(r"^TP(\d+)_PP(\d+)_Rank(\d+)_pid(\d+)$")
PASS_FILE = re.compile(r"^Pass(\d+)\.pt$")
BATCH_INFO = ".forward_batch_info."
LAYER_NORM_IN = re.compile(r"(?:^|\.)layers\.(\d+)\.input_layernorm$")
LAYER_OUT = re.compile(r"(?:^|\.)layers\.(\d+)$")
# Which part of a module's output a tensor is: the whole output (None), an index into a list or
# tuple output, or "sum" (hidden + residual of a DUMPER layer output pair).
Part = str | int | None


def is_pass_dump(path: str | os.PathLike[str]) -> bool:
    path = Path(path)
    return path.is_dir() and (
        any(RANK_DIR.match(p.name) for p in path.iterdir() if p.is_dir()) or (path / "target").is_dir()
    )


def is_dumper(path: str | os.PathLike[str]) -> bool:
    path = Path(path)
    if path.is_file():
        return "___" in path.name and path.name.startswith("step=")
    return path.is_dir() and any(p.name.startswith("step=") for p in path.rglob("step=*.pt"))


# ---------------------------------------------------------------------------- legacy per-pass
def read_pass_dump(
    path: str | os.PathLike[str],
    *,
    side: str = "target",
    tp_rank: int = 0,
    everything: bool = False,
    passes: slice | None = None,
) -> Capture:
    root = Path(path)
    tp_rank = integer(tp_rank, "tp_rank", NON_NEGATIVE)
    if side not in ("target", "draft"):
        raise InputError(f"side: {side!r}; expected target or draft")
    if (root / side).is_dir():
        root = root / side
    notes: list[str] = []
    pass_lists = _pass_files(root, path, tp_rank, notes)
    n_pass = min(len(x) for x in pass_lists)
    if n_pass == 0:
        raise InputError(f"{root}: no Pass*.pt files")
    index = list(range(n_pass))[passes] if passes is not None else list(range(n_pass))

    ids_parts: list[npt.NDArray[np.int64]] = []
    pos_parts: list[npt.NDArray[np.int64]] = []
    counts: list[int] = []
    entries: dict[str, _Entry] = {}
    for k, i in enumerate(index):
        ids = pos = None
        for pp_i, files in enumerate(pass_lists):
            got_ids, got_pos = _read_pass(files[i], pp_i, entries if k == 0 else None)
            ids = got_ids if got_ids is not None else ids
            pos = got_pos if got_pos is not None else pos
        if ids is None:
            raise InputError(f"{pass_lists[0][i]}: no model.forward_batch_info.input_ids in this pass")
        ids_parts.append(ids)
        pos_parts.append(pos if pos is not None else np.full(len(ids), -1, dtype=np.int64))
        counts.append(len(ids))
    token_ids = np.concatenate(ids_parts)
    positions: np.ndarray | None
    positions = np.concatenate(pos_parts)
    if (positions < 0).any():
        positions = None
        notes.append("no positions in the dump: rows aligned by token ids only")
    rows = int(token_ids.size)

    tensors: list[HiddenTensor] = []
    for key, (pp_i, name, part, width, dtype) in entries.items():
        physical, role = _physical(name, part)
        if physical is None and not everything:
            continue
        files = [pass_lists[pp_i][i] for i in index]
        tensors.append(
            HiddenTensor(
                key, rows, width, dtype, role, physical, str(files[0].parent), _pass_loader(files, name, part, counts)
            )
        )
    if not tensors and entries:
        notes.append("no residual-stream points recognised; every 2-D tensor is offered")
        return read_pass_dump(path, side=side, tp_rank=tp_rank, everything=True, passes=passes)
    tensors.sort(key=_order)
    return Capture(
        str(root),
        "sglang-tensor-dump",
        tensors,
        token_ids=token_ids,
        positions=positions,
        notes=notes,
        meta={"passes": len(index), "rows_per_pass": counts[:8]},
    )


def _pass_files(root: Path, path: str | os.PathLike[str], tp_rank: int, notes: list[str]) -> list[list[Path]]:
    """Per pipeline stage, the Pass*.pt files of TP rank ``tp_rank``'s newest run, in order."""
    rank_dirs = [p for p in root.iterdir() if p.is_dir() and RANK_DIR.match(p.name)] if root.is_dir() else []
    rank_dirs = [p for p in rank_dirs if int(cast("re.Match[str]", RANK_DIR.match(p.name)).group(1)) == tp_rank]
    if not rank_dirs:
        raise InputError(f"{path}: no TP{tp_rank}_PP*_Rank*_pid* folders (an SGLang tensor-dump folder?)")
    by_pp: dict[int, list[Path]] = defaultdict(list)
    for d in rank_dirs:
        by_pp[int(cast("re.Match[str]", RANK_DIR.match(d.name)).group(2))].append(d)
    pass_lists: list[list[Path]] = []
    for pp, dirs in sorted(by_pp.items()):
        dirs.sort(key=lambda d: d.stat().st_mtime)
        if len(dirs) > 1:
            notes.append(f"PP{pp}: {len(dirs)} runs found, reading the newest ({dirs[-1].name})")
        pass_lists.append(
            sorted(
                (p for p in dirs[-1].iterdir() if PASS_FILE.match(p.name)),
                key=lambda p: int(cast("re.Match[str]", PASS_FILE.match(p.name)).group(1)),
            )
        )
    return pass_lists


_Entry = tuple[int, str, "int | None", int, str]  # (pp index, module name, list index or None, width, dtype)


def _read_pass(
    f: Path, pp_i: int, entries: dict[str, _Entry] | None
) -> tuple[npt.NDArray[np.int64] | None, npt.NDArray[np.int64] | None]:
    """A pass file's token ids and positions (None where it has none); its 2-D floating tensors
    into ``entries`` where given (the first pass)."""
    d = load_pt(f)
    if not isinstance(d, dict):
        raise InputError(f"{f}: expected a dict of tensors, got {type(d).__name__}")
    ids = pos = None
    for name, v in d.items():
        if not isinstance(name, str):
            raise InputError(f"{f}: expected tensor names as keys, got {type(name).__name__}")
        if name.endswith(BATCH_INFO + "input_ids"):
            ids = as_int_array(v, f"{f}:{name}")
        elif name.endswith(BATCH_INFO + "positions"):
            pos = as_int_array(v, f"{f}:{name}")
        elif entries is not None and name != "model":
            for part, t in _parts(v):
                if hasattr(t, "dim") and t.dim() == 2 and t.dtype.is_floating_point:
                    key = name if part is None else f"{name}[{part}]"
                    entries[key] = (pp_i, name, part, t.shape[1], dtype_name(t.dtype))
    return ids, pos


def _parts(v: Any) -> list[tuple[int | None, Any]]:
    if isinstance(v, (list, tuple)):
        return [(i, t) for i, t in enumerate(v)]
    return [(None, v)]


def _physical(name: str, part: Part) -> tuple[str | None, str]:
    base = name[len("non_intrusive__") :] if name.startswith("non_intrusive__") else name
    base = re.sub(r"\.output$", "", base)
    if base.endswith("embed_tokens") and part is None:
        return "embed", LAYER
    m = LAYER_NORM_IN.search(base)
    if m and part == 1:
        k = int(m.group(1))
        return (f"out({k - 1})" if k >= 1 else None), LAYER
    if re.search(r"(?:^|\.)model\.norm$|^norm$", base):
        if part == 0:
            return "final-postnorm", FINAL
        if part == 1:
            return "final-prenorm", FINAL
        return "final-postnorm", FINAL
    m = LAYER_OUT.search(base)
    if m and part == "sum":
        return f"out({int(m.group(1))})", LAYER
    return None, LAYER


def _pass_loader(files: list[Path], name: str, part: int | None, counts: list[int]) -> Callable[[], torch.Tensor]:
    def load() -> torch.Tensor:
        import torch

        chunks: list[torch.Tensor] = []
        for f, n in zip(files, counts):
            d = load_pt(f)
            v = d.get(name) if isinstance(d, dict) else None
            t = _part(v, part)
            if t is None or not hasattr(t, "dim") or t.dim() != 2:
                raise InputError(
                    f"{f}: {name}{'' if part is None else f'[{part}]'} is missing or not a "
                    "[rows, width] tensor in this pass"
                )
            if t.shape[0] != n:
                raise InputError(f"{f}: {name} has {t.shape[0]} rows for {n} tokens in this pass")
            if chunks and t.shape[1] != chunks[0].shape[1]:
                raise InputError(f"{f}: {name} is {t.shape[1]} wide here, {chunks[0].shape[1]} in the first pass")
            chunks.append(t)
        return torch.cat(chunks) if len(chunks) > 1 else chunks[0]

    return load


def _part(v: Any, part: Part) -> Any:
    if part is None:
        return v
    return v[part] if isinstance(v, (list, tuple)) and isinstance(part, int) and part < len(v) else None


def _order(t: HiddenTensor) -> tuple[int, int, int, str]:
    p = t.physical or ""
    m = re.match(r"out\((\d+)\)", p)
    return (
        0 if p == "embed" else 1 if m else 2 if p.startswith("final") else 3,
        int(m.group(1)) if m else 0,
        0 if "pre" in p else 1,
        t.name,
    )


# ---------------------------------------------------------------------------- DUMPER
def _tags(name: str) -> dict[str, str]:
    stem = name[:-3] if name.endswith(".pt") else name
    out: dict[str, str] = {}
    for part in stem.split("___"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k] = v
    return out


def _dumper_tensors(
    key: tuple[tuple[str, str], ...], items: list[tuple[int, int, Path]], everything: bool
) -> list[HiddenTensor]:
    """The tensors of one DUMPER series (its files in step order): its output, or each part of a
    list or tuple output (and, for a layer's (hidden, residual) pair, their sum); those at no
    residual-stream point only with ``everything``."""
    name = dict(key)["name"]
    if name.endswith(("input_ids", "positions", "seq_lens")):
        return []
    first = _value(items[0][2])
    label = name + "".join(f"[{k}={v}]" for k, v in key if k != "name")
    variants: list[tuple[str | int | None, Any]] = []
    if isinstance(first, (list, tuple)):
        if len(first) == 2 and LAYER_OUT.search(re.sub(r"\.output$", "", name.replace("non_intrusive__", ""))):
            variants.append(("sum", first[0]))
        variants += list(enumerate(first))
    else:
        variants.append((None, first))
    out: list[HiddenTensor] = []
    for part, t in variants:
        if not hasattr(t, "dim") or not t.dtype.is_floating_point or t.dim() < 2:
            continue
        physical, role = _physical(name, part)
        if physical is None and not everything:
            continue
        out.append(
            HiddenTensor(
                label if part is None else f"{label}[{part}]",
                sum(_value_rows(f, part) for _, _, f in items),
                t.shape[-1],
                dtype_name(t.dtype),
                role,
                physical,
                str(items[0][2].parent),
                _dumper_loader([f for _, _, f in items], part),
            )
        )
    return out


def read_dumper(path: str | os.PathLike[str], *, rank: int = 0, everything: bool = False) -> Capture:
    root = Path(path)
    rank = integer(rank, "rank", NON_NEGATIVE)
    files = [root] if root.is_file() else sorted(root.rglob("step=*.pt"))
    if not files:
        raise InputError(f"{path}: no DUMPER step=*.pt files")
    groups: dict[tuple[tuple[str, str], ...], list[tuple[int, int, Path]]] = defaultdict(list)
    for f in files:
        tags = _tags(f.name)
        if "name" not in tags or "step" not in tags:
            continue
        num = {
            k: integer(tags.get(k, "0"), f"{f}: file name tag {k}", NON_NEGATIVE)
            for k in ("rank", "step", "dump_index")
        }
        if num["rank"] != rank:
            continue
        key = tuple(sorted((k, v) for k, v in tags.items() if k not in ("step", "rank", "dump_index")))
        groups[key].append((num["step"], num["dump_index"], f))
    if not groups:
        raise InputError(f"{path}: no DUMPER files for rank {rank}")
    for g in groups.values():
        g.sort()

    def series(pred: Callable[[str], bool]) -> npt.NDArray[np.int64] | None:
        for key, items in groups.items():
            if pred(dict(key)["name"]):
                return np.concatenate([as_int_array(_value(f), str(f)) for _, _, f in items])
        return None

    token_ids = series(lambda n: n.split(".")[-1] == "input_ids" or n.endswith("input_ids"))
    positions = series(lambda n: n.endswith("positions"))
    tensors = [t for key, items in groups.items() for t in _dumper_tensors(key, items, everything)]
    if not tensors and not everything:
        return read_dumper(path, rank=rank, everything=True)
    tensors.sort(key=_order)
    row_counts = {t.rows for t in tensors}
    notes: list[str] = []
    if token_ids is not None and row_counts and row_counts != {len(token_ids)}:
        notes.append(
            f"token ids ({len(token_ids)}) do not cover the tensor rows ({sorted(row_counts)}): rows aligned by index"
        )
        token_ids = positions = None
    return Capture(str(root), "sglang-dumper", tensors, token_ids=token_ids, positions=positions, notes=notes)


def _value(f: Path) -> Any:
    d = load_pt(f)
    if isinstance(d, dict) and "value" in d:
        return d["value"]
    raise InputError(f"{f}: expected a DUMPER dict with 'value' and 'meta'")


def _pick(v: Any, part: Part, f: Path | None = None) -> torch.Tensor:
    """The tensor ``part`` of a DUMPER value, as [rows, width]; one line naming the file otherwise."""
    if part == "sum":
        a, b = _part(v, 0), _part(v, 1)
        t = a + b if _tensor(a) and _tensor(b) and a.shape == b.shape else None
    else:
        t = _part(v, part)
    if not _tensor(t) or t.dim() < 2:
        raise InputError(
            f"{f}: value{'' if part is None else f'[{part}]'} is not a tensor of rows like the first file of its series"
        )
    return t.reshape(-1, t.shape[-1])


def _tensor(t: Any) -> TypeGuard[torch.Tensor]:
    return (
        hasattr(t, "dim")
        and hasattr(t, "reshape")
        and getattr(t, "dtype", None) is not None
        and t.dtype.is_floating_point
    )


def _value_rows(f: Path, part: Part) -> int:
    return int(_pick(_value(f), part, f).shape[0])


def _dumper_loader(files: list[Path], part: Part) -> Callable[[], torch.Tensor]:
    def load() -> torch.Tensor:
        import torch

        chunks = [_pick(_value(f), part, f) for f in files]
        if len({c.shape[1] for c in chunks}) > 1:
            raise InputError(
                f"{files[0].parent}: the files of one series differ in width {sorted({c.shape[1] for c in chunks})}"
            )
        return torch.cat(chunks) if len(chunks) > 1 else chunks[0]

    return load
