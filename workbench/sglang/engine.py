"""SGLang's adapter for the engine-neutral server lifecycle (``workbench.servers.engines.Engine``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.servers.engines import AdapterBase
from workbench.servers.profiles import split_flags

if TYPE_CHECKING:
    from workbench.hosts.base import Host
    from workbench.servers.command import Command
    from workbench.servers.profiles import Profile
    from workbench.servers.ranks import RankFlags
    from workbench.servers.validate import Finding
    from workbench.sglang.client import SGLangClient


class SGLang(AdapterBase):
    name = "sglang"
    module = "sglang.launch_server"
    readiness = "log"  # milestones and "The server is fired up and ready to roll!", then /health_generate
    health_path: str | None = None
    # srt/entrypoints/engine.py: the handler of a node rank >= 1 only logs; rank 0's ShutdownReq ends it
    worker_sigterm = "SGLang's ranks >= 1 ignore SIGTERM: they end on rank 0's shutdown"
    layer_convention = "output-of-layer"  # SGLang adds one: id k captures the output of layer k
    model_flag = "--model-path"
    tp_flags = ("--tp-size", "--tp", "--tensor-parallel-size")

    def build(self, profile: Profile, version: str | None, python: str) -> Command:
        from workbench.sglang.command import build

        return build(profile, version, python)

    def probe(self) -> tuple[str, Sequence[str]]:
        from workbench.sglang.probe import PROBE
        from workbench.sglang.validate import PROBE_KEYS

        return PROBE, PROBE_KEYS

    def parser_findings(self, probe: dict[str, Any]) -> list[Finding]:
        from workbench.sglang.validate import parser_findings

        return parser_findings(probe)

    def rule_findings(self, profile: Profile, cmd: Command, draft_config: dict[str, Any] | None) -> list[Finding]:
        from workbench.sglang.validate import rule_findings

        return rule_findings(profile, cmd, draft_config)

    def client(self, url: str, timeout: float = 60.0) -> SGLangClient:
        from workbench.sglang.client import SGLangClient

        return SGLangClient(url, timeout=timeout)

    def classify(self, lines: Sequence[str], process_alive: bool, health: int | None) -> dict[str, Any] | None:
        from workbench.logs import classify

        # SGLang's failures are read from its log (workbench.logs): nothing beyond the process
        return classify([], process_alive=process_alive)

    def host_version(self, host: Host, python: str) -> str | None:
        from workbench.servers.validate import parse_probe

        r = host.run(self.probe_argv(python, None), timeout=60)
        return parse_probe(r.out).get("version") if r.rc == 0 else None

    def argv_facts(self, argv: Sequence[Any]) -> dict[str, Any]:
        flags = dict(split_flags(self.engine_args(argv), "argv"))
        model, draft = flags.get("--model-path") or [], flags.get("--speculative-draft-model-path") or []
        return {"model": model[0] if model else None, "draft": draft[0] if draft else None}

    def rank_flags(self) -> RankFlags:
        from workbench.sglang.command import rank_flags

        return rank_flags()

    def check_nodes(self, argv: list[Any], nnodes: int, where: str) -> None:
        from workbench.sglang.command import check_nodes

        check_nodes(argv, nnodes, where)

    def worker_argv(self, argv: list[Any]) -> list[Any]:
        return list(argv)
