"""What the live loop needs from the workbench, and nothing more.

``live/`` runs above the server and config operations (it launches, measures, stops and writes configs),
so it takes them as an object that has these methods: the ``Workbench`` facade in the product, anything
with the same methods in a test. Keeping the list explicit keeps the live loop off the facade's privates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from workbench.confirm import Plan
    from workbench.hosts.base import Host
    from workbench.journal import Event, Journal
    from workbench.servers.lifecycle import Lifecycle
    from workbench.servers.measure import Measurement
    from workbench.servers.registry import ServerRecord


class LiveOps(Protocol):
    journal: Journal

    @property
    def lifecycle(self) -> Lifecycle: ...

    def host(self, name: str) -> Host: ...
    def server(self, server_id: int) -> ServerRecord: ...
    def server_status(self, ids: Sequence[int] | None = None, gpus: bool = True) -> Any: ...
    def server_wait(self, server_id: int, timeout: float | None = None, poll: float = 1.0) -> Any: ...
    def server_stop(
        self, server_id: int, *, confirm: bool = False, grace: float | None = None, gpu_wait: float = ...
    ) -> Any: ...
    def server_measure(
        self,
        server_id: int,
        *,
        concurrency: int = ...,
        max_new_tokens: int | None = ...,
        rounds: int = ...,
        prompts: str | None = ...,
        label: str = ...,
    ) -> Measurement: ...
    # the journal's measurement rows: each kind of measurement has its own keys
    def measurements(self, server_id: int | None = None, kind: str | None = None) -> list[dict[str, Any]]: ...
    def profile(self, name: str) -> Any: ...
    # a profile table as workbench.toml holds one: any profile keys, checked by the profile's reader
    def session_profile(self, name: str, table: dict[str, Any]) -> None: ...
    def launch(self, name: str, *, confirm: bool = False) -> ServerRecord: ...
    def launch_preview(self, name: str, sglang_version: str | None = None) -> Any: ...
    def events(self, kind: str | None = None, subject: str | None = None, limit: int | None = None) -> list[Event]: ...
    def config_fix_plan(self, fix: Any) -> Plan: ...
    def config_apply_fix(self, fix: Any, *, confirm: bool = False) -> Any: ...
