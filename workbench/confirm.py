"""Destructive operations describe themselves as a Plan before they run.

The API refuses to act without ``confirm=True`` and raises ``ConfirmationRequired`` carrying the
plan; each face shows the plan (TUI modal, notebook arm-then-confirm button, CLI prompt or
``--yes``) and calls again with ``confirm=True``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.errors import ConfirmationRequired
from workbench.results import Result


@dataclass
class Plan(Result):
    action: str  # "revert", "stop", "overwrite", ...
    target: str  # what it acts on: a path, a server id
    summary: str  # one line: exactly what will happen
    details: list[str] = field(default_factory=list)  # e.g. a diff, the signals to send

    def text(self) -> str:
        return "\n".join([self.summary, *self.details])


def require(plan: Plan, confirm: bool) -> None:
    """Raise ConfirmationRequired unless the caller confirmed this plan."""
    if not confirm:
        raise ConfirmationRequired(plan)
