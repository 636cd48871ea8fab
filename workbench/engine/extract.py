"""The extractor: an SGLang installation's EAGLE-3 capture behaviour, read from its own code.

For every architecture a release serves (``EntryClass`` in ``sglang/srt/models/*.py``) whose class
has or inherits ``set_eagle3_layers_to_capture``:

- the hook is *executed* on a stub (``workbench.engine.stub``) for probe ids and layer counts; the
  id mapping and the defaults are the candidates that reproduce every probe, the start-up failure
  the exception the hook itself raises;
- the capturing model's ``forward`` is classified from its ``ast``: where the capture sits in the
  layer loop (before layer i, after layer i, or handed into the layer's input stage), what index 0
  and index N capture, and whether a state that never fires is fatal (``AuxHiddenStatePacker``);
- the runner files give the CUDA-graph order and where the ids come from in the draft config.

Each part carries file:line evidence; a pattern that is not recognised is ``unknown`` with the
lines that were looked at.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import (
    Any,
    Literal,
    TypeVar,
    cast,
    overload,
)

from workbench.collector import paused
from workbench.engine.release import DraftClass, Release
from workbench.engine.rule import UNKNOWN, CaptureRule, Evidence
from workbench.engine.source import Source, statements
from workbench.engine.stub import HOOK, Outcome, run_hook

PROBE_LAYERS = (32, 61, 36, 48)
FLAG = "_is_layer_to_capture"  # the per-layer flag of layer-attr capture
MODELS = "sglang/srt/models"

_FnDef = ast.FunctionDef | ast.AsyncFunctionDef
_T = TypeVar("_T", bound=ast.AST)
_U = TypeVar("_U", bound=ast.AST)
# where a capture test sits: guarding a statement, as a call's keyword argument, or elsewhere
_Site = tuple[Literal["if"], ast.If] | tuple[Literal["keyword"], ast.keyword] | tuple[Literal["other"], None]


def _probe_ids(n: int) -> list[list[int]]:
    return [
        [2, n // 2, n - 4],
        [1, n // 2 - 1, n - 4],
        [0, 5, 10],
        [3, 10, n],
        [n - 3, 5, 1],
        [-1, 2, 30 % n],
        [1, 2],
        [5],
    ]


_CANDIDATES: dict[str, Callable[[list[int], int], list[int]]] = {
    "plus-one": lambda ids, n: [i + 1 for i in ids],
    "plus-one-if-first-is-1": lambda ids, n: [i + 1 for i in ids] if ids and ids[0] == 1 else list(ids),
    "as-is-if-max-is-n": lambda ids, n: list(ids) if ids and max(ids) == n else [i + 1 for i in ids],
    "as-is": lambda ids, n: list(ids),
}


def extract(
    root: str | os.PathLike[str] | Source, version: str | None = None, archs: Collection[str] | None = None
) -> list[CaptureRule]:
    """Every EAGLE-3-capable architecture of the installation at ``root`` (or those in ``archs``)."""
    with paused():  # (a release's parsed files: see workbench.collector)
        return _extract(root, version, archs)


def read_release(
    root: str | os.PathLike[str] | Source, version: str | None = None, archs: Collection[str] | None = None
) -> Release:
    """Every part of one SGLang release: the capture rules, its model registry, its EAGLE-3 drafts."""
    from workbench.engine.drafts import draft_class
    from workbench.engine.registry import sglang_registry

    with paused():
        src = root if isinstance(root, Source) else Source(root)
        version = version or src.version() or "unknown"
        rules = _extract(src, version, archs)
        reg, reg_ev = sglang_registry(src)
        drafts: dict[str, DraftClass] = {}
        for arch, (rel, _line) in sorted(reg.items()):
            if "eagle3" in arch.lower() or "eagle3" in rel:
                d = draft_class(src, arch, rel)
                if d is not None:
                    drafts[arch] = d
        registry = {a: f"{f}:{line}" for a, (f, line) in reg.items()}
        return Release("sglang", version, "wheel", tuple(rules), registry, drafts, {}, tuple(reg_ev), str(src.root))


def _extract(
    root: str | os.PathLike[str] | Source, version: str | None, archs: Collection[str] | None
) -> list[CaptureRule]:
    from workbench.engine.registry import sglang_registry

    src = root if isinstance(root, Source) else Source(root)
    version = version or src.version() or "unknown"
    graph = graph_order(src)
    ids_from = id_sources(src)
    out: list[CaptureRule] = []
    reg, _ev = sglang_registry(src)
    for arch, (rel, _line) in sorted(reg.items()):
        if archs is not None and arch not in archs:
            continue
        found = src.find_class(rel, arch)
        if found is None:
            continue
        f, cls = found
        hook = src.find_method(f, cls, HOOK)
        if hook is None:
            continue
        rule = extract_class(src, f, cls, arch, version)
        rule = replace(
            rule,
            graph_reset=graph["graph_reset"],
            config_before_graphs=graph["config_before_graphs"],
            id_source=tuple(ids_from["keys"]),
            config_ids="read" if ids_from["keys"] else UNKNOWN,
            evidence=tuple(rule.evidence) + tuple(graph["evidence"]) + tuple(ids_from["evidence"]),
        )
        out.append(rule)
    out.sort(key=lambda r: r.arch)
    return out


def unsupported(arch: str, version: str) -> CaptureRule:
    return CaptureRule(
        "sglang",
        version,
        arch,
        "",
        id_map="unsupported",
        membership="none",
        index0="none",
        boundary="none",
        missing="none",
        evidence=(Evidence("id_map", MODELS, 0, f"no class {arch} with {HOOK} in this release"),),
    )


def extract_class(src: Source, rel: str, cls: ast.ClassDef, arch: str, version: str) -> CaptureRule:
    ev: list[Evidence] = []
    # extract() calls this only for classes it found the hook on
    hook_file, hook_cls, hook_node = cast(
        "tuple[str, ast.ClassDef, ast.FunctionDef | ast.AsyncFunctionDef]", src.find_method(rel, cls, HOOK)
    )
    ev.append(Evidence("hook", hook_file, hook_node.lineno, f"{hook_cls.name}.{HOOK}"))
    id_map, default, startup, where, delegate = _fit_hook(src, rel, cls, ev)
    # the class whose forward runs the capture: the stub path the ids were written on
    model = _resolve_path(src, rel, cls, where) if where else None
    if delegate is None and where and where.count(".") >= 2:
        first = where.split(".")[1]
        part = src.attr_classes(rel, cls).get(first)
        delegate = part[1].name if part else None
    rule = CaptureRule("sglang", version, arch, rel, id_map=id_map, default=default, startup=startup, delegate=delegate)
    if model is None:
        ev.append(
            Evidence(
                "forward",
                hook_file,
                hook_node.lineno,
                f"unknown: the model that holds layers_to_capture ({where}) was not resolved",
            )
        )
        return replace(rule, evidence=tuple(ev))
    mf, mcls = model
    fwd = src.find_method(mf, mcls, "forward")
    if fwd is None:
        ev.append(Evidence("forward", mf, mcls.lineno, f"unknown: {mcls.name} has no forward"))
        return replace(rule, evidence=tuple(ev))
    parts = classify_forward(src, fwd[0], fwd[2], ev)
    if parts["membership"] == "layer-attr":
        # the forward tests a flag on each layer: only a hook that sets it (on the layers of the capturing
        # model, directly or through that model's own hook) makes any state fire
        probe = run_hook(src, rel, cls, [1, 2, 3], PROBE_LAYERS[0])
        if not any(name == FLAG for _p, name, v in probe.writes if v):
            # the flag never fires: an index test beside it is what captures, else nothing does
            by_index = any((m := _membership(x)) is not None and m[0] == "index" for x in ast.walk(fwd[2]))
            parts["membership"] = "index" if by_index else "never"
            ev.append(
                Evidence(
                    "membership",
                    hook_file,
                    hook_node.lineno,
                    f"{parts['membership']}: the forward tests {FLAG} on each layer, which this hook never sets"
                    + ("; the index test beside it captures" if by_index else ""),
                )
            )
    return replace(
        rule,
        evidence=tuple(ev),
        membership=parts["membership"],
        index0=parts["index0"],
        boundary=parts["boundary"],
        missing=parts["missing"],
    )


# -- the hook, executed ------------------------------------------------------------------------------
def _fit_hook(
    src: Source, rel: str, cls: ast.ClassDef, ev: list[Evidence]
) -> tuple[str, tuple[str, ...] | None, str, str | None, str | None]:
    # extract_class calls this only for classes it found the hook on
    hook_file, _c, hook_node = cast("tuple[str, ast.ClassDef, _FnDef]", src.find_method(rel, cls, HOOK))
    alive = dict(_CANDIDATES)
    startup = "none"
    where = None
    seen = 0
    errors: list[tuple[list[int], int, Outcome]] = []
    for n in PROBE_LAYERS:
        for ids in _probe_ids(n):
            o = run_hook(src, rel, cls, ids, n)
            if o.error:
                errors.append((ids, n, o))
                continue
            if o.indices is None:
                continue
            where = where or o.where
            seen += 1
            alive = {k: f for k, f in alive.items() if f(ids, n) == o.indices}
    id_map = next(iter(alive)) if (alive and seen) else UNKNOWN
    for ids, n, o in errors:
        if (o.error or "").startswith("IndexError") and o.error_line:
            f, line = o.error_line
            text = src.line(f, line)
            if "layers[" in text:
                startup = "index-error"
                ev.append(Evidence("startup", f, line, f"{text}  (ids {ids}, N={n}: {o.error})"))
                break
    unexplained = [e for e in errors if not (startup == "index-error" and (e[2].error or "").startswith("IndexError"))]
    if unexplained:
        ids, n, o = unexplained[0]
        f, line = o.error_line or (hook_file, hook_node.lineno)
        ev.append(Evidence("id_map", f, line, f"hook raised for ids {ids}, N={n}: {o.error}"))
        if startup == "none":
            id_map = UNKNOWN
    if where and where.count(".") >= 2:  # a wrapper: the ids are mapped by its part's own hook
        owner = _resolve_path(src, rel, cls, where.rsplit(".", 1)[0])
        inner = src.find_method(owner[0], owner[1], HOOK) if owner else None
        if inner is not None:
            hook_file, _c, hook_node = inner
    if id_map != UNKNOWN:
        line = _assign_line(src, hook_file, hook_node) or hook_node.lineno
        ev.append(
            Evidence(
                "id_map",
                hook_file,
                line,
                f"{id_map}: {src.line(hook_file, line)}"
                + (f" (also consistent: {', '.join(list(alive)[1:])})" if len(alive) > 1 else ""),
            )
        )
    else:
        ev.append(
            Evidence(
                "id_map",
                hook_file,
                hook_node.lineno,
                "unknown: no candidate mapping reproduces the hook's output on the probes",
            )
        )
    # defaults: the hook with no ids, fitted per position to c, N-c or N//k
    outs: dict[int, list[Any] | None] = {}
    for n in PROBE_LAYERS:
        o = run_hook(src, rel, cls, None, n)
        outs[n] = o.indices if not o.error else None
        where = where or o.where
    default = _fit_default(outs)
    dline = _default_line(src, hook_file, hook_node) or hook_node.lineno
    ev.append(
        Evidence(
            "default",
            hook_file,
            dline,
            (f"[{', '.join(default)}]: " if default else "unknown: ") + src.line(hook_file, dline),
        )
    )
    return id_map, default, startup, where, None


def _fit_default(outs: Mapping[int, Sequence[Any] | None]) -> tuple[str, ...] | None:
    got = {n: v for n, v in outs.items() if v is not None}
    if not got or len(got) != len(outs) or len({len(v) for v in got.values()}) != 1:
        return None
    vals = list(got.values())
    exprs = []
    for pos in range(len(vals[0])):
        col = {n: got[n][pos] for n in got}
        if len(set(col.values())) == 1:
            exprs.append(str(next(iter(col.values()))))
            continue
        fit = None
        for c in range(0, 9):
            if all(v == n - c for n, v in col.items()):
                fit = f"N-{c}" if c else "N"
                break
        if fit is None:
            for k in range(2, 9):
                if all(v == n // k for n, v in col.items()):
                    fit = f"N//{k}"
                    break
        if fit is None:
            return None
        exprs.append(fit)
    return tuple(exprs)


def _assign_line(src: Source, f: str, node: ast.AST) -> int | None:
    """The line of the hook that writes ids into layers_to_capture (the else branch)."""
    lines = [
        n.lineno
        for n in ast.walk(node)
        if (
            isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Attribute) and t.attr == "layers_to_capture" for t in n.targets)
            and not isinstance(n.value, ast.List)
        )
        or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == HOOK)
    ]
    return max(lines) if lines else None


def _default_line(src: Source, f: str, node: ast.AST) -> int | None:
    for n in ast.walk(node):
        if isinstance(n, ast.List) and len(n.elts) >= 2 and any(isinstance(e, ast.BinOp) for e in n.elts):
            return n.lineno
    return None


def _resolve_path(src: Source, rel: str, cls: ast.ClassDef, path: str) -> tuple[str, ast.ClassDef] | None:
    """'self.model' / 'self.language_model.model' -> the class at that path (via __init__ assignments)."""
    f, c = rel, cls
    for attr in path.split(".")[1:]:
        found = src.attr_classes(f, c).get(attr)
        if found is None:
            return None
        f, c = found[0], found[1]
    return f, c


# -- the forward loop, read ---------------------------------------------------------------------------
def _is_ltc(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "layers_to_capture"


def _membership(node: ast.AST) -> tuple[str, ast.AST | None] | None:
    """('index', left) for ``X in self.layers_to_capture``; ('layer-attr', None) for the flag getattr."""
    if (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In)
        and _is_ltc(node.comparators[0])
    ):
        return "index", node.left
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value == "_is_layer_to_capture"
    ):
        return "layer-attr", None
    return None


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    par = {}
    for p in ast.walk(tree):
        for c in ast.iter_child_nodes(p):
            par[c] = p
    return par


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _guarded(node: ast.AST) -> bool:
    """``residual is not None`` / ``residual is None`` tested in ``node``."""
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Compare)
            and len(n.ops) == 1
            and isinstance(n.ops[0], (ast.IsNot, ast.Is))
            and isinstance(n.comparators[0], ast.Constant)
            and n.comparators[0].value is None
            and "residual" in _names(n.left)
        ):
            return True
    return False


def _adds_residual(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and "residual" in _names(n) for n in ast.walk(node)
    )


def _appends(node: ast.AST) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("append", "capture")
        and n.args
    ]


def classify_forward(src: Source, rel: str, fwd: _FnDef, ev: list[Evidence]) -> dict[str, str]:
    par = _parents(fwd)
    loops = [n for n in ast.walk(fwd) if isinstance(n, ast.For) and _loop_var(n)]
    tests: list[tuple[Any, Any]] = [(n, _membership(n)) for n in ast.walk(fwd)]
    tests = sorted([(n, m) for n, m in tests if m], key=lambda t: t[0].lineno)
    out = {"membership": UNKNOWN, "index0": UNKNOWN, "boundary": UNKNOWN, "missing": UNKNOWN}
    if not tests:
        ev.append(Evidence("forward", rel, fwd.lineno, "unknown: forward never tests layers_to_capture"))
        return out
    loop = None
    in_loop: list[tuple[Any, Any]] = []
    for node, m in tests:
        for lp in loops:
            if _within(node, lp, par):
                loop = loop or lp
                in_loop.append((node, m))
    if loop is None:
        ev.append(Evidence("forward", rel, tests[0][0].lineno, "unknown: the capture test is not in a layer loop"))
        return out
    var = _loop_var(loop)
    node, (kind, left) = in_loop[0]
    out["membership"] = kind
    # after layer i (``i + 1 in``): a boundary loop
    offset = 0
    if kind == "index":
        if (
            isinstance(left, ast.BinOp)
            and isinstance(left.op, ast.Add)
            and isinstance(left.right, ast.Constant)
            and isinstance(left.left, ast.Name)
            and left.left.id == var
        ):
            offset = int(cast(Any, left.right.value))
        elif not (isinstance(left, ast.Name) and left.id == var):
            ev.append(Evidence("loop", rel, node.lineno, f"unknown: {src.line(rel, node.lineno)}"))
            return out
    site = _site(node, loop, par)
    text = src.line(rel, node.lineno)
    if offset == 1:
        _after_layer(src, rel, node, loop, tests, par, out, ev)
    elif offset == 0 and site[0] == "if":
        ev.append(Evidence("loop", rel, node.lineno, f"before layer i: {text}"))
        out["index0"] = _before_layer(src, rel, fwd, loop, node, site[1], ev)
    elif offset == 0 and site[0] == "keyword":
        kw = site[1]
        ev.append(Evidence("loop", rel, node.lineno, f"in layer i's input stage ({kw.arg}=): {text}"))
        res = _chase(src, rel, kw.arg)
        if res is None:
            ev.append(Evidence("index0", rel, node.lineno, f"unknown: where the layer uses {kw.arg} was not found"))
        else:
            out["index0"], line_ev = res
            ev.append(line_ev)
    else:
        ev.append(Evidence("loop", rel, node.lineno, f"unknown capture site: {text}"))
    if offset == 0:
        out["boundary"] = _boundary(src, rel, fwd, loop, tests, par, ev)
    out["missing"] = _missing(src, rel, fwd, ev)
    return out


def _after_layer(
    src: Source,
    rel: str,
    node: ast.AST,
    loop: ast.For,
    tests: Sequence[tuple[Any, Any]],
    par: Mapping[ast.AST, ast.AST],
    out: dict[str, str],
    ev: list[Evidence],
) -> None:
    """A capture after layer i (``i + 1 in ...``): index N is the stream after the last layer; index 0
    is a test before the loop (guarded: the embedding) or never made."""
    line = getattr(node, "lineno", loop.lineno)
    ev.append(Evidence("loop", rel, line, f"after layer i (boundary loop: index i+1 = out(i)): {src.line(rel, line)}"))
    pre = [
        (n, m)
        for n, m in tests
        if n.lineno < loop.lineno and m[0] == "index" and isinstance(m[1], ast.Attribute) and "start" in m[1].attr
    ]
    if pre:
        p_if = _enclosing(pre[0][0], par, ast.If)
        g = p_if is not None and _guarded(p_if)
        out["index0"] = "embed" if g else UNKNOWN
        ev.append(
            Evidence(
                "index0",
                rel,
                pre[0][0].lineno,
                ("embed (guarded residual is None): " if g else "unknown: ") + src.line(rel, pre[0][0].lineno),
            )
        )
    else:
        out["index0"] = "none"
        ev.append(Evidence("index0", rel, loop.lineno, "index 0 is never tested: no embedding capture"))
    out["boundary"] = "final-prenorm"
    ev.append(Evidence("boundary", rel, line, "index N fires after the last layer, before the final norm"))


def _before_layer(
    src: Source, rel: str, fwd: _FnDef, loop: ast.For, node: ast.AST, body: ast.If, ev: list[Evidence]
) -> str:
    """Index 0 of a capture before layer i: what the appended value does with the first layer's
    residual (None there)."""
    apps = [_resolved_arg(a, body) for a in _appends(body)]
    helper = _helper(src, rel, apps)
    if helper is not None:  # ``append(snapshot(hidden_states, residual))``: read the helper
        hf, hfn = helper
        guard = next((n for n in ast.walk(hfn) if isinstance(n, ast.Compare) and _guarded(n)), None)
        if guard is not None and _adds_residual(hfn):
            ev.append(
                Evidence(
                    "index0",
                    hf,
                    guard.lineno,
                    f"embed ({hfn.name} handles residual None): " + src.line(hf, guard.lineno),
                )
            )
            return "embed"
    if apps and all(_guarded(body) or _guarded(a) for a in apps):
        line = apps[0].lineno
        ev.append(Evidence("index0", rel, line, "embed (guarded residual is not None): " + src.line(rel, line)))
        return "embed"
    if apps and all(_adds_residual(a) for a in apps):
        line = apps[0].lineno
        none_line = _residual_none_before(fwd, loop)
        if none_line:
            ev.append(
                Evidence(
                    "index0",
                    rel,
                    line,
                    f"type-error (hidden_states + residual, residual = None at line {none_line}): "
                    + src.line(rel, line),
                )
            )
            return "type-error"
        ev.append(Evidence("index0", rel, line, "unknown: residual at layer 0 not settled: " + src.line(rel, line)))
        return UNKNOWN
    line = getattr(node, "lineno", body.lineno)
    ev.append(Evidence("index0", rel, line, f"unknown capture expression: {src.line(rel, line)}"))
    return UNKNOWN


def _helper(src: Source, rel: str, apps: Sequence[ast.expr]) -> tuple[str, ast.FunctionDef] | None:
    """The module-level function every appended value is a call of, resolved through the imports."""
    names = {a.func.id for a in apps if isinstance(a, ast.Call) and isinstance(a.func, ast.Name)}
    if len(names) != 1 or len(apps) == 0 or not all(isinstance(a, ast.Call) for a in apps):
        return None
    name = names.pop()
    for f in [rel] + [
        src.module_file(n.module)
        for n in src.imports(rel)
        if n.module and n.level == 0 and any((x.asname or x.name) == name for x in n.names)
    ]:
        if not f:
            continue
        t = src.tree(f)
        for node in t.body if t else []:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return f, node
    return None


def _loop_var(n: ast.For) -> str | None:
    """The layer index of ``for i in range(...)`` or ``for i, layer in enumerate(...)``."""
    if not (isinstance(n.iter, ast.Call) and isinstance(n.iter.func, ast.Name)):
        return None
    if n.iter.func.id == "range" and isinstance(n.target, ast.Name):
        return n.target.id
    if (
        n.iter.func.id == "enumerate"
        and isinstance(n.target, ast.Tuple)
        and n.target.elts
        and isinstance(n.target.elts[0], ast.Name)
    ):
        return n.target.elts[0].id
    return None


def _resolved_arg(call: ast.Call, body: ast.AST) -> ast.expr:
    """An appended value: the expression itself, or what a local name was assigned in the same block."""
    arg = call.args[0]
    if isinstance(arg, ast.Name):
        for n in ast.walk(body):
            if (
                isinstance(n, ast.Assign)
                and n.lineno < call.lineno
                and any(isinstance(t, ast.Name) and t.id == arg.id for t in n.targets)
            ):
                return n.value
    return arg


def _within(node: ast.AST, anc: ast.AST, par: Mapping[ast.AST, ast.AST]) -> bool:
    while node in par:
        node = par[node]
        if node is anc:
            return True
    return False


@overload
def _enclosing(node: ast.AST, par: Mapping[ast.AST, ast.AST], typ: type[_T]) -> _T | None: ...
@overload
def _enclosing(node: ast.AST, par: Mapping[ast.AST, ast.AST], typ: tuple[type[_T], type[_U]]) -> _T | _U | None: ...
def _enclosing(
    node: ast.AST, par: Mapping[ast.AST, ast.AST], typ: type[ast.AST] | tuple[type[ast.AST], ...]
) -> ast.AST | None:
    while node in par:
        node = par[node]
        if isinstance(node, typ):
            return node
    return None


def _site(node: ast.AST, loop: ast.AST | None, par: Mapping[ast.AST, ast.AST]) -> _Site:
    """('if', if-node) when the test guards a statement; ('keyword', kw) when it is a call argument."""
    cur = node
    while cur in par and cur is not loop:
        p = par[cur]
        if isinstance(p, ast.keyword):
            return "keyword", p
        if (isinstance(p, ast.If) and p.test is cur) or (isinstance(p, ast.If) and _within(node, p.test, par)):
            return "if", p
        cur = p
    return "other", None


def _residual_none_before(fwd: ast.AST, loop: ast.For) -> int | None:
    for n in ast.walk(fwd):
        if (
            isinstance(n, ast.Assign)
            and n.lineno < loop.lineno
            and isinstance(n.value, ast.Constant)
            and n.value.value is None
            and any(isinstance(t, ast.Name) and t.id == "residual" for t in n.targets)
        ):
            return n.lineno
    return None


def _boundary(
    src: Source,
    rel: str,
    fwd: _FnDef,
    loop: ast.For,
    tests: Sequence[tuple[Any, Any]],
    par: Mapping[ast.AST, ast.AST],
    ev: list[Evidence],
) -> str:
    loops = [x for x in ast.walk(fwd) if isinstance(x, ast.For) and _loop_var(x)]
    after = sorted(
        [
            (n, m)
            for n, m in tests
            if n.lineno > (loop.end_lineno or loop.lineno)
            and m[0] == "index"
            and not any(_within(n, lp, par) for lp in loops)
        ],
        key=lambda t: t[0].lineno,
    )
    if not after:
        ev.append(
            Evidence(
                "boundary",
                rel,
                loop.lineno,
                "none: no test of layers_to_capture after the layer loop (index N never fires)",
            )
        )
        return "none"
    node = after[0][0]
    text = src.line(rel, node.lineno)
    site = _site(node, None, par)
    if site[0] == "keyword":
        call = par.get(site[1])
        callee = (
            call.func.attr
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            else (call.func.id if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) else "")
        )
        if "norm" in callee:
            got = _chase_norm_capture(src, callee, site[1].arg)
            if got:
                kind, e = got
                ev.append(Evidence("boundary", rel, node.lineno, f"{kind} (captured inside {callee}): {text}"))
                ev.append(e)
                return kind
    if site[0] == "if":
        apps = [_resolved_arg(a, site[1]) for a in _appends(site[1])]
        norm_line = _norm_line(fwd, node.lineno)
        # the residual stream itself (hidden_states + residual), taken before any final norm
        if apps and norm_line is None and all(_adds_residual(a) for a in apps):
            ev.append(Evidence("boundary", rel, node.lineno, f"final-prenorm (no final norm before it): {text}"))
            return "final-prenorm"
    ev.append(Evidence("boundary", rel, node.lineno, f"unknown: {text}"))
    return UNKNOWN


def _norm_line(fwd: ast.AST, before: int) -> int | None:
    for n in ast.walk(fwd):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "norm"
            and n.lineno < before
        ):
            return n.lineno
    return None


def _missing(src: Source, rel: str, fwd: _FnDef, ev: list[Evidence]) -> str:
    for n in ast.walk(fwd):
        if isinstance(n, ast.Call):
            name = (
                n.func.id
                if isinstance(n.func, ast.Name)
                else (n.func.attr if isinstance(n.func, ast.Attribute) else "")
            )
            base = n.func.value.id if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) else ""
            if "AuxHiddenStatePacker" in (name, base):
                raise_ev = _packer_raise(src)
                if raise_ev:
                    ev.append(Evidence("missing", rel, n.lineno, "fatal: " + src.line(rel, n.lineno)))
                    ev.append(raise_ev)
                    return "fatal"
                ev.append(Evidence("missing", rel, n.lineno, "unknown: packer without a recognised finalize check"))
                return UNKNOWN
    ev.append(
        Evidence(
            "missing", rel, fwd.lineno, "dropped: the aux states are a list; one that never fires is simply absent"
        )
    )
    return "dropped"


def _packer_raise(src: Source) -> Evidence | None:
    for rel in ("sglang/srt/layers/aux_hidden_states.py",):
        t = src.tree(rel)
        for c in t.body if t else []:
            if isinstance(c, ast.ClassDef) and c.name == "AuxHiddenStatePacker":
                for f in c.body:
                    if isinstance(f, ast.FunctionDef) and f.name == "finalize":
                        for n in ast.walk(f):
                            if isinstance(n, (ast.Raise, ast.Assert)):  # RuntimeError, or AssertionError
                                return Evidence("missing", rel, n.lineno, src.line(rel, n.lineno))
    return None


# -- following a capture handed into a layer ---------------------------------------------------------
def _function_index(src: Source, files: Sequence[str]) -> dict[str, list[tuple[str, _FnDef]]]:
    """name -> [(file, FunctionDef)] over ``files`` (one walk per file, kept per installation)."""
    key = ("fnindex", tuple(files))
    if key not in src.memo:
        idx: dict[str, list[tuple[str, _FnDef]]] = {}
        for f in files:
            t = src.tree(f)
            for n in statements(t) if t else ():
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    idx.setdefault(n.name, []).append((f, n))
        src.memo[key] = idx
    found: dict[str, list[tuple[str, _FnDef]]] = src.memo[key]
    return found


def _takes(fn: _FnDef, param: str | None, kwargs_ok: bool = False) -> bool:
    return param in [a.arg for a in fn.args.args + fn.args.kwonlyargs] or (kwargs_ok and fn.args.kwarg is not None)


def _functions_with_param(
    src: Source, files: list[str], param: str | None, name: str | None = None, kwargs_ok: bool = False
) -> list[tuple[str, _FnDef]]:
    if name is not None and len(files) > 1:  # parse only the files that define ``name``
        files = [f for f in files if _text(src, f).find(f"def {name}(") >= 0]
    idx = _function_index(src, files)
    pool = idx.get(name, []) if name is not None else [x for v in idx.values() for x in v]
    return [(f, n) for f, n in pool if _takes(n, param, kwargs_ok)]


def _forwarded(fn: ast.AST, param: str | None) -> Iterator[tuple[str, str, int]]:
    """Calls in ``fn`` that pass ``param`` on: (callee name, keyword name)."""
    for n in ast.walk(fn):
        if isinstance(n, ast.Call):
            for kw in n.keywords:
                if isinstance(kw.value, ast.Name) and kw.value.id == param and kw.arg:
                    name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                    yield name, kw.arg, n.lineno


def _chase(src: Source, rel: str, param: str | None) -> tuple[str, Evidence] | None:
    """Index 0 of an in-layer capture: the input stage that handles the first layer's missing residual."""
    layer_fns = [(f, n) for f, n in _functions_with_param(src, [rel], param) if any(True for _ in _forwarded(n, param))]
    layer_files = _layer_files(src)
    for _f, fn in layer_fns:
        for callee, kw, _line in _forwarded(fn, param):
            if "prepare" not in callee:
                continue
            for cf, cfn in _functions_with_param(src, [*layer_files, rel], kw, callee, kwargs_ok=True):
                hit = _residual_none(src, cf, cfn, kw)
                if hit:
                    return "embed", Evidence(
                        "index0", cf, hit, "embed (the input stage handles residual None): " + src.line(cf, hit)
                    )
    return None


def _text(src: Source, rel: str) -> str:
    key = ("text", rel)
    if key not in src.memo:
        try:
            src.memo[key] = (src.root / rel).read_text(encoding="utf-8")
        except OSError:
            src.memo[key] = ""
    text: str = src.memo[key]
    return text


def _layer_files(src: Source) -> list[str]:
    if "layer_files" not in src.memo:
        src.memo["layer_files"] = list(src.files("sglang/srt/layers"))
    files: list[str] = src.memo["layer_files"]
    return files


def _residual_none(src: Source, f: str, fn: _FnDef, param: str) -> int | None:
    """A ``residual is None`` test in ``fn`` or in a method/function it calls (one level)."""
    for n in ast.walk(fn):
        if _guarded(n) and isinstance(n, ast.Compare):
            return n.lineno
    called = {
        c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
        for c in ast.walk(fn)
        if isinstance(c, ast.Call)
    }
    # methods picked by reference (``method = self._prepare_attention if ... else ...; method(...)``)
    called |= {
        a.attr
        for a in ast.walk(fn)
        if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "self"
    }
    for name in sorted(called):
        for _f, n in _function_index(src, [f]).get(name, []):
            if n is fn:
                continue
            # the capture itself, or the input preparation whose residual it captures
            if not (_takes(n, param) or _takes(n, "residual")):
                continue
            for x in ast.walk(n):
                if isinstance(x, ast.Compare) and _guarded(x):
                    return x.lineno
    return None


def _chase_norm_capture(src: Source, callee: str, param: str | None) -> tuple[str, Evidence] | None:
    """The final norm's capture: ``capture(residual)`` (the pre-norm stream)."""
    files = _layer_files(src)
    for f, fn in _functions_with_param(src, files, param, callee):
        todo = [(f, fn)]
        names = {callee}
        for _fn_f, fn_n in list(todo):
            for c in ast.walk(fn_n):
                if isinstance(c, ast.Call):
                    nm = c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
                    if any(kw.arg == param for kw in c.keywords) or any(
                        isinstance(a, ast.Name) and a.id == param for a in c.args
                    ):
                        names.add(nm)
        for g, gfn in [x for nm in sorted(names) for x in _functions_with_param(src, files, param, nm)]:
            for c in ast.walk(gfn):
                if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == param and c.args:
                    arg = c.args[0]
                    if isinstance(arg, ast.Name) and arg.id == "residual":
                        return "final-prenorm", Evidence("boundary", g, c.lineno, src.line(g, c.lineno))
    return None


# -- the runner: CUDA-graph order, where the ids come from --------------------------------------------
RUNNER_DIRS = ("sglang/srt/model_executor", "sglang/srt/speculative")


def _calls(src: Source, under: str, name: str) -> Iterator[tuple[str, ast.Call, _FnDef | None, ast.ClassDef | None]]:
    for f in src.files(under):
        t = src.tree(f)
        if t is None:
            continue
        par = None
        for n in ast.walk(t):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name:
                if par is None:
                    par = _parents(t)
                yield (
                    f,
                    n,
                    _enclosing(n, par, (ast.FunctionDef, ast.AsyncFunctionDef)),
                    _enclosing(n, par, ast.ClassDef),
                )


def graph_order(src: Source) -> dict[str, Any]:
    key = ("graph_order",)
    if key not in src.memo:
        src.memo[key] = _graph_order(src)
    order: dict[str, Any] = src.memo[key]
    return order


def _graph_order(src: Source) -> dict[str, Any]:
    ev: list[Evidence] = []
    reset = None
    config_line = None
    for f, call, fn, cls in _calls(src, "sglang/srt/model_executor", HOOK):
        if not call.args and not call.keywords:
            if (
                cls is not None
                and "GraphRunner" in cls.name
                and "Piecewise" not in cls.name
                and fn is not None
                and fn.name == "__init__"
            ):
                reset = True
                ev.append(Evidence("graph_reset", f, call.lineno, f"{cls.name}.__init__: {src.line(f, call.lineno)}"))
        elif config_line is None:
            config_line = (f, call, fn)
    if reset is None:
        graph_files = sorted(
            (f for f in src.files("sglang/srt/model_executor") if "cuda_graph_runner" in f),
            key=lambda f: (not f.endswith("/cuda_graph_runner.py"), f),
        )
        if graph_files:
            reset = False
            ev.append(
                Evidence("graph_reset", graph_files[0], 1, f"no {HOOK}() without ids in any graph runner's __init__")
            )
        else:
            ev.append(Evidence("graph_reset", "sglang/srt/model_executor", 0, "unknown: no cuda_graph_runner found"))
    before = None
    if config_line is not None:
        f, call, fn = config_line
        ev.append(Evidence("config_ids", f, call.lineno, src.line(f, call.lineno)))
        if reset and fn is not None:
            graphs = [
                n
                for n in ast.walk(fn)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("init_device_graphs", "init_cuda_graphs")
            ]
            if graphs:
                before = call.lineno < min(g.lineno for g in graphs)
                g = min(graphs, key=lambda g: g.lineno)
                ev.append(
                    Evidence(
                        "config_before_graphs",
                        f,
                        g.lineno,
                        f"{'after' if before else 'before'} the config ids (line {call.lineno}): "
                        + src.line(f, g.lineno),
                    )
                )
            else:
                ev.append(
                    Evidence(
                        "config_before_graphs",
                        f,
                        call.lineno,
                        f"unknown: {fn.name} applies the ids but does not itself initialise the graphs",
                    )
                )
    return {"graph_reset": reset, "config_before_graphs": before, "evidence": ev}


def id_sources(src: Source) -> dict[str, Any]:
    """Where the capture ids come from: ``eagle_config["eagle_aux_hidden_state_layer_ids"]`` assignments."""
    keys: list[str] = []
    ev: list[Evidence] = []
    for f in src.files("sglang/srt/model_executor"):
        t = src.tree(f)
        for n in ast.walk(t) if t else ():
            if isinstance(n, ast.Assign) and any(
                (isinstance(x, ast.Name) and x.id == "eagle_aux_hidden_state_layer_ids")
                or (isinstance(x, ast.Attribute) and x.attr == "eagle_aux_hidden_state_layer_ids")
                for x in n.targets
            ):
                v = n.value
                if isinstance(v, ast.Subscript) and isinstance(v.slice, ast.Constant):
                    base = v.value.id if isinstance(v.value, ast.Name) else getattr(v.value, "attr", "?")
                    key = f"{base}.{v.slice.value!s}"
                    if key not in keys:
                        keys.append(key)
                        ev.append(Evidence("id_source", f, n.lineno, src.line(f, n.lineno)))
    if not keys:
        ev.append(Evidence("id_source", "sglang/srt/model_executor", 0, "unknown: no recognised read of the ids"))
    return {"keys": keys, "evidence": ev}
