"""Screens of the TUI. Each module defines ``SPEC = ScreenSpec(...)``; the app discovers them and
binds ``key`` to the screen with binding id ``screen.<id>`` (remappable in ``keymap.toml``).

Subclass ``workbench.tui.base.WorkbenchScreen`` for the shared frame (header, screen keys, busy bar,
error line, footer); keep long work in ``@background("group")`` workers (``workbench.tui.workers``)
calling ``self.app.wb``: a worker that raises is reported in the error line, never a crash. Scope
every rule of the screen's ``.tcss`` to its class (``DoctorScreen #findings``): sheets are global.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module


@dataclass(frozen=True)
class ScreenSpec:
    id: str  # mode name and binding id suffix: "predictor"
    title: str  # "Predictor"
    key: str  # default key to switch to it: "f2" (a function key: a focused Input eats letters)
    factory: Callable  # () -> Screen
    order: int = 50  # position in the footer and the palette


def discover() -> list[ScreenSpec]:
    import workbench.tui.screens as pkg

    specs = []
    for mod in pkgutil.iter_modules(pkg.__path__):
        spec = getattr(import_module(f"{pkg.__name__}.{mod.name}"), "SPEC", None)
        if isinstance(spec, ScreenSpec):
            specs.append(spec)
    return sorted(specs, key=lambda s: (s.order, s.id))
