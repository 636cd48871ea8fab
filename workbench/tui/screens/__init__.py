"""Screens of the TUI. Each module defines ``SPEC = ScreenSpec(...)``; the app discovers them and
binds ``key`` to the screen with binding id ``screen.<id>`` (remappable in ``keymap.toml``).

Subclass ``workbench.tui.base.WorkbenchScreen`` for the shared header and footer; keep long work in
``@work(thread=True, exclusive=True, group=...)`` workers calling ``self.app.wb``, and report
failures with ``self.app.report(exc)`` or inline.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from importlib import import_module
from typing import Callable


@dataclass(frozen=True)
class ScreenSpec:
    id: str                 # mode name and binding id suffix: "predictor"
    title: str              # "Predictor"
    key: str                # default key to switch to it: "f2" (a function key: a focused Input eats letters)
    factory: Callable       # () -> Screen
    order: int = 50         # position in the footer and the palette


def discover() -> list[ScreenSpec]:
    import workbench.tui.screens as pkg

    specs = []
    for mod in pkgutil.iter_modules(pkg.__path__):
        spec = getattr(import_module(f"{pkg.__name__}.{mod.name}"), "SPEC", None)
        if isinstance(spec, ScreenSpec):
            specs.append(spec)
    return sorted(specs, key=lambda s: (s.order, s.id))
