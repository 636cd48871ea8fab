"""Errors the faces turn into one clear line (never a traceback)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.confirm import Plan


class WorkbenchError(Exception):
    """Something the user can act on. ``str(err)`` is one line naming the input and the rule."""

    exit_code = 1


class InputError(WorkbenchError):
    """Bad input (a malformed number, an unknown convention, an invalid file). CLI exit code 2."""

    exit_code = 2


class ConfirmationRequired(WorkbenchError):
    """A destructive call was made without ``confirm=True``; ``plan`` says exactly what would happen."""

    exit_code = 3

    def __init__(self, plan: "Plan") -> None:
        self.plan = plan
        super().__init__(f"{plan.summary} (not done: pass confirm=True / --yes)")
