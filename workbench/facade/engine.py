"""Workbench methods for engine capture rules (read from SGLang's own code)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.engine.rule import CaptureRule, EngineCapture
    from workbench.hosts.base import Host


class EngineAPI(WorkbenchBase):
    def engine_capture(
        self,
        engine: str,
        *,
        target_config: str | os.PathLike[str] | None = None,
        arch: str | None = None,
        num_layers: int | None = None,
        ids: Sequence[int] | None = None,
        cuda_graph: bool = True,
        host: str | Host | None = None,
        source: str = "auto",
    ) -> EngineCapture:
        """What ``engine`` captures for ``ids`` (None: the config has none) on a target: points, fatal,
        CUDA-graph decode points, evidence, and the source used (host | table | wheel). ``host``: a
        host name of the workspace (its own SGLang is asked first) or a Host."""
        from workbench.engine import capture

        if isinstance(host, str):
            host = self._hosts.get(host)
        return capture(
            engine,
            target_config=target_config,
            arch=arch,
            num_layers=num_layers,
            ids=ids,
            cuda_graph=cuda_graph,
            host=host,
            source=source,
        )

    def engine_rules(
        self, engine: str, *, source: str = "auto", host: str | Host | None = None
    ) -> tuple[list[CaptureRule], str, str]:
        """(rules, version, source used) of one release: the capture rule of each EAGLE-3 model
        class, read from that release's own code. ``source``: "auto", "host", "table" or "wheel";
        ``host``: a host name of the workspace (its installed SGLang is read first) or a Host."""
        if isinstance(host, str):
            host = self._hosts.get(host)
        from workbench.engine.lookup import release_rules

        return release_rules(engine, source=source, host=host)
