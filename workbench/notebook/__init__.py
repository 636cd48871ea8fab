"""ipywidgets face: ``from workbench.notebook import PredictorWidget``.

Widgets live one area per module in this package and are found by name on first access, so
importing the package costs nothing and adding a widget touches no other file.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(name)
    for mod in pkgutil.iter_modules(__path__):
        module = import_module(f"{__name__}.{mod.name}")
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
