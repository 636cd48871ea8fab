"""The measurement protocol, for a server of any engine: warm-up, empty the prefix cache, read the
engine's acceptance counters, send a fixed prompt set (text, or token ids) at a given concurrency,
read the counters again; accept length and tokens/s (with their spread) from the answers and the
engine.

Accept length: where the engine keeps counters (vLLM's ``/metrics``; SGLang's with ``--enable-metrics``),
tokens per verify round of the counters' difference over exactly this workload (``counters`` holds that
difference); else the server's own average since the flush (SGLang's ``avg_spec_accept_length``).

Per request (``per_request``, ``requests``), as the engine counts it: SGLang's completion tokens over its
``spec_verify_ct`` (bonus token counted), vLLM's 1 + accepted / drafted rounds from the response's
``metrics.speculative_decoding`` (``--per-request-spec-decode-metrics``), else, with requests one at a
time, its counters differenced around each request. Their distribution (``distribution``) names the
requests far below the rest (``low_requests``: below Tukey's lower fence, Q1 - 1.5 IQR), and their sum
is checked against the counters' difference (``counters_check``).

``context``: the workload sweeps context lengths (``workbench.servers.context``) and ``by_context`` holds
a row per length, ``findings`` what they say of the drafter (``context_facts``: its trained length and
``max_position_embeddings``).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

from workbench.errors import InputError, WorkbenchError
from workbench.results import Result

if TYPE_CHECKING:
    from workbench.drafter.context import DraftContext
    from workbench.servers.engines import EngineClient, Generated, SpecCounters


@dataclass
class Measurement(Result):
    server_id: int
    prompts: int
    concurrency: int
    max_new_tokens: int
    rounds: int
    completion_tokens: int
    wall_s: float
    tokens_per_s: float  # all completion tokens / wall time
    tokens_per_s_per_request: dict[str, Any]  # mean, stdev, min, max
    accept_len: dict[str, Any]  # per request: mean, stdev, min, max
    server_accept_len: float | None  # the engine's own figure over this workload (counters, or its average)
    rounds_tokens_per_s: list[Any] = field(default_factory=list)
    spec: dict[str, Any] = field(default_factory=dict)
    prompt_set: str = ""
    warmup_s: float = 0.0  # untimed requests first: a fresh server compiles and captures
    stable: bool = True  # False: the numbers should not be trusted (see ``unstable``)
    unstable: list[Any] = field(default_factory=list)  # why, one line each
    engine: str = ""  # the engine spec that served it ("sglang==0.5.23", "vllm==0.32.0")
    # the engine's counters over the timed workload (after minus before): drafts, draft_tokens,
    # accepted, accepted_per_pos; None where the engine keeps none
    counters: dict[str, Any] | None = None
    per_position: list[Any] = field(default_factory=list)  # accepted_per_pos / drafts
    requests: list[Any] = field(default_factory=list)  # per request: prompt, tokens, seconds, accept_len, ...
    notes: list[Any] = field(default_factory=list)  # what the protocol could not do (e.g. empty the cache)
    per_request: list[Any] = field(default_factory=list)  # each request's accept length, in order (None: unknown)
    per_request_source: str = ""  # "meta_info", "response metrics", "counters around each request", ""
    distribution: dict[str, Any] = field(default_factory=dict)  # n, mean, quantiles, min, max, low (the fence)
    low_requests: list[Any] = field(default_factory=list)  # requests below the fence, with their prompt's start
    counters_check: dict[str, Any] | None = None  # per-request sums against the counters' difference
    by_context: list[Any] = field(default_factory=list)  # context_tokens, accept_length, requests, ...
    context_facts: dict[str, Any] | None = None  # the drafter's trained length, max_position_embeddings
    findings: list[Any] = field(default_factory=list)

    @property
    def accept_length(self) -> float | None:
        """The measurement's accept length: the server's own average over exactly this workload when
        it reports one, else the mean of the per-request figures."""
        return accept_length(self.to_dict())


#: A measurement shorter than this, or whose rounds or requests spread more than this (stdev over
#: mean), is flagged: a server measured for a second while still warming reads a fraction of its rate.
MIN_TIMED_S = 2.0
MAX_ROUND_CV = 0.15
MAX_REQUEST_CV = 0.5


def stability(wall_s: float, round_tps: list[Any], per_request: dict[str, Any]) -> list[Any]:
    """Reasons not to trust a measurement (empty: stable)."""
    out = []
    if wall_s < MIN_TIMED_S:
        out.append(f"timed for {wall_s:.1f} s (< {MIN_TIMED_S:g} s): use more rounds or --max-new-tokens")
    if len(round_tps) > 1:
        round_mean = statistics.fmean(round_tps)
        cv = statistics.stdev(round_tps) / round_mean if round_mean else 0.0
        if cv > MAX_ROUND_CV:
            out.append(f"rounds spread {100 * cv:.0f}% ({min(round_tps):.1f}..{max(round_tps):.1f} tok/s)")
    mean, sd = per_request.get("mean"), per_request.get("stdev")
    if mean and sd is not None and sd / mean > MAX_REQUEST_CV:
        out.append(f"requests spread {100 * sd / mean:.0f}% (tok/s {per_request['min']:.1f}..{per_request['max']:.1f})")
    return out


def accept_length(row: Mapping[str, Any]) -> float | None:
    """Accept length of a stored measurement row (``Measurement.to_dict()`` or a journal row): one rule
    for every reader. ``server_accept_len`` wins when present (0.0 included); else the per-request mean
    (``accept_len``: the protocol's {mean, stdev, ...}, or a sweep point's mean itself)."""
    server = row.get("server_accept_len")
    if server is not None:
        return float(server)
    per_request = row.get("accept_len")
    mean = per_request.get("mean") if isinstance(per_request, Mapping) else per_request
    return float(mean) if isinstance(mean, (int, float)) else None


def prompt_set(name: str | None = None) -> dict[str, Any]:
    if name and name.endswith(".json"):
        from workbench import strictjson

        data = strictjson.load_file(name, "prompt set")
    else:
        data = json.loads(resources.files("workbench.servers").joinpath("prompts.json").read_text())
    prompts = data.get("prompts") if isinstance(data, dict) else None
    if not isinstance(prompts, list) or not prompts or not all(_is_prompt(x) for x in prompts):
        raise InputError(
            f'{name or "prompts.json"}: prompts: expected {{"prompts": ["...", ...]}} (strings, or lists of token ids)'
        )
    if data.get("max_new_tokens") is not None:
        from workbench.numbers import Range, integer

        integer(data["max_new_tokens"], f"{name or 'prompts.json'}: max_new_tokens", Range(1, 1 << 20), allow_str=False)
    return cast("dict[str, Any]", data)  # a dict: checked above


def _is_prompt(x: Any) -> bool:
    """A prompt is text, or a non-empty list of token ids (sent as they are: no tokenizer between)."""
    if isinstance(x, str):
        return True
    return (
        isinstance(x, list)
        and bool(x)
        and all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 1 << 31 for t in x)
    )


def _spread(xs: list[Any]) -> dict[str, Any]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"mean": None, "stdev": None, "min": None, "max": None}
    return {
        "mean": statistics.fmean(xs),
        "stdev": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "min": min(xs),
        "max": max(xs),
    }


def _empty_cache(client: EngineClient, server_id: int, wait: float) -> list[str]:
    """Empty the server's prefix cache (retried while requests run); a server without the route is
    measured anyway, with a note saying so."""
    from workbench.servers.client import NoCacheResetError

    deadline = time.monotonic() + wait
    while True:
        try:
            ok, text = client.reset_cache()
        except NoCacheResetError as exc:
            return [str(exc)]
        if ok:
            return []
        if time.monotonic() > deadline:
            raise WorkbenchError(
                f"server {server_id}: the prefix cache could not be emptied for {wait:g} s "
                f"(requests still running): {text[:120]}"
            )
        time.sleep(1)


@dataclass
class Sweep:
    """A context sweep: the context lengths, and what is known of the drafter's context."""

    contexts: list[int] | str  # or "auto"
    draft: DraftContext | None = None


class _Timed:
    """The timed rounds: requests at a concurrency, their rows, and the engine's counters around each
    request (one at a time) or each context's requests (a sweep)."""

    def __init__(self, client: EngineClient, new_tokens: int, concurrency: int, before: SpecCounters | None):
        self.client, self.m, self.concurrency = client, new_tokens, concurrency
        self.reading = before  # the last counters read
        self.requests: list[dict[str, Any]] = []
        self.by_group: dict[int, SpecCounters] = {}
        self.round_tps: list[float] = []
        self.per_tps: list[float] = []
        self.tokens, self.wall = 0, 0.0

    def one(self, item: tuple[int | None, int, Any]) -> dict[str, Any]:
        n_ctx, i, prompt = item
        t0 = time.monotonic()
        out = self.client.complete(prompt, self.m)
        dt = time.monotonic() - t0
        row = _request_row(out)
        if self.concurrency == 1 and self.reading is not None:
            now = self.client.counters()
            if now is not None:
                d, self.reading = now - self.reading, now
                if row["accept_len"] is None and d.rounds:
                    row.update(rounds=d.rounds, tokens=d.round_tokens, accept_len=d.accept_length, source=AROUND_EACH)
                elif row["rounds"] is not None:  # both: its own figures beside the counters around it
                    row["counted"] = {"rounds": d.rounds, "tokens": d.round_tokens}
        return {"prompt": i, "context_tokens": n_ctx, "seconds": dt, **row}

    def group(self, items: list[tuple[int | None, int, Any]], sweep: bool) -> list[dict[str, Any]]:
        parallel = self.concurrency > 1
        g0 = self.client.counters() if sweep and parallel else self.reading
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            got = list(pool.map(self.one, items))
        if sweep and items:
            g1 = self.client.counters() if parallel else self.reading
            if g0 is not None and g1 is not None:
                key = int(cast("int", items[0][0]))
                prev = self.by_group.get(key)
                self.by_group[key] = (g1 - g0) if prev is None else prev + (g1 - g0)
        return got

    def round(self, r: int, groups: list[list[tuple[int | None, int, Any]]], sweep: bool) -> None:
        t0 = time.monotonic()
        results = [x for g in groups for x in self.group(g, sweep)]
        wall = time.monotonic() - t0
        toks = sum(x["completion_tokens"] for x in results)
        self.tokens += toks
        self.wall += wall
        self.round_tps.append(toks / wall if wall else 0.0)
        self.per_tps += [x["completion_tokens"] / x["seconds"] for x in results if x["seconds"] > 0]
        self.requests += [{**x, "round": r} for x in results]


AROUND_EACH = "counters around each request"
FLUSH_WAIT = 30.0  # seconds the cache reset is retried while requests still run


def run_protocol(
    client: EngineClient,
    server_id: int,
    *,
    concurrency: int = 4,
    max_new_tokens: int | None = None,
    rounds: int = 1,
    prompts: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    warmup: int = 1,
    engine: str = "",
    sweep: Sweep | None = None,
) -> Measurement:
    """Warm-up (``warmup`` untimed requests per concurrency slot, short), empty the prefix cache,
    the engine's counters, then ``rounds`` timed passes over the prompt set (or, with ``sweep``, over
    the context sweep built from it, one context length after another), the counters again; the
    result says whether it is stable enough to compare."""
    from workbench.servers import context as ctx

    ps = prompt_set(prompts)
    texts = ps["prompts"]
    m = int(max_new_tokens or ps.get("max_new_tokens", 256))
    if concurrency < 1 or rounds < 1 or m < 1 or warmup < 0:
        raise InputError("measure: concurrency, rounds and max_new_tokens must be positive (warmup >= 0)")
    if sweep is not None:
        facts = client.facts()
        served = _int_or_none(facts.get("served_context") or facts.get("context_length"))
        asked = ctx.parse_contexts(sweep.contexts)
        contexts = ctx.auto_contexts(served, m, server_id) if isinstance(asked, str) else asked
        ctx.check_contexts(contexts, m, served, server_id)
        work = ctx.workload(ctx.token_prompts(client, texts), contexts)
        groups: list[list[tuple[int | None, int, Any]]] = [[w for w in work if w[0] == n] for n in contexts]
    else:
        groups = [[(None, i, t) for i, t in enumerate(texts)]]
    w0 = time.monotonic()
    if warmup:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(lambda t: client.complete(t, min(m, 32)), (texts * concurrency)[: warmup * concurrency]))
    warmup_s = time.monotonic() - w0
    notes = _empty_cache(client, server_id, FLUSH_WAIT)
    before = client.counters()
    timed = _Timed(client, m, concurrency, before)
    for r in range(rounds):
        timed.round(r, groups, sweep is not None)
        if progress:
            progress(r + 1, rounds)
    after = client.counters()
    facts = client.facts()
    spec = {k: facts.get(k) for k in ("algorithm", "steps", "topk", "draft_tokens", "draft", "version")}
    counters = (after - before) if after is not None and before is not None else None
    server_al = counters.accept_length if counters is not None and counters.rounds else None
    if server_al is None:
        server_al = facts.get("avg_spec_accept_length")
    per_request = _spread(timed.per_tps)
    why = stability(timed.wall, timed.round_tps, per_request)
    requests = timed.requests
    per_al = [x["accept_len"] for x in requests]
    dist, low = distribution(requests, texts)
    draft = sweep.draft if sweep is not None else None
    by_context = ctx.rows(requests, timed.by_group, draft) if sweep is not None else []
    return Measurement(
        server_id,
        len(texts),
        concurrency,
        m,
        rounds,
        timed.tokens,
        timed.wall,
        timed.tokens / timed.wall if timed.wall else 0.0,
        per_request,
        _spread(per_al),
        server_al,
        timed.round_tps,
        spec,
        ps.get("name", ""),
        warmup_s=warmup_s,
        stable=not why,
        unstable=why,
        engine=engine,
        counters=counters.to_dict() if counters is not None else None,
        per_position=counters.per_position if counters is not None else [],
        requests=requests,
        notes=notes + _per_request_notes(requests, counters, concurrency),
        per_request=per_al,
        per_request_source=", ".join(sorted({x["source"] for x in requests if x.get("source")})),
        distribution=dist,
        low_requests=low,
        counters_check=counters_check(requests, counters),
        by_context=by_context,
        context_facts=draft.to_dict() if draft is not None else None,
        findings=ctx.findings(by_context, requests, draft) if sweep is not None else [],
    )


def _int_or_none(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def _request_row(out: Generated) -> dict[str, Any]:
    """A request's figures as its engine reported them (SGLang's meta_info, vLLM's response metrics)."""
    row: dict[str, Any] = {
        "completion_tokens": out.completion_tokens,
        "prompt_tokens": out.prompt_tokens,
        "rounds": None,
        "tokens": None,
        "accept_len": out.accept_length,
        "source": "",
    }
    if out.drafts:
        row.update(rounds=out.drafts, tokens=out.drafts + (out.accepted or 0), source="response metrics")
        row.update(accepted=out.accepted, draft_tokens=out.draft_tokens)
    elif out.verify_ct:
        row.update(rounds=out.verify_ct, tokens=out.completion_tokens, source="meta_info")
        if out.accepted is not None:
            row["accepted"] = out.accepted
    return row


def distribution(requests: Sequence[dict[str, Any]], texts: Sequence[Any]) -> tuple[dict[str, Any], list[Any]]:
    """The per-request accept lengths' spread, and the requests far below the rest (Tukey's lower
    fence, from 4 requests on), each with the start of its prompt."""
    from workbench.stattests import quantile, tukey_low

    als = [x["accept_len"] for x in requests if x.get("accept_len") is not None]
    if not als:
        return {"n": 0}, []
    dist: dict[str, Any] = {
        "n": len(als),
        "mean": statistics.fmean(als),
        "stdev": statistics.stdev(als) if len(als) > 1 else 0.0,
        "min": min(als),
        **{f"p{q}": quantile(als, q / 100) for q in (10, 25, 50, 75, 90)},
        "max": max(als),
    }
    low: list[Any] = []
    if len(als) >= 4:
        fence = tukey_low(als)
        dist["low"] = fence
        for x in requests:
            if x.get("accept_len") is not None and x["accept_len"] < fence:
                low.append({**x, "prompt_start": _prompt_start(texts[x["prompt"]])})
        low.sort(key=lambda x: x["accept_len"])
    return dist, low


def _prompt_start(p: Any, width: int = 60) -> str:
    if isinstance(p, str):
        one = " ".join(p.split())
        return one if len(one) <= width else one[: width - 1] + "…"
    head = " ".join(str(t) for t in p[:8])
    return f"{len(p)} token ids: {head}" + (" …" if len(p) > 8 else "")


def counters_check(requests: Sequence[dict[str, Any]], counters: SpecCounters | None) -> dict[str, Any] | None:
    """The per-request rounds and tokens summed, against the engine's counters over the same workload
    (None where either side is missing)."""
    if counters is None or not counters.rounds or not requests:
        return None
    if not all(isinstance(x.get("rounds"), int) for x in requests):
        return None
    rounds = sum(x["rounds"] for x in requests)
    tokens = sum(x["tokens"] for x in requests)
    out: dict[str, Any] = {
        "rounds": {"requests": rounds, "counters": counters.rounds},
        "tokens": {"requests": tokens, "counters": counters.round_tokens},
    }
    if counters.drafts and all(isinstance(x.get("draft_tokens"), int) for x in requests):
        out["draft_tokens"] = {"requests": sum(x["draft_tokens"] for x in requests), "counters": counters.draft_tokens}
    out["agree"] = all(v["requests"] == v["counters"] for v in out.values() if isinstance(v, dict))
    counted = [x for x in requests if x.get("counted")]
    if counted:  # one at a time: each request against the counters around it
        same = sum(x["counted"] == {"rounds": x["rounds"], "tokens": x["tokens"]} for x in counted)
        out["each"] = {"requests": len(counted), "agree": same}
        out["agree"] = out["agree"] and same == len(counted)
    return out


def _per_request_notes(
    requests: Sequence[dict[str, Any]], counters: SpecCounters | None, concurrency: int
) -> list[str]:
    if not requests or any(x.get("accept_len") is not None for x in requests):
        return []
    if counters is not None and counters.drafts and concurrency > 1:
        return [
            "no per-request accept lengths: vLLM reports them with --per-request-spec-decode-metrics summary; "
            "else measure at --concurrency 1 to difference its counters around each request"
        ]
    return []
