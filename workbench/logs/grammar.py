"""The generated grammar (``grammar.json``): every log statement of every release, as a matcher.

The parser's rules (``workbench.logs.rules``) read the lines a user acts on; this table says which of
the other lines the engine wrote itself (a line no rule reads is *known* when it matches a statement of
its engine, and only otherwise reported as not recognised), and at which level SGLang logged it (its
prefix does not say: a warning-level statement's line is a warning record).

A template becomes a regex: literal text escaped, each field ``.*?`` (``{:d}`` digits, ``{:.2f}`` a
number), the optional pieces of a composed message optional. Templates are indexed by the first word of
their literal text (or, for one that starts with a field, by the first word after it), so a line is
tried against the few statements that could have written it; each regex is compiled when first tried.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

TABLE = Path(__file__).with_name("grammar.json")
_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_SPACES = re.compile(r" +")
_WORD = re.compile(r"[A-Za-z_#][\w#-]{2,}")
MAX_LINE = 2000  # longer messages are not matched against the table (a pasted dump, not a statement)


class Statement(msgspec.Struct):
    """One statement of the table, as stored: its level (debug, info, warning, error, critical, raise), its
    template ``t``, the releases that write it ``r`` (indices into the engine's releases: "0-3,7") and where
    the newest does (``at``: file:line); ``parts`` for a composed message ((template, optional), ...)."""

    level: str
    t: str
    r: str
    at: str
    parts: list[tuple[str, int]] | None = None
    exception: str | None = None
    first: str | None = None
    engine: str = ""
    compiled: Any = None  # the regex, made when first tried

    @property
    def template(self) -> str:
        return self.t

    @property
    def releases(self) -> str:
        return self.r

    @property
    def regex(self) -> re.Pattern[str]:
        if self.compiled is None:
            parts = self.parts or [(self.t, 0)]
            body = "".join(f"(?:{_part_regex(t)})?" if opt else _part_regex(t) for t, opt in parts)
            if self.level == "raise" and self.exception:
                # a raise is read as the traceback's last line: "pkg.mod.Error: message"
                body = rf"(?:[\w.]*\b{re.escape(self.exception)}: )?" + body
            self.compiled = re.compile(body + r"\s*", re.S)
        return self.compiled  # type: ignore[no-any-return]

    def release_indices(self) -> list[int]:
        out: list[int] = []
        for part in self.r.split(","):
            a, _, b = part.partition("-")
            out += range(int(a), int(b or a) + 1)
        return out


class _Engine(msgspec.Struct):
    releases: list[str]
    statements: list[Statement]


class Table(msgspec.Struct):
    generator: str
    engines: dict[str, _Engine]
    rules: dict[str, Any] = {}


def _literal(text: str) -> str:
    """Literal text; its spaces as runs of whitespace (a paste widens or joins them)."""
    return r"\s+".join(re.escape(w) for w in _SPACES.split(text)) if " " in text else re.escape(text)


def _part_regex(template: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _FIELD.finditer(template):
        out.append(_literal(template[pos : m.start()]))
        pos = m.end()
        tok = m.group(0)
        if tok in ("{{", "}}"):
            out.append(re.escape(tok[0]))
        else:
            out.append(_field_regex(tok))
    out.append(_literal(template[pos:]))
    return "".join(out)


def _field_regex(tok: str) -> str:
    spec = tok[1:-1].partition(":")[2]
    if spec.endswith(("d", "x", "X", "o", "b")) and "," not in spec:
        return r"\s*-?[\da-fA-F_]+"
    if spec and spec[-1] in "fFeEgG%":
        return r"\s*(?:-?[\d.,]+(?:[eE][-+]?\d+)?%?|nan|inf|-inf)"
    return r".*?"


def _line_views(st: Statement) -> Iterator[Statement]:
    """The lines of a message of several lines, each as a statement of its own (the first keeps a raise's
    exception class); lines with too little literal text to say which statement wrote them are left out."""
    for k, line in enumerate(st.t.split("\n")):
        line = line.strip()
        if len(_FIELD.sub("", line).strip()) >= 8 and _WORD.search(_FIELD.sub(" ", line)):
            yield Statement(st.level, line, st.r, st.at, None, st.exception if k == 0 else None, st.first, st.engine)


def literal_words(template: str) -> tuple[str | None, str | None]:
    """(the first word when the template starts with literal text, else the first word after a field)."""
    head = _FIELD.split(template, maxsplit=1)[0]
    w = _WORD.match(head)
    if w is not None and template.startswith(w.group(0)):
        return w.group(0), None
    for m in _WORD.finditer(template):
        if not _inside_field(template, m.start()):
            return None, m.group(0)
    return None, None


def _inside_field(template: str, pos: int) -> bool:
    start = template.rfind("{", 0, pos)
    end = template.rfind("}", 0, pos)
    return start > end


class Grammar:
    """The statements of one engine (or of all), indexed for ``match``."""

    def __init__(self, data: dict[str, Any] | Table, engines: tuple[str, ...] | None = None) -> None:
        table = data if isinstance(data, Table) else msgspec.convert(data, Table)
        self.releases: dict[str, list[str]] = {}
        self.statements: list[Statement] = []
        for engine, eng in table.engines.items():
            if engines is not None and engine not in engines:
                continue
            self.releases[engine] = eng.releases
            for st in eng.statements:
                st.engine = engine
                self.statements.append(st)
        views = [v for st in self.statements if "\n" in st.t and st.parts is None for v in _line_views(st)]
        self._head: dict[tuple[str, str], list[Statement]] = {}
        self._inner: dict[tuple[str, str], list[Statement]] = {}
        for st in (*self.statements, *views):
            if "\n" in st.t and st.parts is None:
                continue  # read line by line (a logger writes each line of a message behind its own prefix)
            if st.level == "debug" and len(st.template) < 12:
                continue  # too little text to say a line is this statement
            head, inner = literal_words(st.template)
            if head is not None:
                self._head.setdefault((st.engine, head), []).append(st)
            elif inner is not None:
                self._inner.setdefault((st.engine, inner), []).append(st)
        for group in (*self._head.values(), *self._inner.values()):
            group.sort(key=lambda s: -len(s.template))  # the most specific first

    def match(self, engine: str, message: str) -> Statement | None:
        """The statement of ``engine`` that wrote ``message`` (the line after its prefixes), or None."""
        if len(message) > MAX_LINE:
            return None
        msg = message.rstrip()
        w = _WORD.match(msg)
        if w is not None:
            for st in self._head.get((engine, w.group(0)), ()):
                if st.regex.fullmatch(msg):
                    return st
            # a raise read from a traceback's last line: "ValueError: text" (the class, then the template)
            colon = msg.find(": ")
            if 0 < colon < 80:
                rest = msg[colon + 2 :]
                w2 = _WORD.match(rest)
                if w2 is not None:
                    for st in self._head.get((engine, w2.group(0)), ()):
                        if st.regex.fullmatch(msg) or st.regex.fullmatch(rest):
                            return st
        seen: set[str] = set()
        for m in _WORD.finditer(msg):
            word = m.group(0)
            if word in seen:
                continue
            seen.add(word)
            for st in self._inner.get((engine, word), ()):
                if st.regex.fullmatch(msg):
                    return st
        return None

    def of(self, engine: str, pattern: str) -> Iterator[Statement]:
        """The statements of ``engine`` whose template the regex ``pattern`` finds text in."""
        rx = re.compile(pattern)
        return (s for s in self.statements if s.engine == engine and rx.search(s.template))


def renderings(template: str, fill: tuple[str, ...] = ()) -> list[str]:
    """The template as lines the engine could print: each field filled with a value its format spec
    takes (``{:.2f}`` 12.50, ``{:d}`` 7, ``{!r}`` the value's repr); the plain fields with ``fill``, one
    value a field in order, then each with the same number, word or nothing (what a plain field holds
    is not in the template)."""
    plans: list[list[str]] = [list(fill)] if fill else []
    plans += [[v] * 64 for v in ("7", "LlamaForCausalLM", "")]
    out = []
    for plan in plans:
        values = iter(plan)
        parts: list[str] = []
        pos = 0
        for m in _FIELD.finditer(template):
            parts.append(template[pos : m.start()])
            pos = m.end()
            tok = m.group(0)
            if tok in ("{{", "}}"):
                parts.append(tok[0])
                continue
            conv, _, spec = tok[1:-1].partition(":")
            if spec and spec[-1] in "fFeEgG%":
                parts.append(format(12.5, spec))
            elif spec and spec[-1] in "dxXob":
                parts.append(format(7, spec))
            else:
                value = next(values, "7")
                if conv == "!r":
                    value = repr(int(value)) if value.isdigit() else repr(value)
                parts.append(value)
        parts.append(template[pos:])
        out.append("".join(parts))
    return out


def rule_statements(
    g: Grammar, engine: str, key: str, levels: tuple[str, ...] | None = None
) -> list[tuple[str, str, str, str]]:
    """(template, releases "a-b, c", file:line in the newest, the exception a raise makes or "") of the
    statements of ``engine`` whose template the regex ``key`` finds (at these ``levels``): what a rule that
    reads them is checked against, with the releases that write each form (a release that changed the
    message shows)."""
    names = g.releases[engine]
    out = []
    for st in g.of(engine, key):
        if levels is not None and st.level not in levels:
            continue
        idx = st.release_indices()
        spans = []
        start = prev = idx[0]
        for i in [*idx[1:], None]:
            if i is not None and i == prev + 1:
                prev = i
                continue
            spans.append(names[start] if start == prev else f"{names[start]}-{names[prev]}")
            if i is not None:
                start = prev = i
        out.append((st.template, ", ".join(spans), st.at, st.exception or ""))
    return sorted(set(out), key=lambda x: (x[1], x[0], x[2], x[3]))


def as_logged(template: str, exception: str, fill: tuple[str, ...] = ()) -> list[str]:
    """``renderings`` as the lines a log shows: a raise's message behind its exception's name, as a
    traceback's last line reads."""
    lines = renderings(template, fill)
    return [f"{exception}: {x}" for x in lines] if exception else lines


@cache
def load(path: Path = TABLE) -> Grammar:
    """The table shipped with the package (read once per process, straight into its statements)."""
    return Grammar(msgspec.json.decode(path.read_bytes(), type=Table))
