"""Errors the faces turn into one clear line (never a traceback)."""

from __future__ import annotations

import re
from typing import Protocol


class _Planned(Protocol):
    """What a refusal needs of a ``workbench.confirm.Plan`` (named here without importing it)."""

    summary: str


_BREAKS = re.compile(r"\s*[\r\n]+\s*")


class WorkbenchError(Exception):
    """Something the user can act on. ``str(err)`` is one line naming the input and the rule: a
    line break that reached the message (a library's exception text, a value from a file) is shown
    as a space."""

    exit_code = 1

    def __str__(self) -> str:
        text = super().__str__()
        return _BREAKS.sub(" ", text).strip() if "\n" in text or "\r" in text else text


class InputError(WorkbenchError):
    """Bad input (a malformed number, an unknown convention, an invalid file). CLI exit code 2."""

    exit_code = 2


class ConfirmationRequired(WorkbenchError):
    """A destructive call was made without ``confirm=True``; ``plan`` says exactly what would happen."""

    exit_code = 3

    def __init__(self, plan: _Planned) -> None:
        self.plan = plan
        super().__init__(f"{plan.summary} (not done: pass confirm=True / --yes)")
