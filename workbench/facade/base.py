"""The base of the Workbench facade: workspace, journal, and the journaling helper."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from workbench.journal import Journal
from workbench.progress import ProgressCallback, noop
from workbench.workspace import Workspace

if TYPE_CHECKING:
    from typing_extensions import Self

    from workbench.hosts import Hosts
    from workbench.journal import Event


class WorkbenchBase:
    def __init__(
        self,
        workspace: str | os.PathLike[str] | Workspace | None = None,
        *,
        progress: ProgressCallback | None = None,
    ):
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace.open(workspace)
        self.journal = Journal(self.workspace.journal_path)
        self.progress: ProgressCallback = progress or noop

    @classmethod
    def open(cls, workspace: str | os.PathLike[str] | None = None, *, progress: ProgressCallback | None = None) -> Self:
        """The workbench on a workspace folder (default: ``$EAGLE_WORKBENCH_HOME`` or
        ``~/.eagle-workbench``; created if missing). ``progress`` receives the ``Progress`` events
        of long operations. ``workbench.toml`` is read when a section of it is needed (and again
        when it changes): a broken file fails only what needs hosts, profiles or configs."""
        return cls(workspace, progress=progress)

    @property
    def _hosts(self) -> Hosts:
        """The workspace's hosts (local and SSH), one registry for every area of the facade."""
        reg = self.__dict__.get("_hosts_registry")
        if reg is None:
            from workbench.hosts import Hosts

            reg = self.__dict__["_hosts_registry"] = Hosts(lambda: self.workspace.section("hosts"))
        return reg

    def _record(self, kind: str, subject: str = "", payload: Any = None) -> int:
        """Every operation is journaled: kind like 'predict', 'config.set', 'server.launch'."""
        return self.journal.record(kind, subject, payload)

    def events(self, kind: str | None = None, subject: str | None = None, limit: int | None = None) -> list[Event]:
        """Journal events, oldest first: ``kind`` matches exactly or by prefix with ``"config.*"``,
        ``subject`` exactly; ``limit`` keeps the newest ones."""
        return self.journal.events(kind=kind, subject=subject, limit=limit)

    def revision(self) -> tuple[int, tuple[int, int]]:
        """What a face compares to know whether to show things again: it changes whenever anything
        is written to the journal (by this process or another) and whenever ``workbench.toml``
        changes. One cheap read; no host is contacted."""
        return self.journal.revision(), self.workspace.config_stamp()

    def settings_problem(self) -> str | None:
        """What is wrong with ``workbench.toml``, in one line (None when it reads): the faces show
        it where hosts and profiles are needed, and go on with everything else."""
        return self.workspace.settings_error

    def close(self) -> None:
        """Close the hosts' connections and the journal (``with Workbench.open(...) as wb:`` does)."""
        reg = self.__dict__.pop("_hosts_registry", None)
        if reg is not None:
            reg.close()
        self.journal.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
