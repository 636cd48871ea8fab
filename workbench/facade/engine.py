"""Workbench methods for engine capture rules (read from SGLang's and vLLM's own code)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.engine import EngineCapture, Release


class EngineAPI(WorkbenchBase):
    def engine_release(self, engine: str, *, source: str = "auto", read: bool = False, host: Any = None) -> Release:
        """One release as read from its code: its capture rules, model registry and EAGLE-3 drafts.
        ``source``: table | installed | wheel | host | auto (the table, the installed package of that
        release, a kept read; then its wheel only with ``read=True``). ``host``: a host name of the
        workspace (or a Host) whose own installed engine is read there. A release not read raises
        ``ReleaseNotReadError`` (exit 2) naming what was read and the command that reads it."""
        from workbench.engine import release

        if host is not None or source == "host":
            return self._host_release(engine, host)
        return release(engine, source=source, read=read)

    def engine_read(self, what: str) -> Release:
        """Read a release's code now: ``sglang==X``/``vllm==X`` (its wheel, downloaded with pip and kept),
        or a path (an installed or unpacked package folder, or a wheel file)."""
        from workbench.engine import parse_engine, read_at
        from workbench.errors import InputError

        if os.path.exists(os.path.expanduser(what)):
            return read_at(what)
        try:
            spec = parse_engine(what)
        except InputError:
            raise InputError(f"engine read: {what!r} is neither sglang==X / vllm==X nor an existing path") from None
        from workbench.engine.lookup import read_wheel

        return read_wheel(spec)

    def engine_capture(
        self,
        engine: str,
        *,
        target_config: Any = None,
        arch: str | None = None,
        num_layers: int | None = None,
        ids: Sequence[int] | None = None,
        cuda_graph: bool = True,
        host: Any = None,
        source: str = "auto",
        read: bool = False,
    ) -> EngineCapture:
        """What ``engine`` captures for ``ids`` (None: the config has none) on a target: points, fatal,
        CUDA-graph decode points, evidence, and where the release's code was read (``source``)."""
        from workbench.engine import capture

        rel = self._host_release(engine, host) if host is not None or source == "host" else None
        return capture(
            engine,
            target_config=target_config,
            arch=arch,
            num_layers=num_layers,
            ids=ids,
            cuda_graph=cuda_graph,
            source="auto" if rel is not None else source,
            read=read,
            release=rel,
        )

    def _host_release(self, engine: str, host: Any) -> Release:
        from workbench.errors import InputError
        from workbench.remote.engine import host_release

        if host is None:
            raise InputError("source host: no host given (--host NAME)")
        if isinstance(host, str):
            host = self.hosts_registry.get(host)
        return host_release(host, engine)
