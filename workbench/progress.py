"""Progress events for long operations; faces subscribe with a callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from workbench.results import Result


@dataclass
class Progress(Result):
    stage: str
    done: float = 0.0
    total: float | None = None
    message: str = ""


ProgressCallback = Callable[[Progress], None]


def noop(_: Progress) -> None:
    return None
