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

This module is the vocabulary only. What an engine release really captures for a draft's ids is
``workbench.engine`` (read from each release's own code).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import total_ordering
from typing import cast

from workbench.errors import InputError

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
