"""Layer capture points, the id conventions that name them, and what each engine captures.

A *point* is a physical place in the target's residual stream:

- ``embed``           the embedding output (input of decoder layer 0);
- ``out(K)``          the residual stream after decoder layer K (= input of layer K+1, un-normed);
- ``final-prenorm``   the stream after the last layer, before the final norm (physically ``out(N-1)``);
- ``final-postnorm``  after the final norm (what HF ``hidden_states[-1]`` holds).

Lists of layer ids only mean something together with their *convention* (N = number of layers):

==================  =============================================  ==============================
convention          id j means                                     used by
==================  =============================================  ==============================
``output-of-layer``  ``out(j)``; -1 = ``embed``                    SpecForge, ``eagle_config`` ids
``capture-before``   ``out(j-1)``; 0 = ``embed``; N = final pre   SGLang internal index, vLLM,
                                                                   speculators, EAGLE trainer
``hf-index``         ``hs[j]``: 0 = ``embed``; k = ``out(k-1)``;   HF ``output_hidden_states``
                     N = ``final-postnorm`` (negative: Python)
==================  =============================================  ==============================

Engine rules (``rule_for``) turn the ids a draft's ``config.json`` carries into the points an engine
really captures, per engine version and target architecture:

- SGLang: a cache of the generated table of ``workbench.engine`` (every release from 0.4.9, read
  from each release's own code by the extractor; ``make engine-rules`` regenerates it). The hand
  rule below (``_sglang_rule``) only answers for a release the table lacks or when no target
  architecture is known (then it says it assumed the llama/qwen rule). ``workbench.engine.capture``
  is the full answer (index 0, index N, start-up and first-forward failures, CUDA-graph decode).
- vLLM (``gpu_model_runner._get_eagle3_aux_layers_from_config``, llama aux loop): ids read verbatim as
  capture-before indices, top-level ``eagle_aux_hidden_state_layer_ids`` first, then ``eagle_config``;
  default ``(2, N//2, N-3)``; boundary N gives the pre-norm final stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any, cast

from workbench.errors import InputError
from workbench.results import Result

KINDS = ("embed", "out", "final-prenorm", "final-postnorm")
CONVENTIONS = ("output-of-layer", "capture-before", "hf-index")
CONVENTION_ALIASES = {
    "output-of-layer": "output-of-layer",
    "output": "output-of-layer",
    "out": "output-of-layer",
    "a": "output-of-layer",
    "specforge": "output-of-layer",
    "eagle-config": "output-of-layer",
    "capture-before": "capture-before",
    "before": "capture-before",
    "boundary": "capture-before",
    "b": "capture-before",
    "sglang-internal": "capture-before",
    "vllm": "capture-before",
    "speculators": "capture-before",
    "hf-index": "hf-index",
    "hf": "hf-index",
    "c": "hf-index",
    "output-hidden-states": "hf-index",
}
_RANK = {"embed": 0, "out": 1, "final-prenorm": 2, "final-postnorm": 3}
_POINT_RE = re.compile(r"^\s*out\s*\(\s*(-?\d+)\s*\)\s*$")


@total_ordering
@dataclass(frozen=True)
class Point:
    """A physical capture point; ``str(p)`` is its JSON spelling."""

    kind: str
    layer: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"point kind: {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind == "out":
            if not isinstance(self.layer, int) or isinstance(self.layer, bool) or self.layer < 0:
                raise InputError(f"point out(K): K must be an integer >= 0, got {self.layer!r}")
        elif self.layer is not None:
            raise InputError(f"point {self.kind}: takes no layer, got {self.layer!r}")

    # constructors ----------------------------------------------------------------------------
    @classmethod
    def embed(cls) -> Point:
        return cls("embed")

    @classmethod
    def out(cls, k: int) -> Point:
        return cls("out", k)

    @classmethod
    def parse(cls, text: str | Point) -> Point:
        """``embed``, ``out(K)``, ``final-prenorm``, ``final-postnorm``."""
        if isinstance(text, Point):
            return text
        if not isinstance(text, str):
            raise InputError(f"point: expected text like 'out(2)', got {type(text).__name__}")
        t = text.strip().lower()
        m = _POINT_RE.match(t)
        if m:
            return cls("out", int(m.group(1)))
        if t in ("embed", "final-prenorm", "final-postnorm"):
            return cls(t)
        raise InputError(f"point: {text!r} is not embed, out(K), final-prenorm or final-postnorm")

    # identity ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        return f"out({self.layer})" if self.kind == "out" else self.kind

    def _key(self) -> tuple[int, int]:
        return (_RANK[self.kind], self.layer if self.layer is not None else 0)

    def __lt__(self, other: Point) -> bool:
        if not isinstance(other, Point):
            return NotImplemented
        return self._key() < other._key()

    def canonical(self, num_layers: int) -> Point:
        """``final-prenorm`` and ``out(N-1)`` are one physical stream; this picks ``out(N-1)``."""
        return Point.out(num_layers - 1) if self.kind == "final-prenorm" else self

    def same_stream(self, other: Point, num_layers: int) -> bool:
        return self.canonical(num_layers) == other.canonical(num_layers)


EMBED = Point("embed")
FINAL_PRENORM = Point("final-prenorm")
FINAL_POSTNORM = Point("final-postnorm")


def point_str(p: Point | None) -> str | None:
    return None if p is None else str(p)


def parse_points(text: str | Iterable[str | Point]) -> list[Point]:
    """'out(2), out(30)' or a list of strings/Points."""
    if isinstance(text, str):
        parts = [p for p in re.split(r",(?![^()]*\))|\s+(?![^()]*\))", text) if p.strip()]
    else:
        parts = list(text)
    return [Point.parse(p) for p in parts]


# -- conventions ---------------------------------------------------------------------------------


def normalize_convention(name: str) -> str:
    key = str(name).strip().lower().replace("_", "-")
    try:
        return CONVENTION_ALIASES[key]
    except KeyError:
        raise InputError(f"convention: {name!r} is not one of {', '.join(CONVENTIONS)}") from None


def _check_layers(num_layers: object) -> int:
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
        raise InputError(f"num_layers: expected a positive integer, got {num_layers!r}")
    return num_layers


def _check_id(i: object) -> int:
    if not isinstance(i, int) or isinstance(i, bool):
        raise InputError(f"layer id: expected an integer, got {i!r} ({type(i).__name__})")
    return i


def point_for(i: int, convention: str, num_layers: int) -> Point | None:
    """The point id ``i`` names in ``convention``; None when it names nothing for N layers."""
    conv = normalize_convention(convention)
    n = _check_layers(num_layers)
    i = _check_id(i)
    if conv == "output-of-layer":
        if i == -1:
            return EMBED
        return Point.out(i) if 0 <= i <= n - 1 else None
    if conv == "capture-before":
        if i == 0:
            return EMBED
        return Point.out(i - 1) if 1 <= i <= n else None
    # hf-index: n+1 entries, Python-style negative indices allowed
    if -(n + 1) <= i < 0:
        i += n + 1
    if i == 0:
        return EMBED
    if 1 <= i <= n - 1:
        return Point.out(i - 1)
    return FINAL_POSTNORM if i == n else None


def to_points(ids: Sequence[int], convention: str, num_layers: int) -> list[Point]:
    """Ids in a convention -> points, in list order. A one-line InputError for ids out of range."""
    conv = normalize_convention(convention)
    out = []
    for i in ids:
        p = point_for(i, conv, num_layers)
        if p is None:
            raise InputError(
                f"layer id {i}: out of range for {conv} with {num_layers} layers ({_range_text(conv, num_layers)})"
            )
        out.append(p)
    return out


def id_for(point: Point | str, convention: str, num_layers: int) -> int | None:
    """The id that names ``point`` in ``convention``; None when the convention cannot name it."""
    conv = normalize_convention(convention)
    n = _check_layers(num_layers)
    p = Point.parse(point) if isinstance(point, str) else point
    if p.kind == "final-postnorm":
        return n if conv == "hf-index" else None
    p = p.canonical(n)
    layer = cast(int, p.layer)  # read only for "out", the one kind left (but "embed") that has a layer
    if p.kind == "out" and layer > n - 1:
        return None
    if conv == "output-of-layer":
        return -1 if p.kind == "embed" else layer
    if conv == "capture-before":
        return 0 if p.kind == "embed" else layer + 1
    # hf-index: hs[N] is post-norm, so the pre-norm final stream has no index
    if p.kind == "embed":
        return 0
    return layer + 1 if layer <= n - 2 else None


def from_points(points: Sequence[Point | str], convention: str, num_layers: int) -> list[int]:
    """Points -> ids in ``convention``. A one-line InputError for a point it cannot name."""
    conv = normalize_convention(convention)
    out = []
    for p in points:
        i = id_for(p, conv, num_layers)
        if i is None:
            raise InputError(f"point {p}: has no {conv} id for a target with {num_layers} layers")
        out.append(i)
    return out


def convert(ids: Sequence[int], src: str, dst: str, num_layers: int) -> list[int]:
    return from_points(to_points(ids, src, num_layers), dst, num_layers)


def _range_text(conv: str, n: int) -> str:
    return {"output-of-layer": f"-1..{n - 1}", "capture-before": f"0..{n}", "hf-index": f"0..{n} or -{n + 1}..-1"}[conv]


def default_points(num_layers: int) -> list[Point]:
    """What every trainer and engine captures by default: out(1), out(N//2-1), out(N-4)."""
    n = _check_layers(num_layers)
    return [Point.out(1), Point.out(n // 2 - 1), Point.out(n - 4)]


def default_ids(num_layers: int, convention: str = "output-of-layer") -> list[int]:
    return from_points(default_points(num_layers), convention, num_layers)


# -- engine rules ----------------------------------------------------------------------------------

LATEST_SGLANG = (0, 5, 23, 0)


def parse_version(text: str) -> tuple[int, int, int, int]:
    """'0.5.12.post1' -> (0, 5, 12, 2); a plain release sorts before its post releases.
    Parsed by ``workbench.sglang.version`` (the one version parser: .postN, rc, dev)."""
    from workbench.engine.version import Version

    v = Version.parse(text)
    return (v.major, v.minor, v.patch, v.post + 1 if v.post else 0)


def version_text(v: tuple[int, int, int, int]) -> str:
    base = f"{v[0]}.{v[1]}.{v[2]}"
    return base + (f".post{v[3] - 1}" if v[3] else "")


def arch_family(arch: str | None) -> str | None:
    """An HF architecture class or model_type -> the family whose capture code it runs."""
    if not arch:
        return None
    a = re.sub(r"[^a-z0-9]", "", str(arch).lower())
    if "deepseek" in a or "kimi" in a:
        return "deepseek_v2"
    if "glm4moelite" in a:
        return "glm4_moe_lite"
    if "gptoss" in a:
        return "gpt_oss"
    if a.startswith("qwen2") and "moe" not in a and "vl" not in a:
        return "qwen2"
    return "llama"


@dataclass
class IdCapture(Result):
    """One config id: the engine's internal (capture-before) index, and what it yields."""

    id: int | None  # None when the engine's defaults apply
    index: int | None
    point: str | None
    problem: str | None = None


@dataclass
class CaptureResult(Result):
    engine: str
    arch_family: str | None
    num_layers: int
    ids: list[int] | None  # what the config gave (None: defaults)
    default_used: bool
    indices: list[int]  # the engine's capture-before indices (its layers_to_capture)
    points: list[Point | None]  # in concatenation order; None = a state that is never captured
    by_id: list[IdCapture]  # in config order
    notes: list[str] = field(default_factory=list)
    fatal: str | None = None  # the engine refuses to start or crashes on first forward

    @property
    def captured(self) -> list[Point]:
        return [p for p in self.points if p is not None]

    @property
    def complete(self) -> bool:
        return self.fatal is None and all(p is not None for p in self.points)

    def to_dict(self) -> dict[str, Any]:
        d = {
            k: getattr(self, k)
            for k in ("engine", "arch_family", "num_layers", "ids", "default_used", "indices", "notes", "fatal")
        }
        d["points"] = [point_str(p) for p in self.points]
        d["by_id"] = [c.to_dict() for c in self.by_id]
        return d


@dataclass(frozen=True)
class EngineRule:
    """How one engine (and version) on one target family turns config ids into captured points."""

    engine: str  # "sglang" or "vllm"
    version: tuple[int, int, int, int] | None
    family: str | None  # arch family, None = unknown (common rule assumed)
    plus_one: str  # "always", "first-is-1", "boundary-or-always", "never", "unsupported"
    embed_at_zero: bool  # index 0 captures the embedding output
    final_boundary: bool  # index N captures the pre-norm final stream
    source: str  # the release / file the rule was read from
    reads_top_level_first: bool = False  # vLLM: top-level ids win over eagle_config

    @property
    def name(self) -> str:
        v = f"=={version_text(self.version)}" if self.version else ""
        return f"{self.engine}{v}"

    def default_indices(self, num_layers: int) -> list[int]:
        n = _check_layers(num_layers)
        return [2, n // 2, n - 3]

    def indices_for(self, ids: Sequence[int], num_layers: int) -> list[int]:
        """The engine's ``layers_to_capture`` for explicit ids."""
        ids = [_check_id(i) for i in ids]
        if self.plus_one == "always":
            return [i + 1 for i in ids]
        if self.plus_one == "first-is-1":
            return [i + 1 for i in ids] if ids and ids[0] == 1 else list(ids)
        if self.plus_one == "boundary-or-always":
            return list(ids) if ids and max(ids) == num_layers else [i + 1 for i in ids]
        return list(ids)  # never (vLLM) / unsupported

    def ids_from_config(self, config: dict[str, Any]) -> tuple[list[Any] | None, str]:
        """The ids this engine reads from a draft config.json and where it found them."""
        top = config.get("eagle_aux_hidden_state_layer_ids") if isinstance(config, dict) else None
        ec = config.get("eagle_config") if isinstance(config, dict) else None
        nested = ec.get("eagle_aux_hidden_state_layer_ids") if isinstance(ec, dict) else None
        if self.reads_top_level_first and top is not None:
            return top, "eagle_aux_hidden_state_layer_ids"
        if nested is not None:
            return nested, "eagle_config.eagle_aux_hidden_state_layer_ids"
        return None, "default"

    def capture(self, ids: Sequence[int] | None, num_layers: int) -> CaptureResult:
        n = _check_layers(num_layers)
        notes: list[str] = []
        fatal = None
        default_used = ids is None
        if self.family is None and self.engine == "sglang":
            notes.append("target architecture unknown: assumed the always-+1 rule of llama/qwen")
        if self.plus_one == "unsupported" and "generated table" in self.source:
            fatal = f"{self.name} has no EAGLE-3 capture for this target ({self.source})"
        elif self.plus_one == "unsupported":
            fatal = (
                f"{self.name} has no EAGLE-3 capture for {self.family} targets "
                "(DeepSeek/Kimi support starts at sglang 0.5.4.post2)"
                if self.family == "deepseek_v2"
                else f"{self.name} has no EAGLE-3 capture for {self.family} targets"
            )
        if ids is None:
            indices = self.default_indices(n)
            notes.append(f"no layer ids in the config: {self.engine} default capture-before {indices}")
            id_list: list[int] = []
        else:
            id_list = [_check_id(i) for i in ids]
            indices = self.indices_for(id_list, n)
            if self.plus_one == "always":
                notes.append(f"{self.name}: config ids +1 -> capture-before {indices}")
            elif self.plus_one == "first-is-1":
                notes.append(
                    f"{self.name}: first id {'is' if id_list and id_list[0] == 1 else 'is not'} 1, "
                    f"so ids {'+1' if id_list and id_list[0] == 1 else 'used as-is'} "
                    f"-> capture-before {indices}"
                )
            elif self.plus_one == "boundary-or-always":
                notes.append(
                    f"{self.name}: max id {'==' if id_list and max(id_list) == n else '!='} N={n} "
                    f"-> capture-before {indices}"
                )
            elif self.plus_one == "never":
                notes.append(f"{self.name}: ids used verbatim as capture-before indices")

        # What each internal index yields (the capture loop runs before layer i, i in range(N)).
        yields: list[tuple[int, Point | None, str | None]] = []
        for idx in indices:
            if self.plus_one == "unsupported":
                yields.append((idx, None, "engine cannot capture on this target"))
            elif idx == 0:
                if self.embed_at_zero:
                    yields.append((idx, EMBED, None))
                    if self.engine == "vllm":
                        notes.append("index 0 taken as the embedding output (unverified for vLLM)")
                else:
                    yields.append((idx, None, "index 0 adds a None residual at layer 0"))
                    fatal = fatal or (
                        "capture index 0 computes hidden_states + None at layer 0 "
                        "(TypeError at the first forward; inferred from the code)"
                    )
            elif 1 <= idx <= n - 1:
                yields.append((idx, Point.out(idx - 1), None))
            elif idx == n and self.final_boundary:
                yields.append((idx, Point.out(n - 1), None))
            else:
                yields.append((idx, None, f"index {idx} is outside the capture loop 0..{n - 1}: never fires"))
        by_id = (
            [IdCapture(i, idx, point_str(p), prob) for i, (idx, p, prob) in zip(id_list, yields)]
            if not default_used
            else [IdCapture(None, idx, point_str(p), prob) for idx, p, prob in yields]
        )

        # Concatenation: loop order (ascending index), each index once; missing states go last.
        seen: set[int] = set()
        captured: list[tuple[int, Point]] = []
        missing = 0
        for idx, p, _prob in yields:
            if p is None:
                missing += 1
            elif idx in seen:
                missing += 1
                notes.append(f"index {idx} appears twice: captured once, one state is missing")
            else:
                seen.add(idx)
                captured.append((idx, p))
        captured.sort(key=lambda t: t[0])
        points: list[Point | None] = [p for _, p in captured] + [None] * missing
        if not default_used and [i for i in indices] != sorted(indices):
            notes.append(
                f"ids not ascending: {self.engine} concatenates in layer order {[str(p) for _, p in captured]}"
            )
        for _idx, _p, prob in yields:
            if prob and not fatal:
                notes.append(prob)
        if missing and not fatal:
            if (
                self.engine == "sglang"
                and self.family in ("deepseek_v2", "glm4_moe_lite")
                and (self.version or LATEST_SGLANG) >= (0, 5, 23, 0)
            ):
                fatal = (
                    f"captured {len(captured)} of {len(indices)} aux hidden states (RuntimeError at the first forward)"
                )
            else:
                notes.append(
                    f"{missing} of {len(indices)} states missing: the concatenated width is "
                    f"{len(captured)}*H and the drafter's fc input no longer fits"
                )
        return CaptureResult(
            self.name,
            self.family,
            n,
            None if default_used else id_list,
            default_used,
            indices,
            points,
            by_id,
            notes,
            fatal,
        )

    def ids_for(self, points: Sequence[Point | str], num_layers: int) -> list[int] | None:
        """Config ids that make this engine capture ``points`` in that order; None if impossible."""
        n = _check_layers(num_layers)
        want = [Point.parse(p) if isinstance(p, str) else p for p in points]
        want_c = [p.canonical(n) for p in want]
        candidates: list[list[int]] = []
        for conv in ("output-of-layer", "capture-before"):
            try:
                ids = from_points(want, conv, n)
            except InputError:
                continue
            candidates.append(ids)
            if len(ids) > 1:  # a rotation can dodge a first-id heuristic
                candidates.append(ids[1:] + ids[:1])
        for ids in candidates:
            res = self.capture(ids, n)
            if res.complete and [p.canonical(n) for p in res.captured] == want_c:
                return ids
        return None


def _sglang_rule(version: tuple[int, int, int, int], family: str | None) -> EngineRule:
    v = version
    embed0 = v >= (0, 5, 23, 0)
    src = f"sglang {version_text(v)}"
    if family == "deepseek_v2":
        if v < (0, 5, 4, 3):  # post2 = (0,5,4,3)
            return EngineRule(
                "sglang",
                v,
                family,
                "unsupported",
                embed0,
                False,
                src + ": deepseek_v2.py has no set_eagle3_layers_to_capture (added 0.5.4.post2)",
            )
        if v < (0, 5, 13, 0):
            return EngineRule(
                "sglang",
                v,
                family,
                "always",
                embed0,
                False,
                src + ": deepseek_v2.py always +1 (0.5.4.post2 .. 0.5.12.post1)",
            )
        return EngineRule(
            "sglang",
            v,
            family,
            "first-is-1",
            embed0,
            False,
            src + ": deepseek_v2.py +1 only if the first id is 1 (PR #25454, from 0.5.13)",
        )
    if family == "glm4_moe_lite":
        if v >= (0, 5, 13, 0):
            return EngineRule(
                "sglang",
                v,
                family,
                "first-is-1",
                embed0,
                False,
                src + ": glm4_moe_lite.py +1 only if the first id is 1 (from 0.5.13)",
            )
        return EngineRule(
            "sglang",
            v,
            family,
            "always",
            embed0,
            False,
            src + ": glm4_moe_lite assumed always +1 before 0.5.13 (unverified)",
        )
    if family == "gpt_oss" and v >= (0, 5, 23, 0):
        return EngineRule(
            "sglang",
            v,
            family,
            "boundary-or-always",
            embed0,
            True,
            src + ": gpt_oss.py boundary ids when max(ids) == N (PR #32334)",
        )
    if family == "qwen2" and v < (0, 5, 4, 0):
        return EngineRule(
            "sglang",
            v,
            family,
            "unsupported",
            embed0,
            False,
            src + ": qwen2.py has no set_eagle3_layers_to_capture before 0.5.4",
        )
    return EngineRule("sglang", v, family, "always", embed0, False, src + ": llama.py / qwen*.py always +1")


ENGINE_ALIASES = {
    "sglang-0.5.12": "sglang==0.5.12",
    "sglang-0.5.13": "sglang==0.5.13",
    "sglang-old": "sglang==0.5.12.post1",
    "sglang-new": "sglang==0.5.23",
    "sglang-latest": "sglang",
}


def parse_engine(engine: str) -> tuple[str, tuple[int, int, int, int] | None]:
    """'sglang==0.5.23' / 'sglang-0.5.13' / 'sglang' / 'vllm' -> (name, version or None)."""
    if not isinstance(engine, str) or not engine.strip():
        raise InputError(f"engine: expected 'sglang==X.Y.Z' or 'vllm', got {engine!r}")
    text = ENGINE_ALIASES.get(engine.strip().lower(), engine.strip().lower())
    m = re.fullmatch(r"(sglang|vllm)(?:\s*(?:==|=|-|@|\s)\s*(.+))?", text)
    if not m:
        raise InputError(f"engine: {engine!r} is not 'sglang', 'sglang==X.Y.Z' or 'vllm'")
    name, ver = m.group(1), m.group(2)
    return name, (parse_version(ver) if ver else None)


def rule_for(engine: str, arch: str | None = None) -> EngineRule:
    """The capture rule of ``engine`` ('sglang==0.5.12.post1', 'sglang', 'vllm', ...) for a target
    architecture (HF class name or model_type; None when unknown)."""
    name, version = parse_engine(engine)
    family = arch_family(arch)
    if name == "vllm":
        return EngineRule(
            "vllm",
            version,
            family,
            "never",
            True,
            True,
            "vLLM gpu_model_runner._get_eagle3_aux_layers_from_config: verbatim, top-level key first",
            reads_top_level_first=True,
        )
    return _table_rule(version or LATEST_SGLANG, arch, family) or _sglang_rule(version or LATEST_SGLANG, family)


# The arch the table is asked for when only a family is known (the class that family's targets run).
_FAMILY_ARCH = {
    "deepseek_v2": "DeepseekV3ForCausalLM",
    "glm4_moe_lite": "Glm4MoeLiteForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "llama": "LlamaForCausalLM",
}
_ID_MAP_TO_PLUS_ONE = {
    "plus-one": "always",
    "plus-one-if-first-is-1": "first-is-1",
    "as-is-if-max-is-n": "boundary-or-always",
    "as-is": "never",
    "unsupported": "unsupported",
}


def _table_rule(version: tuple[int, int, int, int], arch: str | None, family: str | None) -> EngineRule | None:
    """This module's rule as a cache of the generated table (``workbench.engine``): what the release's
    own code does; None when the table lacks the release or the code left the id mapping unknown."""
    from workbench.engine.lookup import _norm

    by = _table_index(version_text(version))
    if by is None or not arch:
        return None  # no release in the table, or no target: the assumed rule (with its note)
    r = by.get(_norm(arch)) if arch else None
    # a model class the release's code does not give the hook is unsupported; a model_type (or no
    # architecture) is read as its family's class
    is_class = bool(arch) and re.search(r"For[A-Z]\w*$", str(arch)) is not None
    if r is None and not is_class and family in _FAMILY_ARCH:
        r = by.get(_norm(_FAMILY_ARCH[family]))
    if r is None:
        return EngineRule(
            "sglang",
            version,
            family,
            "unsupported",
            False,
            False,
            f"sglang {version_text(version)}: no {arch or family} class with "
            "set_eagle3_layers_to_capture (generated table)",
        )
    plus = _ID_MAP_TO_PLUS_ONE.get(r.id_map)
    if plus is None:
        return None
    ev = next((e for e in r.evidence if e.what == "id_map"), None)
    return EngineRule(
        "sglang",
        version,
        family,
        plus,
        r.index0 == "embed",
        r.boundary == "final-prenorm",
        f"sglang {version_text(version)} (generated table): " + (f"{ev.file}:{ev.line}" if ev else r.file),
    )


# version -> (the table's rules, those rules by normalised class name), made once per release
_TABLE_INDEX: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}


def _table_index(version: str) -> dict[str, Any] | None:
    from workbench.engine import table
    from workbench.engine.lookup import _norm

    rows = table.release_rules(version)
    if rows is None:
        return None
    kept = _TABLE_INDEX.get(version)
    if kept is None or kept[0] is not rows:
        kept = (rows, {_norm(r.arch): r for r in rows})
        _TABLE_INDEX[version] = kept
    return kept[1]


KNOWN_ENGINES = ("sglang==0.5.4.post2", "sglang==0.5.12.post1", "sglang==0.5.13", "sglang==0.5.23", "vllm")
