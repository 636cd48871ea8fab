"""What one release of an engine does with an EAGLE-3 deployment, as read from its code.

A ``Release`` holds, per release: the capture rule of every target class with a capture hook
(``rules``), every class its model registry can load (``registry``: the target a config names is
served only if one of its ``architectures`` is there), the EAGLE-3 draft classes with the config keys
their code reads (``drafts``: a variant flag no draft code reads is silently ignored) and how wide
their ``fc`` is, and what the release's runner and config code decide for every model (``facts``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from workbench.engine.rule import UNKNOWN, CaptureRule, Evidence
from workbench.results import Result


def norm_arch(a: str) -> str:
    return "".join(ch for ch in a.lower() if ch.isalnum())


@dataclass(frozen=True)
class DraftClass(Result):
    """An EAGLE-3 draft class of a release: the config keys its code reads and its ``fc`` width."""

    arch: str
    file: str
    reads: dict[str, Evidence] = field(default_factory=dict)  # dotted config key -> where it is read
    fc_states: str = UNKNOWN  # "3" (hidden_size * 3 whatever the config says) | "config" | "unknown"
    evidence: tuple[Evidence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "file": self.file,
            "reads": {k: e.to_dict() for k, e in self.reads.items()},
            "fc_states": self.fc_states,
            "evidence": [e.to_dict() for e in self.evidence],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DraftClass:
        return cls(
            str(d["arch"]),
            str(d.get("file") or ""),
            {k: Evidence.from_dict(e) for k, e in (d.get("reads") or {}).items()},
            str(d.get("fc_states") or UNKNOWN),
            tuple(Evidence.from_dict(e) for e in d.get("evidence") or ()),
        )


@dataclass(frozen=True)
class Served(Result):
    """How a release serves a target config: the class its registry picks and that class's rule."""

    arch: str | None  # the class the registry resolves, None when it lists none of them
    rule: CaptureRule | None  # None: the class has no capture hook, or the registry lists none
    problem: str | None  # why there is no rule, one sentence
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class Release(Result):
    engine: str
    version: str
    source: str  # "table" | "wheel" | "installed" | "host" | "shipped"
    rules: tuple[CaptureRule, ...] = ()
    registry: dict[str, str] = field(default_factory=dict)  # class -> "file:line" of its registration
    drafts: dict[str, DraftClass] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    evidence: tuple[Evidence, ...] = ()
    read_from: str = ""  # the wheel or folder the code was read in

    @property
    def name(self) -> str:
        return f"{self.engine}=={self.version}"

    def by_class(self) -> dict[str, CaptureRule]:
        idx: dict[str, CaptureRule] | None = self.__dict__.get("_by_class")
        if idx is None:
            idx = {norm_arch(r.arch): r for r in self.rules}
            object.__setattr__(self, "_by_class", idx)
        return idx

    def registered(self, arch: str) -> str | None:
        """The registry's spelling of ``arch`` (class names compare case- and punctuation-blind)."""
        reg: dict[str, str] | None = self.__dict__.get("_reg")
        if reg is None:
            reg = {norm_arch(a): a for a in self.registry}
            object.__setattr__(self, "_reg", reg)
        return reg.get(norm_arch(arch))

    def serve(self, archs: Sequence[str]) -> Served:
        """The class the release's registry picks for a config's ``architectures`` (the first it
        lists, as both engines resolve them) and its capture rule."""
        archs = [a for a in archs if isinstance(a, str) and a]
        if not archs:
            return Served(None, None, "the target config names no architecture")
        for a in archs:
            got = self.registered(a)
            if got is None:
                continue
            rule = self.by_class().get(norm_arch(got))
            ev = tuple(e for e in self.evidence if e.what == "registry" and got in e.text)
            if rule is None:
                return Served(
                    got,
                    None,
                    f"{self.name}'s {got} has no EAGLE-3 capture hook: no aux hidden states on this target",
                    ev or (Evidence("registry", self.registry[got].rsplit(":", 1)[0], _line(self.registry[got]), got),),
                )
            return Served(got, rule, None, ev)
        listed = ", ".join(archs)
        if self.engine == "vllm":
            why = (
                f"{self.name}'s model registry has no class for {listed}: it could serve it only through "
                "the Transformers backend, whose capture was not read"
            )
        else:
            why = f"{self.name}'s model registry has no class for {listed}: it cannot load this target"
        return Served(None, None, why, tuple(e for e in self.evidence if e.what == "registry")[:1])

    def with_source(self, source: str) -> Release:
        return replace(self, source=source)

    # -- the table's packed form ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        from workbench.engine.table import pack

        return pack(self)


def _line(where: str) -> int:
    tail = where.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0
