"""The periodic lines: SGLang's ``Decode batch`` / ``Prefill batch`` and vLLM's metrics lines.

Each engine prints these every few iterations, so a serving log is mostly made of them. The common shapes
are read by one regex each; a line of another shape (hybrid pools, disaggregation fields, a future field)
is read as its ``key: value`` items, so no line of these kinds is lost to a new field.

SGLang (``scheduler`` / ``scheduler_metrics_mixin`` / ``metrics_reporter`` in the releases):
``Decode batch[ [iter]][.,] #running-req: N, #token: N, token usage: X, [accept len: X, [accept rate: X, ]]
{cuda,cpu,npu} graph: B, gen throughput (token/s): X, #queue-req: N[, ]`` and the prefill line alike.
vLLM (``v1/metrics/loggers.py``, ``v1/spec_decode/metrics.py``): ``[Engine 000: ]Avg prompt throughput: X
tokens/s, Avg generation throughput: X tokens/s, Running: N reqs, Waiting: N reqs, GPU KV cache usage: X%,
...`` and ``SpecDecoding metrics: Mean acceptance length: X, ..., Per-position acceptance rate: X, X, ...``.
"""

from __future__ import annotations

import math
import re
from typing import Any

DECODE_FIELDS = (
    "running_req", "tokens", "token_usage", "accept_len", "accept_rate", "gen_throughput", "queue_req", "iter",
    "cuda_graph",
)  # fmt: skip
PREFILL_FIELDS = (
    "new_seq", "new_token", "cached_token", "tokens", "token_usage", "running_req", "queue_req", "pending_token",
    "input_throughput", "iter", "cuda_graph",
)  # fmt: skip
THROUGHPUT_FIELDS = (
    "prompt_throughput", "gen_throughput", "running_req", "queue_req", "token_usage", "prefix_cache_hit_rate",
)  # fmt: skip
SPEC_FIELDS = (
    "accept_len", "draft_acceptance_rate", "accepted_tokens", "drafted_tokens", "accepted_throughput",
    "drafted_throughput", "per_position",
)  # fmt: skip

# The common shapes, from the message's start (after SGLang's "[stamp ranks] ").
DECODE = re.compile(
    r"Decode batch(?: \[(\d+)\])?[.,] #running-req: (\d+), #token: (\d+), token usage: (\d+\.\d+), "
    r"(?:accept len: (\d+\.\d+), (?:accept rate: (\d+\.\d+), )?)?(?:cuda|cpu|npu|musa) graph: (True|False), "
    r"gen throughput \(token/s\): (\d+\.\d+), #queue-req: (\d+)(?:, )?\r?$"
)
PREFILL = re.compile(
    r"Prefill batch(?: \[(\d+)\])?[.,] #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+), "
    r"(?:#token: (\d+), )?token usage: (\d+\.\d+), #running-req: (\d+), #queue-req: (\d+)"
    r"(?:, #pending-token: (\d+))?(?:, (?:cuda|cpu|npu|musa) graph: (True|False), "
    r"input throughput \(token/s\): (\d+\.\d+))?(?:, )?\r?$"
)
BULK_HEAD = re.compile(r"(Decode|Prefill) batch(?: \[(\d+)\])?[.,] ")

# item keys -> record fields (anything else is kept under its own name, see _slug)
_KEYS = {
    "#running-req": "running_req",
    "#token": "tokens",
    "#full token": "tokens",
    "token usage": "token_usage",
    "full token usage": "token_usage",
    "accept len": "accept_len",
    "accept rate": "accept_rate",
    "cuda graph": "cuda_graph",
    "cpu graph": "cuda_graph",
    "npu graph": "cuda_graph",
    "musa graph": "cuda_graph",
    "gen throughput (token/s)": "gen_throughput",
    "#queue-req": "queue_req",
    "#new-seq": "new_seq",
    "#new-token": "new_token",
    "#cached-token": "cached_token",
    "#pending-token": "pending_token",
    "input throughput (token/s)": "input_throughput",
    # vLLM
    "Avg prompt throughput": "prompt_throughput",
    "Avg generation throughput": "gen_throughput",
    "Running": "running_req",
    "Waiting": "queue_req",
    "Pending": "queue_req",
    "Swapped": "swapped_req",
    "GPU KV cache usage": "token_usage",
    "KV cache usage": "token_usage",
    "Prefix cache hit rate": "prefix_cache_hit_rate",
    "Preemptions": "preemptions",
    "Mean acceptance length": "accept_len",
    "Accepted throughput": "accepted_throughput",
    "Drafted throughput": "drafted_throughput",
    "Accepted": "accepted_tokens",
    "Drafted": "drafted_tokens",
    "Per-position acceptance rate": "per_position",
    "Avg Draft acceptance rate": "draft_acceptance_rate",
    "Draft acceptance rate": "draft_acceptance_rate",
    "Number of accepted tokens": "accepted_tokens",
    "Number of draft tokens": "drafted_tokens",
}
_INT = frozenset(
    {"running_req", "tokens", "queue_req", "new_seq", "new_token", "cached_token", "pending_token", "iter",
     "accepted_tokens", "drafted_tokens", "swapped_req", "preemptions"}
)  # fmt: skip
_NUM = re.compile(r"(-?(?:\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|nan|inf))\s*(%|[A-Za-z/]+)?$")
_SLUG = re.compile(r"[^a-z0-9]+")
_DEVICE_KV = re.compile(r"^\w+ KV cache usage$")


def _slug(key: str) -> str:
    return _SLUG.sub("_", key.lower()).strip("_")


def _value(text: str) -> tuple[Any, bool]:
    """(the value an item's text holds, whether it was a number that is not finite)."""
    t = text.strip()
    if t in ("True", "False"):
        return t == "True", False
    m = _NUM.match(t)
    if m is None:
        return t, False
    num = m.group(1)
    if m.group(2) != "%" and num.lstrip("-").isdigit():
        return int(num), False
    x = float(num)
    if not math.isfinite(x):
        return None, True
    if m.group(2) == "%":
        x = round(x / 100.0, 6)
    return x, False


def items(text: str) -> dict[str, Any]:
    """``key: value, key: value`` (as both engines' periodic lines are built) as record fields; a
    value the server printed but that is not a finite number is None, its field listed in ``nonfinite``.
    An item with no key continues the one before it (a list: ``Per-position acceptance rate: 0.7, 0.4``;
    a pool's parts: ``#token: full=10, swa=2``)."""
    out: dict[str, Any] = {}
    bad: list[str] = []
    last: str | None = None
    for item in text.rstrip(", \r\n").split(", "):
        key, sep, val = item.partition(": ")
        if not sep:
            if last is None:
                continue
            k2, eq, v2 = item.partition("=")
            if eq and not k2[:1].isdigit():  # "swa=100" after "#token: full=10536"
                name = f"{last}_{_slug(k2)}"
                out[name], nan = _value(v2)
            else:  # another value of a list
                prev = out.get(last)
                v, nan = _value(item)
                out[last] = ([*prev] if isinstance(prev, list) else [prev]) + [v]
            continue
        key = key.strip()
        name = _KEYS.get(key) or ("token_usage" if _DEVICE_KV.match(key) else _slug(key))
        if val.startswith(("full=", "swa=")):
            val = val.partition("=")[2]
        v, nan = _value(val)
        if nan:
            bad.append(name)
        if name in _INT and isinstance(v, float) and v.is_integer():
            v = int(v)
        out[name] = v
        last = name
    if bad:
        out["nonfinite"] = bad
    return out


def decode_generic(msg: str) -> dict[str, Any] | None:
    """A decode or prefill line of any shape: (its fields by name, with the kind's fields first)."""
    h = BULK_HEAD.match(msg)
    if h is None:
        return None
    kind = "decode" if h.group(1) == "Decode" else "prefill"
    got = items(msg[h.end() :])
    names = DECODE_FIELDS if kind == "decode" else PREFILL_FIELDS
    out: dict[str, Any] = {"kind": kind}
    for n in names:
        out[n] = got.pop(n, None)
    if h.group(2):
        out["iter"] = int(h.group(2))
    out.update(got)
    return out


_VLLM_THROUGHPUT = re.compile(r"(?:Engine (\d+): )?Avg prompt throughput: ")
# the common shapes of both, read at once (any other goes item by item)
TPUT = re.compile(
    r"(?:Engine (\d+): )?Avg prompt throughput: (\d+\.\d) tokens/s, Avg generation throughput: (\d+\.\d) tokens/s, "
    r"Running: (\d+) reqs, Waiting: (\d+) reqs, GPU KV cache usage: (\d+\.\d)%, Prefix cache hit rate: (\d+\.\d)%$"
)
SPEC = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (\d+\.\d+), Accepted throughput: (\d+\.\d+) tokens/s, "
    r"Drafted throughput: (\d+\.\d+) tokens/s, Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
    r"Per-position acceptance rate: ([\d., ]+), Avg Draft acceptance rate: (\d+\.\d)%$"
)
_VLLM_SPEC = re.compile(r"(?:Speculative metrics|SpecDecoding metrics): ")
# the V0 engine's prefix-cache line (vLLM 0.9-0.10.0): "Prefix cache hit rate: GPU: 94.35%, CPU: 0.00%"
_VLLM_PREFIX = re.compile(r"Prefix cache hit rate: GPU: (\d+(?:\.\d+)?)%, CPU: (\d+(?:\.\d+)?)%$")


def fast(msg: str, f: re.Match[str]) -> dict[str, Any]:
    """The fields of a line the common-shape regex ``f`` (``TPUT`` or ``SPEC``) read."""
    g = f.groups()
    if msg.startswith("Spec"):
        return {
            "kind": "metrics",
            "name": "spec_decode",
            "accept_len": float(g[0]),
            "draft_acceptance_rate": round(float(g[6]) / 100.0, 6),
            "accepted_tokens": int(g[3]),
            "drafted_tokens": int(g[4]),
            "accepted_throughput": float(g[1]),
            "drafted_throughput": float(g[2]),
            "per_position": [float(x) for x in g[5].split(", ")],
        }
    out: dict[str, Any] = {"kind": "metrics", "name": "throughput"}
    if g[0] is not None:
        out["engine_index"] = int(g[0])
    out["prompt_throughput"] = float(g[1])
    out["gen_throughput"] = float(g[2])
    out["running_req"] = int(g[3])
    out["queue_req"] = int(g[4])
    out["token_usage"] = round(float(g[5]) / 100.0, 6)
    out["prefix_cache_hit_rate"] = round(float(g[6]) / 100.0, 6)
    return out


def vllm_metrics(msg: str) -> dict[str, Any] | None:
    """vLLM's periodic throughput or speculative-decoding line as ``metrics`` fields, or None."""
    f = SPEC.match(msg) if msg.startswith("Spec") else TPUT.match(msg)
    if f is not None:
        return fast(msg, f)
    m = _VLLM_THROUGHPUT.match(msg)
    if m is not None:
        got = items(msg[m.start() + (len(m.group(0)) - len("Avg prompt throughput: ")) :])
        out: dict[str, Any] = {"kind": "metrics", "name": "throughput"}
        if m.group(1) is not None:
            out["engine_index"] = int(m.group(1))
        for n in THROUGHPUT_FIELDS:
            out[n] = got.pop(n, None)
        out.update(got)
        return out
    p = _VLLM_PREFIX.match(msg)
    if p is not None:
        return {
            "kind": "metrics",
            "name": "prefix_cache",
            "prefix_cache_hit_rate": round(float(p.group(1)) / 100.0, 6),
            "cpu_prefix_cache_hit_rate": round(float(p.group(2)) / 100.0, 6),
        }
    s = _VLLM_SPEC.match(msg)
    if s is not None:
        got = items(msg[s.end() :])
        out = {"kind": "metrics", "name": "spec_decode"}
        for n in SPEC_FIELDS:
            out[n] = got.pop(n, None)
        if out["per_position"] is not None and not isinstance(out["per_position"], list):
            out["per_position"] = [out["per_position"]]
        out.update(got)
        return out
    return None
