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

import msgspec


class Record(msgspec.Struct, gc=False):
    """A periodic line's record, built straight from its regex: the fields of its dict, in the same order, which
    msgspec writes as JSON with no dict in between. ``rec["field"]`` reads it as the dict would be read.
    Untracked by the garbage collector (numbers, strings and a list of floats can make no cycle), so a chunk's
    thousands of records do not set off its collections."""

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class Decode(Record):
    kind: str
    engine: str
    line: int
    time: str | None
    rank: str | None
    running_req: int
    tokens: int
    token_usage: float
    accept_len: float | None
    accept_rate: float | None
    gen_throughput: float
    queue_req: int
    iter: int | None
    cuda_graph: bool


class Prefill(Record):
    kind: str
    engine: str
    line: int
    time: str | None
    rank: str | None
    new_seq: int
    new_token: int
    cached_token: int
    tokens: int | None
    token_usage: float
    running_req: int
    queue_req: int
    pending_token: int | None
    input_throughput: float | None
    iter: int | None
    cuda_graph: bool | None


class _VllmRecord(Record):
    kind: str
    engine: str
    line: int
    time: str | None
    rank: str | None
    process: str | None
    pid: int | None
    src: str | None
    name: str


class Throughput(_VllmRecord, omit_defaults=True):
    prompt_throughput: float
    gen_throughput: float
    running_req: int
    queue_req: int
    token_usage: float
    prefix_cache_hit_rate: float
    engine_index: int | None = None  # written only where the line names its engine

    def as_dict(self) -> dict[str, Any]:
        d = msgspec.structs.asdict(self)
        if d["engine_index"] is None:
            del d["engine_index"]
        return d


class Spec(_VllmRecord):
    accept_len: float
    draft_acceptance_rate: float
    accepted_tokens: int
    drafted_tokens: int
    accepted_throughput: float
    drafted_throughput: float
    per_position: list[float]


HEAD_FIELDS = ("kind", "engine", "line", "time", "rank")
VLLM_HEAD_FIELDS = _VllmRecord.__struct_fields__
DECODE_FIELDS = Decode.__struct_fields__[len(HEAD_FIELDS) :]
PREFILL_FIELDS = Prefill.__struct_fields__[len(HEAD_FIELDS) :]
THROUGHPUT_FIELDS = (
    "prompt_throughput", "gen_throughput", "running_req", "queue_req", "token_usage", "prefix_cache_hit_rate",
)  # fmt: skip
SPEC_FIELDS = Spec.__struct_fields__[len(VLLM_HEAD_FIELDS) :]

# The common shapes, from the message's start (after SGLang's "[stamp ranks] "): [0-9] rather than \d, which in a
# str pattern is a Unicode category test per character; possessive quantifiers, which leave the engine no
# backtracking to keep. msgspec's decoders read the numbers from their text; where one is not as JSON spells it
# ("007"), the record builders give None and the line is read item by item instead.
_I = r"([0-9]++)"
_F = r"([0-9]++\.[0-9]++)"
DECODE = re.compile(
    rf"Decode batch(?: \[{_I}\])?[.,] #running-req: {_I}, #token: {_I}, token usage: {_F}, "
    rf"(?:accept len: {_F}, (?:accept rate: {_F}, )?)?"
    rf"(?:cuda|cpu|npu|musa) graph: (True|False), gen throughput \(token/s\): {_F}, "
    rf"#queue-req: {_I}(?:, )?\r?$"
)
PREFILL = re.compile(
    rf"Prefill batch(?: \[{_I}\])?[.,] #new-seq: {_I}, #new-token: {_I}, #cached-token: {_I}, "
    rf"(?:#token: {_I}, )?token usage: {_F}, #running-req: {_I}, #queue-req: {_I}"
    rf"(?:, #pending-token: {_I})?(?:, (?:cuda|cpu|npu|musa) graph: (True|False), "
    rf"input throughput \(token/s\): {_F})?(?:, )?\r?$"
)
_int = msgspec.json.Decoder(int).decode
_num = msgspec.json.Decoder(float).decode
_nums = msgspec.json.Decoder(list[float]).decode
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
_F1 = r"([0-9]++\.[0-9])"  # vLLM's one decimal
TPUT = re.compile(
    rf"(?:Engine {_I}: )?Avg prompt throughput: {_F1} tokens/s, "
    rf"Avg generation throughput: {_F1} tokens/s, Running: {_I} reqs, Waiting: {_I} reqs, "
    rf"GPU KV cache usage: {_F1}%, Prefix cache hit rate: {_F1}%$"
)
SPEC = re.compile(
    rf"SpecDecoding metrics: Mean acceptance length: {_F}, Accepted throughput: {_F} tokens/s, "
    rf"Drafted throughput: {_F} tokens/s, Accepted: {_I} tokens, Drafted: {_I} tokens, "
    rf"Per-position acceptance rate: ({_F[1:-1]}(?:, {_F[1:-1]})*+), Avg Draft acceptance rate: {_F1}%$"
)
_VLLM_SPEC = re.compile(r"(?:Speculative metrics|SpecDecoding metrics): ")
# the V0 engine's prefix-cache line (vLLM 0.9-0.10.0): "Prefix cache hit rate: GPU: 94.35%, CPU: 0.00%"
_VLLM_PREFIX = re.compile(r"Prefix cache hit rate: GPU: (\d+(?:\.\d+)?)%, CPU: (\d+(?:\.\d+)?)%$")


def decode_record(d: re.Match[str], line: int, time: str | None, rank: str | None) -> Decode | None:
    """The record of a line ``DECODE`` read (None: a number JSON does not spell, for ``decode_generic``)."""
    it, r, t, u, al, ar, g, gt, q = d.groups()
    try:
        return Decode(
            "decode", "sglang", line, time, rank, _int(r), _int(t), _num(u), _num(al) if al else None,
            _num(ar) if ar else None, _num(gt), _int(q), _int(it) if it else None, g == "True",
        )  # fmt: skip
    except msgspec.DecodeError:
        return None


def prefill_record(p: re.Match[str], line: int, time: str | None, rank: str | None) -> Prefill | None:
    """The record of a line ``PREFILL`` read (None: a number JSON does not spell, for ``decode_generic``)."""
    it, ns, nt, ct, tk, u, r, q, pt, g, ip = p.groups()
    try:
        return Prefill(
            "prefill", "sglang", line, time, rank, _int(ns), _int(nt), _int(ct), _int(tk) if tk else None,
            _num(u), _int(r), _int(q), _int(pt) if pt else None, _num(ip) if ip else None,
            _int(it) if it else None, (g == "True") if g else None,
        )  # fmt: skip
    except msgspec.DecodeError:
        return None


def metrics_record(
    g: tuple[Any, ...], spec: bool, line: int, time: str | None, rank: str | None, process: str | None,
    pid: int | None, src: str | None,
) -> Throughput | Spec | None:  # fmt: skip
    """The record of a line whose message the common-shape regex ``SPEC`` (``spec``) or ``TPUT`` read, from
    that regex's groups ``g``; a percentage as the fraction its digits shifted make (the nearest float to it,
    as ``round(x / 100, 6)`` would give). None: a number JSON does not spell (the items read it)."""
    try:
        if spec:
            return Spec(
                "metrics", "vllm", line, time, rank, process, pid, src, "spec_decode", _num(g[0]),
                _num(g[6] + "e-2"), _int(g[3]), _int(g[4]), _num(g[1]), _num(g[2]), _nums(f"[{g[5]}]"),
            )  # fmt: skip
        return Throughput(
            "metrics", "vllm", line, time, rank, process, pid, src, "throughput", _num(g[1]), _num(g[2]),
            _int(g[3]), _int(g[4]), _num(g[5] + "e-2"), _num(g[6] + "e-2"),
            None if g[0] is None else int(g[0]),  # "Engine 000"
        )  # fmt: skip
    except msgspec.DecodeError:
        return None


def fast(f: re.Match[str]) -> dict[str, Any] | None:
    """The fields of a line the common-shape regex ``f`` (``TPUT`` or ``SPEC``) read, after its prefixes."""
    rec = metrics_record(f.groups(), f.re is SPEC, 0, None, None, None, None, None)
    if rec is None:
        return None
    d = rec.as_dict()
    for k in VLLM_HEAD_FIELDS:
        if k not in ("kind", "name"):
            del d[k]
    return d


def vllm_metrics(msg: str) -> dict[str, Any] | None:
    """vLLM's periodic throughput or speculative-decoding line as ``metrics`` fields, or None."""
    f = SPEC.match(msg) if msg.startswith("Spec") else TPUT.match(msg)
    got = None if f is None else fast(f)
    if got is not None:
        return got  # (else a number JSON does not spell, "007": item by item, below)
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
