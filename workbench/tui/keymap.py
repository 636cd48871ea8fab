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


def screen_bindings_of(app, front: type | None) -> list[tuple[str, str, list[Binding]]]:
    """(scope, title, bindings) for every key of the workbench, in the order help and the palette
    list them: the keys that work everywhere (scope ``APP_SCOPE``), the screen in front, every
    other screen, then the tables', the log's and the dialogs' own."""
    from workbench.tui.base import WorkbenchScreen
    from workbench.tui.screens.help import HelpScreen
    from workbench.tui.widgets.confirm import ConfirmModal
    from workbench.tui.widgets.logview import LogView
    from workbench.tui.widgets.table import Table

    everywhere = [
        *app.BINDINGS,
        Binding(app.COMMAND_PALETTE_BINDING, "command_palette", "Command palette", show=True),
        *WorkbenchScreen.BINDINGS,
    ]
    groups: list[tuple[str, str, list[Binding]]] = [(APP_SCOPE, APP_SCOPE, _own(everywhere))]
    screens = [(s.title, s.factory) for s in app.specs if isinstance(s.factory, type)]
    screens.sort(key=lambda ts: ts[1] is not front)  # stable: the front one first, the rest in order
    for title, cls in screens:
        widgets = [b for w in getattr(cls, "KEYS_OF", ()) for b in _class_bindings(w, stop=Table)]
        groups.append((cls.__name__, title, _own(_class_bindings(cls, stop=WorkbenchScreen) + widgets)))
    for title, cls in (
        ("tables", Table),
        ("server log", LogView),
        ("confirm", ConfirmModal),
        ("help", HelpScreen),
    ):
        groups.append((cls.__name__, title, _own(_class_bindings(cls, stop=object))))
    return groups


def _class_bindings(cls: type, stop: type) -> list:
    """The BINDINGS a class declares itself and through its bases, up to (not including) ``stop``."""
    out: list = []
    for klass in cls.__mro__:
        if klass is stop:
            break
        out += list(klass.__dict__.get("BINDINGS", ()))
    return out


def _own(bindings: Iterable) -> list[Binding]:
    """The workbench's own keys: those with an id (not every cursor key of a DataTable or an Input),
    and the command palette's."""
    return [b for b in bindings if isinstance(b, Binding) and (b.id or b.action == "command_palette")]
