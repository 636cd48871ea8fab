"""The log statements of one Python file, read with ``ast``: what an engine's code can write to its log.

A statement is a logging call (``logger.info(...)``, ``logger.warning_once(...)``, ``logging.error(...)``,
SGLang's ``print_warning_once(...)`` / ``log_info_on_rank0(logger, ...)``) or a ``raise X("...")``
(a failure's last traceback line reads ``X: ...``). Its message becomes a *template*: the literal text
with ``{}`` for each value filled in at run time (``%s``/``%d``/``%.2f``, f-string fields,
``str.format`` fields), literal braces doubled. A message built in a variable (``msg = f"..."``, then
``msg += f"..."`` under conditions, then ``logger.info(msg)``) is read as its pieces in order, each
marked optional where an ``if`` guards it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

LEVELS = {
    "debug": "debug",
    "debug_once": "debug",
    "info": "info",
    "info_once": "info",
    "warning": "warning",
    "warn": "warning",
    "warning_once": "warning",
    "error": "error",
    "error_once": "error",
    "exception": "error",
    "critical": "critical",
    "fatal": "critical",
}
# helpers that log their message argument (the engines' own: SGLang's utils)
HELPERS = {
    "print_info_once": ("info", 0),
    "print_warning_once": ("warning", 0),
    "log_info_on_rank0": ("info", 1),
    "_print_info_once": ("info", 1),
    "_print_warning_once": ("warning", 1),
}
_PCT = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_FMT = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


@dataclass
class Piece:
    template: str  # literal text, a ``str.format`` field where a value goes (``{}``, ``{:.2f}``), braces doubled
    holes: list[str]  # the source of each value, in order (an expression, with its format spec)
    optional: bool = False


@dataclass
class Statement:
    level: str  # debug, info, warning, error, critical, or raise
    line: int
    pieces: list[Piece] = field(default_factory=list)
    exception: str | None = None  # for a raise: the exception class as written

    @property
    def template(self) -> str:
        return "".join(p.template for p in self.pieces)


def _lit(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def _src(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # an AST unparse cannot print (never in practice)
        return "?"


Resolve = Callable[[str], "Piece | None"]


def _joined(node: ast.JoinedStr, resolve: Resolve | None = None) -> Piece:
    text: list[str] = []
    holes: list[str] = []
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            text.append(_lit(v.value))
        elif isinstance(v, ast.FormattedValue):
            spec = ""
            if isinstance(v.format_spec, ast.JoinedStr):
                spec = "".join(str(x.value) for x in v.format_spec.values if isinstance(x, ast.Constant))
            if isinstance(v.value, ast.JoinedStr):  # a nested f-string: its own text
                inner = _joined(v.value, resolve)
                text.append(inner.template)
                holes += inner.holes
                continue
            if resolve is not None and isinstance(v.value, ast.Name) and not spec and v.conversion in (-1, None):
                got = resolve(v.value.id)  # f"{msg} To allow ..." with msg = f"..." above it
                if got is not None:
                    text.append(got.template)
                    holes += got.holes
                    continue
            conv = "!" + chr(v.conversion) if v.conversion and v.conversion > 0 else ""
            text.append("{" + conv + (":" + spec if spec else "") + "}")
            holes.append(_src(v.value))
    return Piece("".join(text), holes)


def _percent(fmt: str, args: list[str]) -> Piece:
    """A %-format string: each conversion a hole (``%%`` a literal percent)."""
    out: list[str] = []
    holes: list[str] = []
    pos = 0
    k = 0
    for m in _PCT.finditer(fmt):
        out.append(_lit(fmt[pos : m.start()]))
        pos = m.end()
        if m.group(1) == "%":
            out.append("%")
            continue
        out.append(_pct_hole(m.group(0), m.group(1)))
        holes.append(args[k] if k < len(args) else "?")
        k += 1
    out.append(_lit(fmt[pos:]))
    return Piece("".join(out), holes)


def _pct_hole(conv: str, kind: str) -> str:
    """A %-conversion as the ``str.format`` field that prints the same: ``%.2f`` -> ``{:.2f}``,
    ``%s`` -> ``{}``, ``%r`` -> ``{!r}``."""
    if kind == "s":
        return "{}"
    if kind in "ra":
        return "{!r}"
    spec = re.sub(r"^%(?:\([^)]*\))?|[hlL]", "", conv)
    spec = spec.replace("i", "d").replace("u", "d")
    return "{:" + spec + "}"


def _format_call(fmt: str, args: list[str]) -> Piece:
    out: list[str] = []
    holes: list[str] = []
    pos = 0
    k = 0
    for m in _FMT.finditer(fmt):
        out.append(_lit(fmt[pos : m.start()]))
        pos = m.end()
        tok = m.group(0)
        if tok in ("{{", "}}"):
            out.append(tok)
            continue
        name, _, spec = tok[1:-1].partition(":")
        name, _, conv = name.partition("!")
        out.append("{" + ("!" + conv if conv else "") + (":" + spec if spec else "") + "}")
        holes.append(name or (args[k] if k < len(args) else "?"))
        if not name:
            k += 1
    out.append(_lit(fmt[pos:]))
    return Piece("".join(out), holes)


_TPL = re.compile(r"\$(?:(\$)|\{([_a-zA-Z][_a-zA-Z0-9]*)\}|([_a-zA-Z][_a-zA-Z0-9]*))")


def template_string(node: ast.AST) -> Piece | None:
    """``string.Template("...")``: its text, each ``$name`` / ``${name}`` a field (``$$`` a dollar)."""
    if not (
        isinstance(node, ast.Call)
        and _call_name(node.func) is not None
        and _call_name(node.func)[0] == "Template"  # type: ignore[index]
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return None
    text = node.args[0].value
    out: list[str] = []
    holes: list[str] = []
    pos = 0
    for m in _TPL.finditer(text):
        out.append(_lit(text[pos : m.start()]))
        pos = m.end()
        if m.group(1):
            out.append("$")
        else:
            out.append("{}")
            holes.append(m.group(2) or m.group(3))
    out.append(_lit(text[pos:]))
    return Piece("".join(out), holes)


def message(node: ast.AST, args: list[ast.expr] | None = None, resolve: Resolve | None = None) -> Piece | None:
    """The template of a message expression, or None where it is not built from literal text
    (``resolve``: the template of a local variable an f-string field names, where known)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if args:
            return _percent(node.value, [_src(a) for a in args])
        return Piece(_lit(node.value), [])
    if isinstance(node, ast.JoinedStr):
        return _joined(node, resolve)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            r = node.right
            elts = r.elts if isinstance(r, ast.Tuple) else [r]
            return _percent(node.left.value, [_src(e) for e in elts])
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = message(node.left, resolve=resolve), message(node.right, resolve=resolve)
        parts = [p if p is not None else Piece("{}", [_src(n)]) for p, n in ((left, node.left), (right, node.right))]
        if left is None and right is None:
            return None
        return Piece(parts[0].template + parts[1].template, parts[0].holes + parts[1].holes)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        pos = [_src(a) for a in node.args]
        return _format_call(node.func.value.value, pos)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("substitute"):
        return template_string(node.func.value)  # Template("...").substitute(...)
    return None


def _call_name(fn: ast.expr) -> tuple[str, str | None] | None:
    """(method, receiver) of a call's function: ``logger.info`` -> ("info", "logger")."""
    if isinstance(fn, ast.Attribute):
        recv = fn.value
        rname = recv.id if isinstance(recv, ast.Name) else (recv.attr if isinstance(recv, ast.Attribute) else None)
        return fn.attr, rname
    if isinstance(fn, ast.Name):
        return fn.id, None
    return None


def _receiver(node: ast.Attribute) -> str | None:
    got = _call_name(node)
    return got[1] if got is not None else None


def _is_logger(name: str | None) -> bool:
    return name is not None and ("log" in name.lower())


class _Reader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.out: list[Statement] = []
        self._fn: list[ast.FunctionDef | ast.AsyncFunctionDef] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._fn.append(node)
        self.generic_visit(node)
        self._fn.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815

    def _exception(self, node: ast.Call, name: str) -> None:
        """``SomeError("...")`` raised, returned or kept: read where it ends up, a traceback's last line."""
        pieces = self._pieces(node.args[0], node.lineno, 0)
        if pieces:
            one = Piece("".join(p.template for p in pieces), [h for p in pieces for h in p.holes])
            if one.template.strip("{}"):
                self.out.append(Statement("raise", node.lineno, [one], exception=name))

    def visit_Call(self, node: ast.Call) -> None:
        got = _call_name(node.func)
        if got is not None and node.args and got[0].endswith(("Error", "Exception")) and got[0][:1].isupper():
            self._exception(node, got[0])
        elif got is not None:
            meth, recv = got
            level = None
            idx = 0
            if meth in LEVELS and (_is_logger(recv) or recv == "logging" or self._logger_param(recv)):
                level = LEVELS[meth]
            elif meth in HELPERS:
                level, idx = HELPERS[meth]
            elif recv is None and isinstance(node.func, ast.Name):
                level = self._log_function(meth)
            if level is not None and len(node.args) > idx:
                for pieces in self._messages(node.args[idx], node.lineno):
                    if pieces and len(node.args) > idx + 1:  # logger.info("... %s", x): %-fields
                        pieces = [Piece(_pct_fields(p.template), p.holes, p.optional) for p in pieces]
                    if pieces and "".join(p.template for p in pieces).strip("{}"):
                        self.out.append(Statement(level, node.lineno, pieces))
        self.generic_visit(node)

    def _messages(self, expr: ast.expr, line: int) -> list[list[Piece]]:
        """The messages a call may log: one, or where a variable is only ever assigned whole (``if ...:
        msg = A`` ``else: msg = B``), each message it may hold."""
        if isinstance(expr, ast.Name) and self._fn:
            writes = self._writes(expr.id, line)
            if len(writes) > 1 and all(isinstance(w, ast.Assign) for _, _, w in writes):
                out: list[list[Piece]] = []
                for ln, _, w in writes:
                    got = self._pieces(w.value, ln, 1)  # type: ignore[attr-defined]
                    if got and all(got != o for o in out):
                        out.append(got)
                if out:
                    return out
        return [self._pieces(expr, line, 0)]

    def _logger_param(self, name: str | None) -> bool:
        """``name`` is a parameter of the function annotated as a logger (``lgr: Logger``)."""
        if name is None or not self._fn:
            return False
        a = self._fn[-1].args
        for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
            if arg.arg == name and arg.annotation is not None:
                return _src(arg.annotation).split(".")[-1].strip("'\"") == "Logger"
        return False

    def _log_function(self, name: str) -> str | None:
        """The level of a local name bound to a logger method (``log_fn = logger.debug if idle else
        logger.info``, or a parameter ``log_fn=logger.info``): the highest it may log at."""
        if not self._fn or "log" not in name.lower():
            return None
        fn = self._fn[-1]
        values: list[ast.AST | None] = []
        a = fn.args
        for arg, d in zip(a.args[len(a.args) - len(a.defaults) :], a.defaults):
            if arg.arg == name:
                values.append(d)
        for arg, kd in zip(a.kwonlyargs, a.kw_defaults):
            if arg.arg == name:
                values.append(kd)
        for node, _ in _walk_depth(fn):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                values.append(node.value)
        order = ["debug", "info", "warning", "error", "critical"]
        found = [
            LEVELS[n.attr]
            for v in values
            if v is not None
            for n in ast.walk(v)
            if isinstance(n, ast.Attribute) and n.attr in LEVELS and _is_logger(_receiver(n))
        ]
        return max(found, key=order.index) if found else None

    def _pieces(self, expr: ast.expr, line: int, depth: int) -> list[Piece]:
        """The message's pieces, in order: its own template; the pieces of a variable it names (the
        last assignment before ``line`` and the ``+=`` after it); the two sides of a ``+``; the items
        of ``SEP.join(a_list)`` (the list's literal items and its ``append`` calls). A piece written
        under a condition the message's first write is not under is optional."""
        direct = message(expr, resolve=lambda name: self._resolve(name, line, depth))
        if direct is not None:
            return [direct]
        if depth > 4 or not self._fn:
            return []
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left = self._pieces(expr.left, line, depth + 1)
            right = self._pieces(expr.right, line, depth + 1)
            if not left and not right:
                return []
            return (left or [Piece("{}", [_src(expr.left)])]) + (right or [Piece("{}", [_src(expr.right)])])
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr == "join"
            and isinstance(expr.func.value, ast.Constant)
            and isinstance(expr.func.value.value, str)
            and len(expr.args) == 1
            and isinstance(expr.args[0], ast.Name)
        ):
            return self._joined_list(_lit(expr.func.value.value), expr.args[0].id, line)
        if isinstance(expr, ast.Name):
            return self._variable(expr.id, line, depth)
        if (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr.endswith("substitute")
            and isinstance(expr.func.value, ast.Name)
        ):  # tpl = Template("..."); msg = tpl.substitute(...)
            for _, _, w in reversed(self._writes(expr.func.value.id, line)):
                got = template_string(w.value) if isinstance(w, ast.Assign) else None
                if got is not None:
                    return [got]
        return []

    def _resolve(self, name: str, line: int, depth: int) -> Piece | None:
        """A local variable's message as one piece (an f-string field that names it)."""
        if depth > 3 or not self._fn:
            return None
        got = self._variable(name, line, depth + 1)
        if not got:
            return None
        return Piece("".join(p.template for p in got), [h for p in got for h in p.holes])

    def _writes(self, name: str, line: int) -> list[tuple[int, int, ast.AST]]:
        """(line, depth, node) of the statements before ``line`` that write ``name``, in order."""
        out: list[tuple[int, int, ast.AST]] = []
        for node, depth in _walk_depth(self._fn[-1]):
            ln = getattr(node, "lineno", line)
            if ln >= line:
                continue
            assigns = isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets
            )
            if assigns or (
                isinstance(node, ast.AugAssign)
                and isinstance(node.op, ast.Add)
                and isinstance(node.target, ast.Name)
                and node.target.id == name
            ):
                out.append((ln, depth, node))
            elif (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr in ("append", "extend")
                and isinstance(node.value.func.value, ast.Name)
                and node.value.func.value.id == name
                and node.value.args
            ):
                out.append((ln, depth, node.value))
        out.sort(key=lambda w: w[0])
        return out

    def _variable(self, name: str, line: int, depth: int) -> list[Piece]:
        writes = self._writes(name, line)
        start = max((i for i, w in enumerate(writes) if isinstance(w[2], ast.Assign)), default=None)
        if start is None:
            return []
        base = writes[start][1]
        out: list[Piece] = []
        for i, (ln, d, node) in enumerate(writes[start:]):
            if isinstance(node, ast.Call):
                continue  # an append: a list, not a message
            value = node.value  # type: ignore[attr-defined]
            got = self._pieces(value, ln, depth + 1)
            if not got:
                if i == 0:
                    return []
                got = [Piece("{}", [_src(value)])]
            out += [Piece(p.template, p.holes, optional=p.optional or d > base) for p in got]
        return out

    def _joined_list(self, sep: str, name: str, line: int) -> list[Piece]:
        writes = self._writes(name, line)
        start = max(
            (i for i, w in enumerate(writes) if isinstance(w[2], ast.Assign) and isinstance(w[2].value, ast.List)),
            default=None,
        )
        if start is None:
            return []
        base = writes[start][1]
        items: list[Piece] = []
        for _, d, node in writes[start:]:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
                elts: list[ast.expr] = node.value.elts
            elif isinstance(node, ast.Call) and node.func.attr == "append":  # type: ignore[attr-defined]
                elts = [node.args[0]]
            elif isinstance(node, ast.Call) and isinstance(node.args[0], (ast.List, ast.Tuple)):
                elts = node.args[0].elts
            else:
                continue
            for e in elts:
                p = message(e) or Piece("{}", [_src(e)])
                items.append(Piece(p.template, p.holes, optional=d > base))
        out: list[Piece] = []
        for k, p in enumerate(items):
            out.append(Piece((sep if k else "") + p.template, p.holes, p.optional))
        return out


def _pct_fields(template: str) -> str:
    """A template whose literal text holds %-conversions, each made a field (``%%`` a percent)."""
    return _PCT.sub(lambda m: "%" if m.group(1) == "%" else _pct_hole(m.group(0), m.group(1)), template)


def piece_list(p: Piece) -> list[Piece]:
    return [p]


def _walk_depth(fn: ast.AST) -> Iterator[tuple[ast.AST, int]]:
    """The nodes under a function with how many ``if``/``for``/``while``/``try`` blocks hold each."""
    todo: list[tuple[ast.AST, int]] = [(fn, -1)]
    while todo:
        node, d = todo.pop()
        yield node, d
        nested = d + 1 if isinstance(node, (ast.If, ast.For, ast.While, ast.Try, ast.With)) else d
        if node is fn:
            nested = 0
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            todo.append((child, nested))


def read(text: str, name: str = "<file>") -> list[Statement]:
    """Every log statement and raise in a file's source (none where it does not parse)."""
    try:
        tree = ast.parse(text, name)
    except (SyntaxError, ValueError):
        return []
    r = _Reader()
    r.visit(tree)
    return r.out
