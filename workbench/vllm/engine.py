"""vLLM's adapter for the engine-neutral server lifecycle (``workbench.servers.engines.Engine``).

Readiness is the health route while the launched process runs (``/health`` answers 200 once the API
server is up, 503 once the engine died: ``entrypoints/serve/instrumentator/health.py``); the server is
the API server and its children (``VLLM::EngineCore``, ``VLLM::Worker``), all in the launched process's
session and carrying its launch token, so the identity-checked stop ends the whole tree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.servers.engines import AdapterBase

if TYPE_CHECKING:
    from workbench.hosts.base import Host
    from workbench.servers.command import Command
    from workbench.servers.profiles import Profile
    from workbench.servers.ranks import RankFlags
    from workbench.servers.validate import Finding
    from workbench.vllm.client import VLLMClient

# the last line of a Python traceback, bare or behind a logger's prefix (``... [core.py:1512] RuntimeError: ...``):
# the message starts with the exception's (dotted) name
_EXCEPTION = re.compile(r"(?:^|\] )((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)): (.*)$")


class VLLM(AdapterBase):
    name = "vllm"
    module = "vllm.entrypoints.openai.api_server"
    readiness = "health"
    health_path: str | None = "/health"
    # entrypoints/cli/serve.py run_headless: SIGTERM raises SystemExit, the executor shuts down
    worker_sigterm = "vLLM's headless workers end on SIGTERM"
    layer_convention = "capture-before"  # id k = the output of layer k-1, 0 = the embedding
    model_flag = "--model"
    tp_flags = ("--tensor-parallel-size", "-tp")

    def build(self, profile: Profile, version: str | None, python: str) -> Command:
        from workbench.vllm.command import build

        return build(profile, version, python)

    def probe(self) -> tuple[str, Sequence[str]]:
        from workbench.vllm.probe import PROBE, PROBE_KEYS

        return PROBE, PROBE_KEYS

    def parser_findings(self, probe: dict[str, Any]) -> list[Finding]:
        from workbench.vllm.validate import parser_findings

        return parser_findings(probe)

    def rule_findings(self, profile: Profile, cmd: Command, draft_config: dict[str, Any] | None) -> list[Finding]:
        from workbench.vllm.validate import rule_findings

        return rule_findings(profile, cmd, draft_config)

    def client(self, url: str, timeout: float = 60.0) -> VLLMClient:
        from workbench.vllm.client import VLLMClient

        return VLLMClient(url, timeout=timeout)

    def classify(self, lines: Sequence[str], process_alive: bool, health: int | None) -> dict[str, Any]:
        """The process and the health route give the class (the status takes the class the log's failure
        lines name, where they name one), the root cause the text: the first traceback's exception in the
        log's tail (the worker's error comes first; the engine core and the API server wrap it after)."""
        text = ""
        for line in list(lines)[-1000:]:
            m = _EXCEPTION.search(line)
            if m:
                text = f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}".strip()
                break
        if process_alive and health is not None and health >= 500:
            cls, hint = "engine-dead", f"/health answers {health}: the engine core died; the API server lives on"
        elif process_alive:
            cls, hint = "unknown", "the server runs but is not healthy"
        else:
            cls, hint = "process-died", "the server's process exited"
        return {"class": cls, "hint": hint, "text": text}

    def host_version(self, host: Host, python: str) -> str | None:
        from workbench.servers.validate import parse_probe

        r = host.run(self.probe_argv(python, None), timeout=60)
        v = parse_probe(r.out).get("version") if r.rc == 0 else None
        return str(v) if v else None

    def argv_facts(self, argv: Sequence[Any]) -> dict[str, Any]:
        from workbench.vllm.command import argv_facts

        return argv_facts(list(argv))

    def rank_flags(self) -> RankFlags:
        from workbench.vllm.command import rank_flags

        return rank_flags()

    def check_nodes(self, argv: list[Any], nnodes: int, where: str) -> None:
        from workbench.vllm.command import check_nodes

        check_nodes(argv, nnodes, where)

    def worker_argv(self, argv: list[Any]) -> list[Any]:
        from workbench.vllm.command import worker_argv

        return worker_argv(argv)
