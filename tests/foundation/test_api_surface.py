"""The API a script uses: every public ``Workbench`` method says what it does and takes typed
arguments (``Any`` only inside JSON-like containers, never as a whole parameter's type)."""

from __future__ import annotations

import inspect
import re

from workbench.api import Workbench


def _public_members():
    for name, member in inspect.getmembers(Workbench):
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            yield name, member.fget
        elif inspect.isfunction(member) or inspect.ismethod(member):
            yield name, member


def test_every_public_method_has_a_docstring():
    missing = [name for name, func in _public_members() if not (func.__doc__ or "").strip()]
    assert missing == []


def test_no_public_parameter_is_typed_any():
    """``predict(acc: Any)`` said nothing of what acc is; ``dict[str, Any]`` (a JSON object) does."""
    loose = []
    for name, func in _public_members():
        for param in inspect.signature(func).parameters.values():
            hint = param.annotation
            if hint is inspect.Parameter.empty or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                continue
            text = hint if isinstance(hint, str) else getattr(hint, "__name__", str(hint))
            # Any as the type itself, or as a member of a top-level union ("Any | None")
            if re.fullmatch(r"\s*(Any|Any\s*\|.*|.*\|\s*Any|.*\|\s*Any\s*\|.*)\s*", text) and "[" not in text:
                loose.append(f"{name}({param.name}: {text})")
    assert loose == []
