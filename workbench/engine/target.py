"""A target's architecture and layer count from its HF config dir (multimodal wrappers included)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from workbench.errors import InputError

# where a multimodal wrapper's config keeps its language model's (transformers: text_config; DeepSeek-VL
# and Kimi-VL style: language_config; InternVL style: llm_config)
TEXT_KEYS = ("text_config", "language_config", "llm_config")


def text_config_key(cfg: dict[str, Any]) -> str | None:
    """The key of the language model's sub-config in a target's HF config, or None (a text model).
    The one reading of it: every target-config reader goes through this and ``text_config``."""
    for k in TEXT_KEYS:
        if isinstance(cfg.get(k), dict):
            return k
    return None


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's config: the wrapper's keys overlaid with its text sub-config's (the
    sub-config wins), or ``cfg`` itself for a text model."""
    k = text_config_key(cfg)
    return {**cfg, **cfg[k]} if k else cfg


def read_target_archs(path: str | os.PathLike[str]) -> tuple[list[str], int]:
    """(the config's ``architectures``, num_hidden_layers): what an engine's registry resolves, and the
    layer count (a multimodal wrapper's from its text sub-config)."""
    arch, n, _text = read_target(path)
    p = Path(path).expanduser()
    cfg = json.loads((p / "config.json" if p.is_dir() else p).read_text())
    return [a for a in cfg["architectures"] if isinstance(a, str)] or [arch], n


def read_target(path: str | os.PathLike[str]) -> tuple[str, int, str | None]:
    """(architecture, num_hidden_layers, text architecture or None) from ``config.json`` in ``path``."""
    p = Path(path).expanduser()
    f = p / "config.json" if p.is_dir() else p
    try:
        cfg = json.loads(f.read_text())
    except FileNotFoundError:
        raise InputError(f"{f}: no such file (expected an HF config dir with config.json)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{f}: not valid JSON ({exc})") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{f}: expected a JSON object")
    archs = cfg.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise InputError(f"{f}: field 'architectures' must be a non-empty list of class names")
    n = cfg.get("num_hidden_layers")
    text_arch = None
    k = text_config_key(cfg)
    if n is None and k and cfg[k].get("num_hidden_layers") is not None:
        sub = cfg[k]
        n = sub["num_hidden_layers"]
        ta = sub.get("architectures")
        text_arch = ta[0] if isinstance(ta, list) and ta and isinstance(ta[0], str) else None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(
            f"{f}: field 'num_hidden_layers' (or text_config.num_hidden_layers) must be a positive integer, got {n!r}"
        )
    return archs[0], n, text_arch
