"""The user's ``keymap.toml`` checked against the bindings it remaps: an unknown binding id gets a
did-you-mean, and a key taken from another binding that is active at the same time is named."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from textual.binding import Binding

APP_SCOPE = "app"


@dataclass(frozen=True)
class BindingInfo:
    id: str
    keys: tuple[str, ...]  # default keys ("f1", "question_mark")
    scope: str  # "app" (active everywhere) or the screen/modal class it belongs to


def bindings_of(scope: str, bindings: Iterable) -> list[BindingInfo]:
    out = []
    for b in bindings:
        if isinstance(b, Binding) and b.id:
            out.append(BindingInfo(b.id, tuple(k.strip() for k in b.key.split(",")), scope))
    return out


def check_keymap(keymap: Mapping[str, str], known: list[BindingInfo]) -> list[str]:
    """One warning per problem: unknown ids (with the closest known ones) and keys that now belong
    to two bindings active together (the app's keys are active on every screen)."""
    by_id = {b.id: b for b in known}
    warnings = []
    for ident in keymap:
        if ident not in by_id:
            close = difflib.get_close_matches(ident, list(by_id), n=2, cutoff=0.6)
            hint = (
                f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else " (F1 lists every binding id)"
            )
            warnings.append(f"unknown binding id {ident!r}{hint}: ignored")
    effective = {b.id: tuple(k.strip() for k in keymap[b.id].split(",")) if b.id in keymap else b.keys for b in known}
    for ident, value in keymap.items():
        mine = by_id.get(ident)
        if mine is None:
            continue
        for key in (k.strip() for k in value.split(",")):
            for other in known:
                if other.id == ident or key not in effective[other.id]:
                    continue
                if APP_SCOPE in (mine.scope, other.scope) or mine.scope == other.scope:
                    warnings.append(
                        f"{key} is now the key of both {ident!r} and {other.id!r} "
                        f"(only one can work): give {other.id!r} another key"
                    )
    return warnings
