"""Several samples as one capture, and the inference captures a live server gives for them.

The alignment engine compares one reference capture with one inference capture over the tokens
both hold. To judge a slot over several training samples at once, the samples are laid end to end
on one token axis, each shifted by ``STRIDE`` positions, and the inference side the same way, so
rows pair only within their own sample (by position and token id).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from workbench.errors import InputError, WorkbenchError
from workbench.hidden.view import PACKED, Capture, HiddenTensor

if TYPE_CHECKING:
    import torch

STRIDE = 1 << 24  # position offset between samples: no real sequence is this long


def concat(captures: Sequence[Capture], path: str, fmt: str) -> Capture:
    """One capture holding every sample's rows in order; tensors are matched by name and must be
    present in every sample."""
    if not captures:
        raise InputError(f"{path}: no samples")
    if len(captures) == 1:
        return captures[0]
    names = [t.name for t in captures[0].tensors]
    common = [n for n in names if all(any(t.name == n for t in c.tensors) for c in captures[1:])]
    dropped = [n for n in names if n not in common]
    tensors = []
    for n in common:
        parts = [c.get(n) for c in captures]
        widths = {p.width for p in parts}
        if len(widths) != 1:
            raise InputError(f"{path}: {n} is {sorted(widths)} wide across samples")
        first = parts[0]
        tensors.append(
            HiddenTensor(
                n,
                sum(p.rows for p in parts),
                first.width,
                first.dtype,
                first.role,
                first.physical,
                path,
                _cat_loader(parts),
                first.part_physical,
            )
        )
    ids = pos = mask = None
    tok, posn, lm = [c.token_ids for c in captures], [c.positions for c in captures], [c.loss_mask for c in captures]
    if all(x is not None for x in tok):
        ids = np.concatenate([x[: _rows(c)] for x, c in zip(tok, captures) if x is not None])
    if all(x is not None for x in posn):
        pos = np.concatenate(
            [x[: _rows(c)] + i * STRIDE for i, (x, c) in enumerate(zip(posn, captures)) if x is not None]
        )
    if all(x is not None for x in lm):
        mask = np.concatenate([x[: _rows(c)] for x, c in zip(lm, captures) if x is not None])
    notes = [f"{len(captures)} samples laid end to end"]
    if dropped:
        notes.append(f"left out (not in every sample): {', '.join(dropped[:6])}")
    for i, c in enumerate(captures):
        notes += [f"sample {i}: {n}" for n in c.notes]
    return Capture(
        path,
        fmt,
        tensors,
        token_ids=ids,
        positions=pos,
        loss_mask=mask,
        notes=notes,
        meta={"samples": len(captures), "rows": [_rows(c) for c in captures]},
    )


def _rows(c: Capture) -> int:
    return max((t.rows for t in c.tensors), default=c.rows)


def _cat_loader(parts: Sequence[HiddenTensor]) -> Callable[[], torch.Tensor]:
    def load() -> torch.Tensor:
        import torch

        return torch.cat([p.load() for p in parts])

    return load


def tensor_bytes(ref: Sequence[HiddenTensor], cands: Sequence[HiddenTensor]) -> int:
    """Bytes of the tensors an alignment compares, each counted once at its stored dtype."""
    size = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}
    return int(sum(t.rows * t.width * size.get(t.dtype, 4) for t in list(ref) + list(cands)))


# ------------------------------------------------------------------------------ a live server
def http(url: str, path: str, body: Any = None, timeout: float = 300.0) -> tuple[int, str]:
    """(status, text) of one request to a server on this machine."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url.rstrip("/") + path,
        data=data,
        method="POST" if data is not None or path == "/flush_cache" else "GET",
        headers={"Content-Type": "application/json"} if data else {},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError) as exc:
        raise WorkbenchError(f"{url}{path}: no answer ({getattr(exc, 'reason', exc)})") from None


def flush(url: str, wait: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + wait
    while True:
        status, text = http(url, "/flush_cache")
        if status == 200:
            return
        if status != 400 or time.monotonic() > deadline:
            raise WorkbenchError(f"{url}/flush_cache: {status} {text[:160]}")
        time.sleep(0.5)


def generate_ids(
    url: str, ids: Sequence[int], *, hidden: bool, max_new_tokens: int = 1, timeout: float = 600.0
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "input_ids": [int(i) for i in ids],
        "sampling_params": {"max_new_tokens": int(max_new_tokens), "temperature": 0.0},
    }
    if hidden:
        body["return_hidden_states"] = True
    status, text = http(url, "/generate", body, timeout=timeout)
    if status != 200:
        raise WorkbenchError(f"{url}/generate: {status} {text[:200]}")
    return cast("dict[str, Any]", json.loads(text))


def payload_capture(
    ids: np.ndarray, response: dict[str, Any], part_points: Sequence[str | None] | None, source: str
) -> Capture:
    """The prefill rows of a ``return_hidden_states`` answer as a capture: one packed [T, K*H]
    tensor whose parts carry the points the engine captures."""
    meta = response.get("meta_info") or {}
    hs = meta.get("hidden_states")
    if not isinstance(hs, list) or not hs or hs[0] is None:
        raise WorkbenchError(f"{source}: the answer has no meta_info.hidden_states")
    pre = np.asarray(hs[0], dtype=np.float32)
    if pre.ndim == 3 and pre.shape[0] == 1:
        pre = pre[0]
    if pre.ndim != 2:
        raise WorkbenchError(f"{source}: prefill hidden states have shape {list(pre.shape)}")
    rows = pre.shape[0]
    offset = len(ids) - rows  # rows served from a prefix cache have no hidden state
    if offset < 0:
        raise WorkbenchError(f"{source}: {rows} prefill rows for {len(ids)} input ids")
    data = pre

    def load() -> torch.Tensor:
        import torch

        return torch.from_numpy(data)

    t = HiddenTensor(
        "hidden_states",
        rows,
        pre.shape[1],
        "float32",
        PACKED,
        None,
        source,
        load,
        part_physical=list(part_points) if part_points else None,
    )
    notes = [f"prefill rows start at position {offset} (prefix cache)"] if offset else []
    return Capture(
        source,
        "sglang-payload",
        [t],
        token_ids=np.asarray(ids[offset:], dtype=np.int64),
        positions=np.arange(offset, len(ids), dtype=np.int64),
        notes=notes,
        meta={"prefill_rows": rows},
    )


def dump_passes(folder: str | Path) -> list[Path]:
    """The target's pass files of a tensor-dump folder, newest run, in pass order."""
    from workbench.hidden.sglang_dump import PASS_FILE

    root = Path(folder)
    if (root / "target").is_dir():
        root = root / "target"
    runs = [d for d in root.iterdir() if d.is_dir() and _rank(d.name) == 0] if root.is_dir() else []
    if not runs:
        raise InputError(f"{folder}: no TP0_PP*_Rank*_pid* folder (an SGLang tensor dump?)")
    run = max(runs, key=lambda d: d.stat().st_mtime)
    return sorted((p for p in run.iterdir() if PASS_FILE.match(p.name)), key=lambda p: _pass_number(p.name))


def _rank(name: str) -> int | None:
    from workbench.hidden.sglang_dump import RANK_DIR

    m = RANK_DIR.match(name)
    return int(m.group(1)) if m else None


def _pass_number(name: str) -> int:
    from workbench.hidden.sglang_dump import PASS_FILE

    m = PASS_FILE.match(name)
    return int(m.group(1)) if m else -1


def dump_for_ids(folder: str | Path, samples: Sequence[np.ndarray]) -> list[Capture]:
    """For each sample, the dump pass that prefilled exactly its token ids (read lazily)."""
    from workbench.hidden.pt_io import load_pt
    from workbench.hidden.sglang_dump import BATCH_INFO, read_pass_dump
    from workbench.hidden.view import as_int_array

    passes = dump_passes(folder)
    ids_of: list[np.ndarray | None] = []
    for f in passes:
        d = load_pt(f)
        key = next((k for k in d if k.endswith(BATCH_INFO + "input_ids")), None)
        ids_of.append(as_int_array(d[key], str(f)) if key else None)
    out: list[Capture] = []
    for i, want in enumerate(samples):
        hit = [
            j for j, got in enumerate(ids_of) if got is not None and len(got) == len(want) and np.array_equal(got, want)
        ]
        if not hit:
            raise WorkbenchError(
                f"{folder}: no pass prefilled the {len(want)} tokens of sample {i} "
                f"({len(passes)} passes; was the cache flushed?)"
            )
        out.append(read_pass_dump(folder, passes=slice(hit[-1], hit[-1] + 1)))
    return out


# ------------------------------------------------------------------------------ a vLLM server
def _const(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: t


def vllm_reset(url: str) -> None:
    """Empty the prefix cache where the server has the route (a development route of vLLM's; without
    it a cached prefix's blocks still hold the states its first prefill wrote, the same values)."""
    status, text = http(url, "/reset_prefix_cache", {})
    if status not in (200, 404):
        raise WorkbenchError(f"{url}/reset_prefix_cache: {status} {text[:160]}")


def vllm_extract(url: str, ids: Sequence[int], timeout: float = 600.0) -> dict[str, Any]:
    """One prefill of ``ids`` through a vLLM server that extracts hidden states: its answer."""
    status, text = http(url, "/v1/models")
    models = json.loads(text).get("data") if status == 200 else None
    if not models:
        raise WorkbenchError(f"{url}/v1/models: {status} {text[:160]}")
    body = {"model": models[0]["id"], "prompt": [int(i) for i in ids], "max_tokens": 1, "temperature": 0.0}
    status, text = http(url, "/v1/completions", body, timeout=timeout)
    if status != 200:
        raise WorkbenchError(f"{url}/v1/completions: {status} {text[:200]}")
    return cast("dict[str, Any]", json.loads(text))


def vllm_capture(
    ids: np.ndarray, response: dict[str, Any], extract_ids: Sequence[int], points: Sequence[str | None], source: str
) -> Capture:
    """The states a vLLM ``extract_hidden_states`` server wrote for one prefill, one candidate per id
    (``points``: what vLLM's rule says each id captures), read once the server's write lock is free."""
    import fcntl

    from safetensors.torch import load_file

    path = (response.get("kv_transfer_params") or {}).get("hidden_states_path")
    if not path:
        raise WorkbenchError(f"{source}: the answer has no kv_transfer_params.hidden_states_path")
    lock = Path(path + ".lock")
    if lock.exists():
        with open(lock) as fh:
            fcntl.flock(fh, fcntl.LOCK_SH)  # the server holds it exclusively until the file is written
            data = load_file(path, device="cpu")
    else:
        data = load_file(path, device="cpu")
    hs, got = data["hidden_states"], data["token_ids"].numpy().astype(np.int64)
    if hs.ndim != 3 or hs.shape[1] != len(extract_ids):
        raise WorkbenchError(f"{path}: hidden_states {list(hs.shape)}, expected [T, {len(extract_ids)}, H]")
    rows = min(hs.shape[0], len(ids))
    if not np.array_equal(got[:rows], np.asarray(ids[:rows])):
        raise WorkbenchError(f"{path}: its token ids are not the sample's")
    tensors = []
    for j, (k, p) in enumerate(zip(sorted(set(extract_ids)), points)):
        part = hs[:rows, j].contiguous()
        tensors.append(
            HiddenTensor(
                f"id{k}",
                rows,
                part.shape[1],
                str(part.dtype).replace("torch.", ""),
                physical=p,
                source=path,
                loader=_const(part),
            )
        )
    return Capture(
        source,
        "vllm-hidden-states",
        tensors,
        token_ids=np.asarray(ids[:rows], dtype=np.int64),
        positions=np.arange(rows, dtype=np.int64),
        notes=[f"vLLM extract_hidden_states: ids {sorted(set(extract_ids))}"],
        meta={"prefill_rows": rows, "file": path},
    )
