"""What the engine-neutral server lifecycle asks of an engine: the adapter each engine package brings.

The lifecycle (profiles, registry, launch, status, follow, stop, measure, sweep) is the same for every
engine; an adapter says what differs: the launch command and the host's own argument parser, the
version on the host, readiness, failure classes, where acceptance counters come from, the
measurement primitives (cache reset, a generation, counters), the hidden-state route and the
convention its layer ids follow.

    from workbench.servers.engines import engine, ENGINES
    eng = engine("vllm")                      # workbench.vllm.engine.VLLM()
    cmd = eng.build(profile, "0.32.0", python)
    client = eng.client("http://127.0.0.1:8000")
    before = client.counters(); client.complete([1, 2, 3], 32); after = client.counters()
    (after - before).accept_length            # 1 + accepted / drafts, from the engine's own counters
"""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

from workbench.errors import InputError
from workbench.results import Result
from workbench.servers.profiles import split_flags

if TYPE_CHECKING:
    from workbench.hosts.base import Host
    from workbench.servers.command import Command
    from workbench.servers.profiles import Profile
    from workbench.servers.ranks import RankFlags
    from workbench.servers.validate import Finding

#: the engines a profile may name (``engine = "..."``), the first the default
ENGINES = ("sglang", "vllm")


@dataclass
class SpecCounters(Result):
    """An engine's cumulative speculative-decoding counters, as its ``/metrics`` page counts them.

    vLLM (``vllm/v1/spec_decode/metrics.py``): drafts (verify rounds that drafted), draft tokens
    proposed, draft tokens accepted, and accepted drafts per chain position (position k counts rounds
    whose first k+1 drafts were all accepted). SGLang (with ``--enable-metrics``; its tokenizer's
    collector, ``observability/metrics_collector.py``): verify calls (``sglang:spec_verify_calls_total``)
    and completion tokens (``sglang:generation_tokens_total``) of finished requests, and those requests
    (``sglang:num_requests_total``). Both count only up, from the server's start."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    verify_calls: int = 0
    generation_tokens: int = 0
    requests: int = 0
    # the page they were read from, e.g. "vllm /metrics", "sglang /metrics" (not part of the counts)
    source: str = field(default="", compare=False)

    def __sub__(self, other: SpecCounters) -> SpecCounters:
        n = max(len(self.accepted_per_pos), len(other.accepted_per_pos))
        mine = [*self.accepted_per_pos, *[0] * (n - len(self.accepted_per_pos))]
        theirs = [*other.accepted_per_pos, *[0] * (n - len(other.accepted_per_pos))]
        return SpecCounters(
            self.drafts - other.drafts,
            self.draft_tokens - other.draft_tokens,
            self.accepted - other.accepted,
            [a - b for a, b in zip(mine, theirs)],
            self.verify_calls - other.verify_calls,
            self.generation_tokens - other.generation_tokens,
            self.requests - other.requests,
            self.source or other.source,
        )

    def __add__(self, other: SpecCounters) -> SpecCounters:
        return self - (SpecCounters(source=other.source) - other)

    def restarted_since(self, earlier: SpecCounters) -> bool:
        """A counter went down: the engine started again in between (counters start at zero)."""
        d = self - earlier
        return min(d.drafts, d.draft_tokens, d.accepted, d.verify_calls, d.generation_tokens, d.requests, 0) < 0

    @property
    def rounds(self) -> int:
        """Verify rounds counted: vLLM's drafts, else SGLang's verify calls."""
        return self.drafts if self.drafts or not self.verify_calls else self.verify_calls

    @property
    def round_tokens(self) -> int:
        """Tokens those rounds gave: vLLM's accepted drafts plus one token of the target's per round;
        SGLang's completion tokens (the prefill's first token included, as SGLang's own per-request
        ``completion_tokens / spec_verify_ct`` counts it)."""
        return self.drafts + self.accepted if self.drafts or not self.verify_calls else self.generation_tokens

    @property
    def accept_length(self) -> float | None:
        """Tokens per verify round, the bonus token included (SGLang's ``accept len``; vLLM's
        1 + accepted / drafts). None without a counted round."""
        return self.round_tokens / self.rounds if self.rounds else None

    @property
    def per_position(self) -> list[float]:
        """P(the first k+1 drafts accepted), per chain position k (the predictor's marginal rates)."""
        return [p / self.drafts for p in self.accepted_per_pos] if self.drafts else []


@dataclass
class Generated:
    """One generation: its completion tokens and, where the engine reports them per request, its
    verify rounds (SGLang's ``meta_info.spec_verify_ct``) or drafted rounds, accepted and proposed draft
    tokens (vLLM's ``metrics.speculative_decoding`` with ``--per-request-spec-decode-metrics``)."""

    completion_tokens: int
    verify_ct: int | None = None
    output_ids: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    drafts: int | None = None  # vLLM: num_spec_steps
    accepted: int | None = None  # accepted draft tokens (SGLang: spec_num_correct_drafts)
    draft_tokens: int | None = None  # vLLM: num_draft_tokens

    @property
    def accept_length(self) -> float | None:
        """The request's accept length as its engine counts it: vLLM's 1 + accepted / drafted rounds,
        SGLang's completion tokens / verify rounds; None where the engine said nothing per request."""
        if self.drafts:
            return 1.0 + (self.accepted or 0) / self.drafts
        if self.verify_ct:
            return self.completion_tokens / self.verify_ct
        return None


class EngineClient(Protocol):
    """An engine's HTTP surface, as the measurement protocol and the live doctor use it."""

    base: str

    def ready(self, timeout: float = 30.0) -> bool:
        """The engine answers a generation (SGLang ``/health_generate``, vLLM ``/health``)."""
        ...

    def reset_cache(self) -> tuple[bool, str]:
        """Empty the prefix cache: (done, the engine's text); False while requests run."""
        ...

    def complete(self, prompt: str | Sequence[int], max_new_tokens: int, *, timeout: float | None = None) -> Generated:
        """One greedy generation of a prompt (text, or token ids), ``max_new_tokens`` long."""
        ...

    def counters(self) -> SpecCounters | None:
        """The engine's cumulative acceptance counters from its ``/metrics``, or None where it serves
        none (SGLang without ``--enable-metrics``)."""
        ...

    def tokenize(self, text: str) -> list[int]:
        """The server's own tokenization of ``text`` (both engines' ``/tokenize``)."""
        ...

    def facts(self) -> dict[str, Any]:
        """What the server runs, normalised: version, algorithm, steps, topk, draft_tokens, model,
        draft, context_length (as launched), served_context (the longest prompt plus new tokens it
        takes), return_hidden_states, avg_spec_accept_length (None where unknown)."""
        ...


class Engine(Protocol):
    """An engine adapter (``workbench.sglang.engine.SGLang``, ``workbench.vllm.engine.VLLM``)."""

    name: str
    #: the module the default launcher runs: ``[python, -m, module, ...]``
    module: str
    #: "log": ready when the log says so (then the health route); "health": ready when the engine's
    #: health route answers 200 while the launched process runs
    readiness: str
    #: the route the status script asks on the host (readiness "health"), e.g. "/health"
    health_path: str | None
    #: how a rank >= 1 of a server across nodes takes SIGTERM (said in stop plans)
    worker_sigterm: str
    #: the convention of ``eagle_aux_hidden_state_layer_ids``: "output-of-layer" (id k = out(k)) or
    #: "capture-before" (id k = out(k-1), 0 = the embedding)
    layer_convention: str
    #: the flag that names the target model (the engine's own arguments start there)
    model_flag: str

    def build(self, profile: Profile, version: str | None, python: str) -> Command:
        """The exact launch command for this engine release (``version`` None: as written)."""
        ...

    def engine_args(self, argv: Sequence[Any]) -> list[Any]:
        """The arguments the engine's own parser sees (after the launcher)."""
        ...

    def probe_argv(self, python: str, argv: Sequence[Any] | None) -> list[Any]:
        """The host command that reads the installed version (``argv`` None) or, given the engine's
        arguments, runs its own parser on them; it prints one JSON line (``parse_probe``)."""
        ...

    def parser_findings(self, probe: dict[str, Any]) -> list[Finding]: ...

    def rule_findings(self, profile: Profile, cmd: Command, draft_config: dict[str, Any] | None) -> list[Finding]:
        """The workbench's own checks of the speculative settings and the draft (no host)."""
        ...

    def spec(self, version: str | None) -> str:
        """The engine spec the capture package and the doctor take: ``sglang==0.5.23``, ``vllm``."""
        ...

    def tp_size(self, argv: Sequence[Any]) -> int:
        """The tensor-parallel size the arguments ask for (GPUs a server holds)."""
        ...

    def client(self, url: str, timeout: float = 60.0) -> EngineClient: ...

    def classify(self, lines: Sequence[str], process_alive: bool, health: int | None) -> dict[str, Any] | None:
        """A failure's class, hint and text from what the status round trip saw (readiness "health"): the
        log's own failure lines, where they name a cause, give the class and hint over it."""
        ...

    def host_version(self, host: Host, python: str) -> str | None:
        """The engine release installed for ``python`` on ``host`` (None: not installed)."""
        ...

    def argv_facts(self, argv: Sequence[Any]) -> dict[str, Any]:
        """What a recorded launch argv asked the engine for (model, draft, speculative settings): the
        facts a server's own routes do not serve."""
        ...

    def rank_flags(self) -> RankFlags:
        """The flags that place one rank of a server across nodes (``workbench.servers.ranks``)."""
        ...

    def check_nodes(self, argv: list[Any], nnodes: int, where: str) -> None:
        """Refuse (``InputError``) a command the engine refuses, or hangs on, over ``nnodes`` nodes."""
        ...

    def worker_argv(self, argv: list[Any]) -> list[Any]:
        """The command of a rank >= 1 (an engine whose workers run another entry point)."""
        ...


class AdapterBase:
    """What the adapters share: an adapter names its ``model_flag``, its tensor-parallel flags and its
    parser probe (``probe()``: the script and the keys it answers), and the rest follows."""

    name: str
    model_flag: str
    tp_flags: tuple[str, ...]

    def probe(self) -> tuple[str, Sequence[str]]:
        """(the parser probe's script, the parsed keys it reports)."""
        raise NotImplementedError

    def engine_args(self, argv: Sequence[Any]) -> list[Any]:
        argv = list(argv)
        return argv[argv.index(self.model_flag) :] if self.model_flag in argv else argv

    def probe_argv(self, python: str, argv: Sequence[Any] | None) -> list[Any]:
        script, keys = self.probe()
        req: dict[str, Any] = {"argv": None} if argv is None else {"argv": list(argv), "keys": list(keys)}
        return [python, "-c", script, json.dumps(req, separators=(",", ":"))]

    def spec(self, version: str | None) -> str:
        return f"{self.name}=={version}" if version else self.name

    def tp_size(self, argv: Sequence[Any]) -> int:
        n = 1
        for flag, vals in split_flags(self.engine_args(argv), "argv"):
            if flag in self.tp_flags and vals:
                with contextlib.suppress(ValueError):
                    n = int(vals[0])
        return n


# Each engine's adapter, by module and class: the lifecycle above depends on the adapters' interface,
# and the adapters on the lifecycle's parts, never the reverse (an adapter is found by its name).
ADAPTERS = {"sglang": ("workbench.sglang.engine", "SGLang"), "vllm": ("workbench.vllm.engine", "VLLM")}


def engine(name: str | None) -> Engine:
    """The adapter of an engine named in a profile or a server record (default SGLang)."""
    key = (name or ENGINES[0]).strip().lower()
    if key not in ADAPTERS:
        raise InputError(f"engine: {name!r} is not one of {', '.join(ENGINES)}")
    module, cls = ADAPTERS[key]
    return cast("Engine", getattr(importlib.import_module(module), cls)())
