"""Accept length against context length: a workload whose prompts sweep from short contexts to the
served limit, its rows, and what they say of the drafter.

Each request of a context ``N`` is one prompt of the set (its tail) after other prompts of the set
(the ones before it, in turn) as what came before, cut from the left to exactly ``N`` tokens: the
same continuations at every context, only what precedes them grows. Prompts are token ids; text prompts go through the
server's own ``/tokenize`` first (a server without it needs a prompt set of token ids).

A row's accept length is the engine's counters differenced over that context's requests alone (the
contexts run one after another) where the engine keeps counters, else the per-request figures pooled
(tokens over verify rounds). The finding: acceptance past the drafter's trained length falls at least
``MIN_DROP`` below acceptance within it, and the per-request accept lengths say so at ``ALPHA``
(one-sided Welch test): a drop that large could otherwise be the prompts'.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench.errors import InputError
from workbench.numbers import Range, integer

if TYPE_CHECKING:
    from workbench.drafter.context import DraftContext
    from workbench.servers.engines import EngineClient

CONTEXT = Range(2, 1 << 24)
MIN_DROP = 0.10  # a fall smaller than this is not called one, however significant
ALPHA = 0.01


AUTO = "auto"
AUTO_FIRST = 64


def parse_contexts(values: Sequence[Any] | str) -> list[int] | str:
    """``[256, 1024]`` or ``"256,1024"`` -> sorted distinct context lengths (each at least 2 tokens);
    ``"auto"`` stays ``"auto"`` (``auto_contexts`` once the served length is known)."""
    if isinstance(values, str) and values.strip().lower() == AUTO:
        return AUTO
    items = values.replace(",", " ").split() if isinstance(values, str) else list(values)
    if not items:
        raise InputError("--context: expected context lengths like 256,1024,4096 (or auto)")
    out = sorted({integer(v, "--context", CONTEXT) for v in items})
    return out


def auto_contexts(served: int | None, new_tokens: int, server_id: int) -> list[int]:
    """From 64 tokens to the longest that fits the served context length, doubling."""
    if served is None:
        raise InputError(f"--context auto: server {server_id} does not say its context length; give --context N,N,...")
    top = served - new_tokens
    if top < AUTO_FIRST:
        raise InputError(
            f"--context auto: server {server_id}'s context length {served} leaves no room past {AUTO_FIRST} tokens"
        )
    out, n = [], AUTO_FIRST
    while n < top:
        out.append(n)
        n *= 2
    return [*out, top]


def check_contexts(contexts: Sequence[int], new_tokens: int, served: int | None, server_id: int) -> None:
    """Each context plus the new tokens must fit the served context length (where the server says it)."""
    if served is None:
        return
    for n in contexts:
        if n + new_tokens > served:
            raise InputError(
                f"--context: {n} tokens + {new_tokens} new tokens exceed server {server_id}'s context length "
                f"{served}; the longest that fits is {served - new_tokens}"
            )


def token_prompts(client: EngineClient, prompts: Sequence[str | Sequence[int]]) -> list[list[int]]:
    """The prompts as token ids: token-id prompts as they are, text through the server's tokenizer."""
    from workbench.servers.client import ServerHTTPError

    out: list[list[int]] = []
    for p in prompts:
        if isinstance(p, str):
            try:
                out.append(client.tokenize(p))
            except ServerHTTPError as exc:
                raise InputError(
                    f"--context: the prompts are text and the server does not tokenize them ({exc}); "
                    'give a prompt set of token ids ({"prompts": [[1, 2, ...], ...]})'
                ) from None
        else:
            out.append([int(t) for t in p])
    if not any(out):
        raise InputError("--context: the prompts have no tokens")
    return out


def workload(ids: Sequence[Sequence[int]], contexts: Sequence[int]) -> list[tuple[int, int, list[int]]]:
    """(context, prompt index, token ids of exactly that length) for every context and prompt."""
    if not any(ids):
        raise InputError("--context: the prompts have no tokens")
    out = []
    for n in contexts:
        for i, tail in enumerate(ids):
            tokens = list(tail[-n:])
            j = i
            while len(tokens) < n:
                j = (j - 1) % len(ids)  # the prompts before it, in turn, as what came before
                need = n - len(tokens)
                tokens = list(ids[j][-need:]) + tokens
            out.append((n, i, tokens))
    return out


def rows(requests: Sequence[dict[str, Any]], group_counters: dict[int, Any], facts: DraftContext | None) -> list[Any]:
    """The ``by_context`` rows from the requests (each with ``context_tokens``) and the counters
    differenced over each context's requests ({context: SpecCounters})."""
    from workbench.stattests import quantile

    out = []
    for n in sorted({r["context_tokens"] for r in requests}):
        mine = [r for r in requests if r["context_tokens"] == n]
        als = [r["accept_len"] for r in mine if r.get("accept_len") is not None]
        c = group_counters.get(n)
        row: dict[str, Any] = {"context_tokens": n, "requests": len(mine), "accept_length": None, "source": ""}
        if c is not None and c.rounds:
            row.update(accept_length=c.accept_length, rounds=c.rounds, tokens=c.round_tokens, source=c.source)
        else:
            rounds = [int(r["rounds"]) for r in mine if isinstance(r.get("rounds"), int) and r["rounds"] > 0]
            if rounds and len(rounds) == len(mine):
                tokens = sum(int(r["tokens"]) for r in mine)
                row.update(accept_length=tokens / sum(rounds), rounds=sum(rounds), tokens=tokens, source="per request")
            elif als:
                row.update(accept_length=statistics.fmean(als), source="per-request mean")
        if als:
            row["per_request"] = {
                "p10": quantile(als, 0.1),
                "p50": quantile(als, 0.5),
                "p90": quantile(als, 0.9),
                "min": min(als),
            }
        if facts is not None:
            row["past_trained_length"] = n > facts.trained_length if facts.trained_length else None
            mpe = facts.max_position_embeddings
            row["past_max_position_embeddings"] = n > mpe if mpe else None
        out.append(row)
    return out


def findings(
    by_context: Sequence[dict[str, Any]], requests: Sequence[dict[str, Any]], facts: DraftContext | None
) -> list[dict[str, Any]]:
    """What the rows say of the drafter (``code``, ``severity``, ``message`` and the figures)."""
    from workbench.stattests import welch_less

    out: list[dict[str, Any]] = []
    measured = [r for r in by_context if r.get("accept_length") is not None]
    if len(measured) < 2:
        return out
    trained = facts.trained_length if facts is not None else None
    mpe = facts.max_position_embeddings if facts is not None else None
    where = f" ({facts.trained_from})" if facts is not None and facts.trained_from else ""
    if mpe is not None:
        over = [r["context_tokens"] for r in measured if r["context_tokens"] > mpe]
        if over:
            out.append(
                {
                    "code": "context-past-max-position-embeddings",
                    "severity": "warning",
                    "message": f"contexts of {', '.join(map(str, over))} tokens are past the draft config's "
                    f"max_position_embeddings ({mpe}): the drafter's positions there were never defined for it",
                    "max_position_embeddings": mpe,
                }
            )

    def al_of(rs: Sequence[dict[str, Any]]) -> float:
        rounds = sum(r.get("rounds") or 0 for r in rs)
        if rounds and all(r.get("rounds") for r in rs):
            return float(sum(r["tokens"] for r in rs) / rounds)
        return statistics.fmean(float(r["accept_length"]) for r in rs)

    def per_request(ctxs: set[int]) -> list[float]:
        return [r["accept_len"] for r in requests if r["context_tokens"] in ctxs and r.get("accept_len") is not None]

    if trained is not None:
        within = [r for r in measured if r["context_tokens"] <= trained]
        past = [r for r in measured if r["context_tokens"] > trained]
        if not within:
            out.append(
                {
                    "code": "context-all-past-trained-length",
                    "severity": "info",
                    "message": f"every measured context is past the drafter's trained length of {trained} tokens"
                    f"{where}: measure one at or below it to see what acceptance does past it",
                    "trained_length": trained,
                }
            )
            return out
        ref = al_of(within)
        ref_ctx = {r["context_tokens"] for r in within}
        worst = min(past, key=lambda r: r["accept_length"], default=None)
        if worst is None:
            return out
        drop = 1.0 - worst["accept_length"] / ref
        p = _p_less(per_request(ref_ctx), per_request({worst["context_tokens"]}), welch_less)
        falls = drop >= MIN_DROP and (p is None or p < ALPHA)
        span = f"≤ {max(ref_ctx)}" if len(ref_ctx) > 1 else f"{max(ref_ctx)}"
        evidence = f"{drop:.0%} lower" + (f", p = {p:.1g} over the requests" if p is not None else "")
        if falls:
            out.append(
                {
                    "code": "accept-falls-past-trained-length",
                    "severity": "warning",
                    "message": f"accept length falls from {ref:.2f} at {span} tokens of context to "
                    f"{worst['accept_length']:.2f} at {worst['context_tokens']} ({evidence}): past the "
                    f"{trained} tokens the drafter was trained on{where}"
                    + (f"; its max_position_embeddings ({mpe}) does not say so" if mpe and mpe > trained else "")
                    + ". Train it on sequences as long as the contexts it serves, or serve shorter ones; the "
                    "same sweep on a drafter trained longer tells its share from the target's own at long context.",
                    "trained_length": trained,
                    "max_position_embeddings": mpe,
                    "reference": ref,
                    "lowest": worst["accept_length"],
                    "lowest_context": worst["context_tokens"],
                    "drop": drop,
                    "p": p,
                }
            )
        else:
            out.append(
                {
                    "code": "accept-holds-past-trained-length",
                    "severity": "info",
                    "message": f"accept length holds past the drafter's trained length of {trained} tokens{where}: "
                    f"{ref:.2f} at {span} tokens, {worst['accept_length']:.2f} at its lowest "
                    f"({worst['context_tokens']}; {evidence})",
                    "trained_length": trained,
                    "drop": drop,
                    "p": p,
                }
            )
        return out
    first, worst = measured[0], min(measured[1:], key=lambda r: r["accept_length"])
    drop = 1.0 - worst["accept_length"] / first["accept_length"]
    p = _p_less(per_request({first["context_tokens"]}), per_request({worst["context_tokens"]}), welch_less)
    if drop >= MIN_DROP and (p is None or p < ALPHA):
        note = (
            "; ".join(facts.notes) if facts is not None and facts.notes else "the drafter's trained length is unknown"
        )
        out.append(
            {
                "code": "accept-falls-with-context",
                "severity": "warning",
                "message": f"accept length falls from {first['accept_length']:.2f} at {first['context_tokens']} tokens "
                f"of context to {worst['accept_length']:.2f} at {worst['context_tokens']} ({drop:.0%} lower"
                + (f", p = {p:.1g}" if p is not None else "")
                + f"); {note}: give it to tell whether these contexts are past what the drafter was trained on",
                "drop": drop,
                "p": p,
            }
        )
    return out


def _p_less(a: list[float], b: list[float], test: Any) -> float | None:
    if len(a) < 2 or len(b) < 2:
        return None
    return float(test(a, b)[2])
