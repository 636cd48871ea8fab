"""Edit a JSON document by dotted key and change nothing else: the other bytes, the key order and
the indentation stay as they were. Only the edited value's text is replaced (or one member is
inserted or removed), in the style of its surroundings."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

from workbench import strictjson
from workbench.errors import InputError

_WS = " \t\r\n"
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


@dataclass
class Node:
    """A parsed value with its span; objects keep their members in file order."""

    kind: str  # "object", "array", "scalar"
    start: int
    end: int
    members: list[Member] = field(default_factory=list)  # objects
    items: list[Node] = field(default_factory=list)  # arrays


@dataclass
class Member:
    key: str
    start: int  # where the key's opening quote is
    value: Node


class _Parser:
    def __init__(self, text: str, name: str):
        self.s, self.name, self.i = text, name, 0
        self.depth = 0

    def enter(self) -> None:
        self.depth += 1
        if self.depth > strictjson.MAX_DEPTH:
            self.fail(f"nested deeper than {strictjson.MAX_DEPTH} levels")

    def fail(self, msg: str) -> NoReturn:
        line = self.s.count("\n", 0, self.i) + 1
        col = self.i - (self.s.rfind("\n", 0, self.i) + 1) + 1
        raise InputError(f"{self.name}: invalid JSON at line {line} column {col}: {msg}")

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i] in _WS:
            self.i += 1

    def value(self) -> Node:
        self.ws()
        if self.i >= len(self.s):
            self.fail("unexpected end of input")
        c = self.s[self.i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        start = self.i
        if c == '"':
            self.string()
        elif self.s.startswith(("true", "null"), self.i):
            self.i += 4
        elif self.s.startswith("false", self.i):
            self.i += 5
        elif self.s.startswith(("NaN", "Infinity", "-Infinity"), self.i):
            m = re.match(r"-?Infinity|NaN", self.s[self.i :])
            self.i += cast("re.Match[str]", m).end()
        else:
            m = _NUMBER.match(self.s, self.i)
            if not m or m.end() == self.i:
                self.fail(f"unexpected character {c!r}")
            self.i = m.end()
        return Node("scalar", start, self.i)

    def string(self) -> str:
        start = self.i
        self.i += 1
        while True:
            j = self.s.find('"', self.i)
            if j < 0:
                self.i = start
                self.fail("unterminated string")
            k = j - 1
            backslashes = 0
            while self.s[k] == "\\":
                backslashes += 1
                k -= 1
            self.i = j + 1
            if backslashes % 2 == 0:
                try:
                    return cast(str, json.loads(self.s[start : self.i]))  # a JSON string literal
                except json.JSONDecodeError as exc:
                    self.i = start + exc.pos
                    self.fail(f"bad string: {exc.msg}")

    def obj(self) -> Node:
        self.enter()
        node = Node("object", self.i, -1)
        self.i += 1
        self.ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            node.end = self.i
            self.depth -= 1
            return node
        while True:
            self.ws()
            if not self.s.startswith('"', self.i):
                self.fail("expected a key in double quotes")
            kstart = self.i
            key = self.string()
            self.ws()
            if not self.s.startswith(":", self.i):
                self.fail("expected ':' after a key")
            self.i += 1
            node.members.append(Member(key, kstart, self.value()))
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("}", self.i):
                self.i += 1
                node.end = self.i
                self.depth -= 1
                return node
            self.fail("expected ',' or '}'")

    def arr(self) -> Node:
        self.enter()
        node = Node("array", self.i, -1)
        self.i += 1
        self.ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            node.end = self.i
            self.depth -= 1
            return node
        while True:
            node.items.append(self.value())
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("]", self.i):
                self.i += 1
                node.end = self.i
                self.depth -= 1
                return node
            self.fail("expected ',' or ']'")


def parse(text: str, name: str = "JSON") -> Node:
    p = _Parser(text, name)
    root = p.value()
    p.ws()
    if p.i != len(text):
        p.fail("extra data after the document")
    return root


def split_key(key: str) -> list[str]:
    parts = [p for p in str(key).split(".")]
    if not key or any(p == "" for p in parts):
        raise InputError(f"key {key!r}: expected a dotted key like eagle_config.eagle_aux_hidden_state_layer_ids")
    if len(parts) > strictjson.MAX_DEPTH or not _utf8(str(key)):
        raise InputError(
            f"key {str(key)[:60]!r}: expected a dotted key of at most {strictjson.MAX_DEPTH} parts, in valid Unicode"
        )
    return parts


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:  # lone surrogates (e.g. undecodable bytes of a command line)
        return False


# -- style ------------------------------------------------------------------------------------------


def _line_indent(text: str, pos: int) -> str:
    ls = text.rfind("\n", 0, pos) + 1
    m = re.match(r"[ \t]*", text[ls:])
    return cast("re.Match[str]", m).group(0)


def _indent_unit(text: str, root: Node) -> str | None:
    """The indentation step of the document (None when it is written on one line)."""
    for node in _walk(root):
        kids = [m.start for m in node.members] if node.kind == "object" else [n.start for n in node.items]
        if kids and "\n" in text[node.start : kids[0]]:
            outer = _line_indent(text, node.start)
            inner = _line_indent(text, kids[0])
            if len(inner) > len(outer) and inner.startswith(outer):
                return inner[len(outer) :]
    return None


def _walk(node: Node) -> Iterator[Node]:
    yield node
    for m in node.members:
        yield from _walk(m.value)
    for n in node.items:
        yield from _walk(n)


def _ensure_ascii(text: str) -> bool:
    """Keep \\uXXXX escapes if the file uses them and has no raw non-ASCII text."""
    return not any(ord(c) > 127 for c in text)


def _render(value: Any, text: str, base: str, multiline: bool, unit: str | None) -> str:
    """``value`` as JSON in the document's style; ``base`` is the indentation of its line."""
    ascii_only = _ensure_ascii(text)
    if not multiline or unit is None or not isinstance(value, (dict, list)) or not value:
        spaced = unit is not None or re.search(r",\s", text) or re.search(r'":\s', text)
        sep = (", ", ": ") if spaced else (",", ":")
        return strictjson.dumps(value, "value", ensure_ascii=ascii_only, separators=sep)
    body = strictjson.dumps(value, "value", ensure_ascii=ascii_only, indent=unit)
    return body.replace("\n", "\n" + base)


# -- edits ------------------------------------------------------------------------------------------

_DELETE = object()


def _descend(root: Node, text: str, parts: list[str], key: str) -> tuple[Node, Member | Node | None, str]:
    """Walk to the parent of the last part: (parent node, existing member/item or None, last part)."""
    node = root
    for depth, part in enumerate(parts[:-1]):
        child = _child(node, part, text, ".".join(parts[: depth + 1]))
        if child is None:
            return node, None, ".".join(parts[depth:])  # missing intermediate: caller creates
        node = child.value if isinstance(child, Member) else child
    last = parts[-1]
    return node, _child(node, last, text, key), last


def _child(node: Node, part: str, text: str, where: str) -> Member | Node | None:
    if node.kind == "object":
        found = [m for m in node.members if m.key == part]
        return found[-1] if found else None  # JSON parsers keep the last duplicate
    if node.kind == "array":
        if not re.fullmatch(r"-?\d+", part):
            raise InputError(f"key {where!r}: {part!r} indexes an array; expected a number")
        i = int(part)
        if not -len(node.items) <= i < len(node.items):
            raise InputError(f"key {where!r}: index {i} outside the array of {len(node.items)}")
        return node.items[i]
    raise InputError(f"key {where!r}: the value there is not an object or array")


def set_key(text: str, key: str, value: Any, *, name: str = "JSON") -> str:
    """Return ``text`` with the dotted ``key`` set to ``value``; missing objects are created."""
    return _edit(text, key, value, name)


def delete_key(text: str, key: str, *, name: str = "JSON") -> str:
    return _edit(text, key, _DELETE, name)


def _edit(text: str, key: str, value: Any, name: str) -> str:
    try:
        if value is not _DELETE:
            strictjson.check(value, key, as_field=True)
        return _edit_checked(text, key, value, name)
    except InputError as exc:
        if str(exc).startswith(f"{name}: "):
            raise
        raise InputError(f"{name}: {exc}") from None


def _edit_checked(text: str, key: str, value: Any, name: str) -> str:
    root = parse(text, name)
    if root.kind != "object":
        raise InputError(f"{name}: the top level is not a JSON object")
    unit = _indent_unit(text, root)
    parts = split_key(key)
    parent, existing, rest = _descend(root, text, parts, key)
    rest_parts = rest.split(".")
    if existing is not None and len(rest_parts) == 1:
        target = existing.value if isinstance(existing, Member) else existing
        if value is _DELETE:
            if not isinstance(existing, Member):
                raise InputError(f"key {key!r}: deleting array items is not supported")
            return _remove_member(text, parent, existing)
        multiline = "\n" in text[target.start : target.end]
        return (
            text[: target.start]
            + _render(value, text, _line_indent(text, target.start), multiline, unit)
            + text[target.end :]
        )
    if value is _DELETE:
        raise InputError(f"key {key!r}: not present, nothing to delete")
    if parent.kind != "object":
        raise InputError(f"key {key!r}: cannot add a member to an array")
    # Build the missing tail as nested objects and insert one member into ``parent``.
    new_value: Any = value
    for part in reversed(rest_parts[1:]):
        new_value = {part: new_value}
    return _insert_member(text, parent, rest_parts[0], new_value, unit)


def _insert_member(text: str, obj: Node, key: str, value: Any, unit: str | None) -> str:
    ascii_only = _ensure_ascii(text)
    kjson = json.dumps(key, ensure_ascii=ascii_only)
    if obj.members:
        last = obj.members[-1]
        after = last.value.end
        multiline = "\n" in text[obj.start : obj.members[0].start]
        if multiline:
            indent = _line_indent(text, last.start)
            rendered = _render(value, text, indent, True, unit)
            piece = f",\n{indent}{kjson}: {rendered}"
        else:
            sep = ", " if re.search(r",\s", text[obj.start : obj.end]) or ": " in text[obj.start : obj.end] else ","
            colon = ": " if ": " in text[obj.start : obj.end] else ":"
            piece = f"{sep}{kjson}{colon}{_render(value, text, '', False, unit)}"
        return text[:after] + piece + text[after:]
    # empty object: {} -> {\n<indent+unit>"k": v\n<indent>}
    if unit is None:
        return text[: obj.start] + "{" + f"{kjson}: {_render(value, text, '', False, None)}" + "}" + text[obj.end :]
    outer = _line_indent(text, obj.start)
    inner = outer + unit
    rendered = _render(value, text, inner, True, unit)
    return text[: obj.start] + "{\n" + inner + f"{kjson}: {rendered}\n{outer}}}" + text[obj.end :]


def _remove_member(text: str, obj: Node, member: Member) -> str:
    idx = obj.members.index(member)
    if len(obj.members) == 1:
        outer_close = obj.end - 1
        return text[: obj.start + 1] + text[outer_close:]
    if idx > 0:
        prev_end = obj.members[idx - 1].value.end
        return text[:prev_end] + text[member.value.end :]
    nxt = obj.members[1].start
    return text[: member.start] + text[nxt:]


def get_key(data: Any, key: str, default: Any = None) -> Any:
    node = data
    for part in split_key(key):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and re.fullmatch(r"-?\d+", part) and -len(node) <= int(part) < len(node):
            node = node[int(part)]
        else:
            return default
    return node


def apply_edits(
    text: str,
    sets: list[tuple[str, Any]],
    deletions: list[str] | tuple[str, ...] = (),
    *,
    name: str = "JSON",
    check_types: bool = True,
) -> str:
    """``text`` with every ``KEY=VALUE`` set and every key deleted, checked as a whole: the result is
    JSON, valid Unicode, and (unless ``check_types`` is off) every typed field the edits changed,
    however they reached it (``ids.0="abc"``, a whole ``eagle_config={...}``), has its type."""
    from workbench.draftconfig import schema

    new = text
    for key, value in sets:
        new = set_key(new, key, value, name=name)
    for key in deletions:
        new = delete_key(new, key, name=name)
    parse(new, name)
    if not _utf8(new):
        raise InputError(f"{name}: a value holds text that is not valid Unicode (a lone surrogate)")
    if check_types:
        schema.check_changes(_values(text, name), _values(new, name), name)
    return new


def _values(text: str, name: str) -> Any:
    """The document's values for comparing before and after (NaN and long integers already in the
    file kept as they are: only what an edit changes is judged)."""

    def big_int(s: str) -> int | tuple[str, str]:
        return int(s) if len(s) <= 4000 else ("<integer>", s)

    try:
        return json.loads(text, parse_int=big_int)
    except (ValueError, RecursionError):
        raise InputError(f"{name}: not valid JSON") from None


def parse_assignment(text: str) -> tuple[str, Any]:
    """'a.b=[2,30,58]' -> ('a.b', [2, 30, 58]). The value is standard JSON (finite numbers, bounded
    nesting); a bare word is taken as a string, except NaN/Infinity, which are refused."""
    if "=" not in text:
        raise InputError(f"{text!r}: expected KEY=VALUE, e.g. eagle_config.eagle_aux_hidden_state_layer_ids=[2,30,58]")
    key, _, raw = text.partition("=")
    key = key.strip()
    split_key(key)
    raw = raw.strip()
    try:
        return key, strictjson.loads(raw, key, as_field=True)
    except strictjson.JSONSyntaxError:
        if raw.lstrip("+-") in ("NaN", "Infinity", "inf", "nan", "Inf"):
            raise InputError(
                f"{key}: {raw} is not a JSON number; expected a finite number (quote it as '\"text\"' to set a string)"
            ) from None
        if re.fullmatch(r"[A-Za-z_][\w./-]*", raw) and raw not in ("true", "false", "null") and _utf8(raw):
            return key, raw
        raise InputError(
            f"{key}: value {raw[:60]!r} is not JSON (lists like [2,30,58]; quote text as '\"text\"')"
        ) from None
