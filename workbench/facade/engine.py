"""Workbench methods for engine capture rules (read from SGLang's own code)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.engine.rule import CaptureRule, EngineCapture


class EngineAPI(WorkbenchBase):
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
    ) -> EngineCapture:
        """What ``engine`` captures for ``ids`` (None: the config has none) on a target: points, fatal,
        CUDA-graph decode points, evidence, and the source used (host | table | wheel). ``host``: a
        host name of the workspace (its own SGLang is asked first) or a Host."""
        from workbench.engine import capture

        if isinstance(host, str):
            host = self.hosts_registry.get(host)
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
        self, engine: str, *, source: str = "auto", host: Any = None
    ) -> tuple[list[CaptureRule], str, str]:
        """(rules, version, source) of one release."""
        if isinstance(host, str):
            host = self.hosts_registry.get(host)
        from workbench.engine.lookup import release_rules

        return release_rules(engine, source=source, host=host)
