"""The measurement protocol, for a server of any engine: warm-up, empty the prefix cache, read the
engine's acceptance counters, send a fixed prompt set (text, or token ids) at a given concurrency,
read the counters again; accept length and tokens/s (with their spread) from the answers and the
engine.

Accept length: where the engine keeps counters (vLLM), 1 + accepted / drafts of the counters'
difference over exactly this workload (``counters`` holds that difference); else the server's own
average since the flush (SGLang's ``avg_spec_accept_length``). Per request, the engine's own figure
where it reports one (vLLM's ``metrics.speculative_decoding.mean_acceptance_length`` with
``--per-request-spec-decode-metrics``), else completion tokens over verify rounds (SGLang's
``spec_verify_ct``, bonus token counted).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

from workbench.errors import InputError, WorkbenchError
from workbench.results import Result

if TYPE_CHECKING:
    from workbench.servers.engines import EngineClient


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
    requests: list[Any] = field(default_factory=list)  # per request: prompt, tokens, seconds, accept_len
    notes: list[Any] = field(default_factory=list)  # what the protocol could not do (e.g. empty the cache)

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


def run_protocol(
    client: EngineClient,
    server_id: int,
    *,
    concurrency: int = 4,
    max_new_tokens: int | None = None,
    rounds: int = 1,
    prompts: str | None = None,
    flush_wait: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
    warmup: int = 1,
    engine: str = "",
) -> Measurement:
    """Warm-up (``warmup`` untimed requests per concurrency slot, short), empty the prefix cache,
    the engine's counters, then ``rounds`` timed passes over the prompt set, the counters again; the
    result says whether it is stable enough to compare."""
    ps = prompt_set(prompts)
    texts = ps["prompts"]
    m = int(max_new_tokens or ps.get("max_new_tokens", 256))
    if concurrency < 1 or rounds < 1 or m < 1 or warmup < 0:
        raise InputError("measure: concurrency, rounds and max_new_tokens must be positive (warmup >= 0)")
    w0 = time.monotonic()
    if warmup:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(lambda t: client.complete(t, min(m, 32)), (texts * concurrency)[: warmup * concurrency]))
    warmup_s = time.monotonic() - w0
    notes = _empty_cache(client, server_id, flush_wait)
    before = client.counters()
    per_al, per_tps, round_tps = [], [], []
    requests: list[dict[str, Any]] = []
    total_tokens, total_wall = 0, 0.0

    def one(i: int) -> dict[str, Any]:
        t0 = time.monotonic()
        out = client.complete(texts[i], m)
        dt = time.monotonic() - t0
        ct = out.completion_tokens
        al = out.accept_length if out.accept_length is not None else (ct / out.verify_ct if out.verify_ct else None)
        return {"prompt": i, "completion_tokens": ct, "seconds": dt, "accept_len": al}

    for r in range(rounds):
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            results = list(pool.map(one, range(len(texts))))
        wall = time.monotonic() - t0
        toks = sum(x["completion_tokens"] for x in results)
        total_tokens += toks
        total_wall += wall
        round_tps.append(toks / wall if wall else 0.0)
        per_tps += [x["completion_tokens"] / x["seconds"] for x in results if x["seconds"] > 0]
        per_al += [x["accept_len"] for x in results]
        requests += [{**x, "round": r} for x in results]
        if progress:
            progress(r + 1, rounds)
    after = client.counters()
    facts = client.facts()
    spec = {k: facts.get(k) for k in ("algorithm", "steps", "topk", "draft_tokens", "draft", "version")}
    counters = (after - before) if after is not None and before is not None else None
    server_al = counters.accept_length if counters is not None else facts.get("avg_spec_accept_length")
    per_request = _spread(per_tps)
    why = stability(total_wall, round_tps, per_request)
    return Measurement(
        server_id,
        len(texts),
        concurrency,
        m,
        rounds,
        total_tokens,
        total_wall,
        total_tokens / total_wall if total_wall else 0.0,
        per_request,
        _spread(per_al),
        server_al,
        round_tps,
        spec,
        ps.get("name", ""),
        warmup_s=warmup_s,
        stable=not why,
        unstable=why,
        engine=engine,
        counters=counters.to_dict() if counters is not None else None,
        per_position=counters.per_position if counters is not None else [],
        requests=requests,
        notes=notes,
    )
