"""The base of the Workbench facade: workspace, journal, and the journaling helper."""

from __future__ import annotations

import os
from typing import Any, Optional

from workbench.journal import Journal
from workbench.progress import ProgressCallback, noop
from workbench.workspace import Workspace


class WorkbenchBase:
    def __init__(self, workspace: "str | os.PathLike | Workspace | None" = None, *,
                 progress: Optional[ProgressCallback] = None):
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
        self.journal = Journal(self.workspace.journal_path)
        self.progress: ProgressCallback = progress or noop

    @classmethod
    def open(cls, workspace: "str | os.PathLike | None" = None, **kw) -> "WorkbenchBase":
        return cls(workspace, **kw)

    def _record(self, kind: str, subject: str = "", payload: Any = None) -> int:
        """Every operation is journaled: kind like 'predict', 'config.set', 'server.launch'."""
        return self.journal.record(kind, subject, payload)

    def events(self, kind: Optional[str] = None, subject: Optional[str] = None, limit: Optional[int] = None):
        return self.journal.events(kind=kind, subject=subject, limit=limit)

    def close(self) -> None:
        self.journal.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
