"""The extractor for vLLM: what a release does with an EAGLE-3 drafter, read from its own source.

Per target class its registry lists (``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS``) whose class
has or inherits ``set_aux_hidden_state_layers``:

- the setter is *executed* on a stub for probe ids (the ids reach the capture loop as they are, or
  the mapping is ``unknown``); the default getter the runner calls is executed for several layer
  counts and fitted to expressions of N;
- the capturing model's ``forward`` (the part that holds ``aux_hidden_state_layers``) is read from its
  ``ast``: whether the capture sits before layer i (index i = the stream entering layer i) or after it
  (index i+1), what index 0 and index N capture, and whether the captured value handles the first
  layer's missing residual.

Release-wide, from the runner and config code (each settled by executing the release's function on
stubs where one exists): which draft-config keys give the ids (``config_ids``/``id_source``), how
``EAGLEConfig`` renames a draft's architecture (``arch_map``), what a speculators-format config becomes
(``speculators``), what a draft shorter than the target is served with (``draft_len``).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import CodeType, SimpleNamespace
from typing import Any, Optional

from workbench.engine.drafts import draft_class
from workbench.engine.registry import VLLM_MODELS, vllm_registry
from workbench.engine.release import DraftClass, Release
from workbench.engine.rule import UNKNOWN, CaptureRule, Evidence
from workbench.engine.source import Source
from workbench.engine.stub import VLLM_HOOK, run_hook

RUNNER = "vllm/v1/worker/gpu_model_runner.py"
EAGLE_CFG = "vllm/transformers_utils/configs/eagle.py"
SPEC_ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
SPEC_CONFIGS = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")
INTERFACES = f"{VLLM_MODELS}/interfaces.py"
GETTERS = ("get_eagle3_default_aux_hidden_state_layers", "get_eagle3_aux_hidden_state_layers")
PROBE_LAYERS = (16, 32, 61, 80)
_PROBE_IDS = ((1, 5, 9), (0, 7, 12), (3, 2, 11, 4))
TOP = "eagle_aux_hidden_state_layer_ids"
NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"
ID_ORDERS = {
    "top-level": (TOP,),
    "eagle_config": (NESTED,),
    "top-level-then-eagle_config": (TOP, NESTED),
    "eagle_config-then-top-level": (NESTED, TOP),
    "ignored": (),
}


def read_release(src: Source, version: str | None = None, archs: Sequence[str] | None = None) -> Release:
    """Every part of one vLLM release (an installed ``vllm`` folder or one unpacked from its wheel)."""
    version = version or src.version() or UNKNOWN
    common_ev: list[Evidence] = []
    order = _config_ids(src, common_ev)
    graph = _graph(src, common_ev)
    getter = _runner_getter(src)
    targets, drafts, reg_ev = vllm_registry(src)
    rules = []
    for arch, (f, clsname, _line) in sorted(targets.items()):
        if archs is not None and arch not in archs:
            continue
        r = class_rule(src, arch, f, clsname, version, getter, targets)
        if r is not None:
            rules.append(
                replace(
                    r,
                    graph_reset=graph,
                    config_before_graphs=None,
                    id_source=id_keys(order),
                    config_ids="ignored" if order == "ignored" else "read" if order != UNKNOWN else UNKNOWN,
                    evidence=r.evidence + tuple(common_ev),
                )
            )
    dcls: dict[str, DraftClass] = {}
    for arch, (f, clsname, _line) in sorted(drafts.items()):
        if "eagle3" not in arch.lower() and "eagle3" not in f:
            continue
        d = draft_class(src, clsname, f)
        if d is not None:
            dcls[arch] = DraftClass(arch, d.file, d.reads, d.fc_states, d.evidence)
    registry = {a: f"{f}:{line}" for a, (f, _c, line) in targets.items()}
    registry.update({a: f"{f}:{line}" for a, (f, _c, line) in drafts.items()})
    facts: dict[str, Any] = {"config_ids": order}
    ev = list(reg_ev)
    facts["arch_map"] = _arch_map(src, ev)
    facts["speculators"] = _speculators(src, ev)
    facts["draft_len"] = _draft_len(src, ev)
    return Release("vllm", version, "wheel", tuple(rules), registry, dcls, facts, tuple(ev), str(src.root))


# -- one target class ----------------------------------------------------------------------------------
def class_rule(
    src: Source,
    arch: str,
    rel: str,
    clsname: str,
    version: str,
    getter: str | None,
    targets: dict[str, tuple[str, str, int]] | None = None,
) -> CaptureRule | None:
    found = src.find_class(rel, clsname)
    if found is None:
        return None
    f, cls = found
    setter = src.find_method(f, cls, VLLM_HOOK)
    if setter is None:
        return None
    sf, scls, snode = setter
    ev = [Evidence("hook", sf, snode.lineno, f"{scls.name}.{VLLM_HOOK}")]
    id_map, where = _fit_setter(src, f, cls, sf, snode, ev)
    default = _fit_default(src, f, cls, getter, ev)
    rule = CaptureRule("vllm", version, arch, rel, id_map=id_map, default=default, membership="index")
    holder = _holder(src, f, cls, where, targets or {})
    if holder is None:
        ev.append(
            Evidence(
                "forward", sf, snode.lineno, f"unknown: the model that holds the layers ({where}) was not resolved"
            )
        )
        return replace(rule, membership=UNKNOWN, evidence=tuple(ev))
    hf, hcls = holder
    # the forward that runs: the first along the MRO, or the one it hands over to (``super().forward``)
    fwds = [
        (mf, node)
        for mf, mc in src.mro(hf, hcls)
        for node in mc.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "forward"
    ]
    if not fwds:
        ev.append(Evidence("forward", hf, hcls.lineno, f"unknown: {hcls.name} has no forward"))
        return replace(rule, membership=UNKNOWN, evidence=tuple(ev))
    for k, (mf, node) in enumerate(fwds):
        delegates = any(isinstance(n, ast.Call) and ast.unparse(n.func) == "super().forward" for n in ast.walk(node))
        if delegates and k + 1 < len(fwds) and not _capture_loops(node):
            ev.append(Evidence("forward", mf, node.lineno, "hands over to the base class: super().forward(...)"))
            continue
        parts = classify_forward(src, mf, node, ev)
        return replace(
            rule,
            membership=parts["membership"],
            index0=parts["index0"],
            boundary=parts["boundary"],
            missing=parts["missing"],
            evidence=tuple(ev),
        )
    return replace(rule, membership=UNKNOWN, evidence=tuple(ev))


def _fit_setter(
    src: Source, f: str, cls: ast.ClassDef, sf: str, snode: ast.AST, ev: list[Evidence]
) -> tuple[str, str | None]:
    where = None
    for ids in _PROBE_IDS:
        o = run_hook(src, f, cls, ids, 32, hook_name=VLLM_HOOK, as_tuple=True)
        if o.error or o.indices is None or list(o.indices) != list(ids):
            why = o.error or f"wrote {o.indices}"
            ev.append(Evidence("id_map", sf, getattr(snode, "lineno", 0), f"unknown: setter with {ids}: {why}"))
            return UNKNOWN, where
        where = o.where
    line = getattr(snode, "lineno", 0)
    ev.append(
        Evidence(
            "id_map",
            sf,
            line,
            f"as-is: the ids are stored as the capture indices ({where}): "
            + (src.line(sf, line + 1) or src.line(sf, line)),
        )
    )
    return "as-is", where


def _fit_default(
    src: Source, f: str, cls: ast.ClassDef, getter: str | None, ev: list[Evidence]
) -> tuple[str, ...] | None:
    names = (getter,) if getter else GETTERS
    for name in names:
        m = src.find_method(f, cls, name)
        if m is None:
            continue
        outs: dict[int, list[Any] | None] = {}
        for n in PROBE_LAYERS:
            o = run_hook(src, f, cls, None, n, hook_name=name)
            outs[n] = o.returned if not o.error else None
        from workbench.engine.extract import _fit_default as fit

        exprs = fit(outs)
        ret = next((x for x in ast.walk(m[2]) if isinstance(x, ast.Return)), m[2])
        ev.append(
            Evidence(
                "default",
                m[0],
                ret.lineno,
                (f"[{', '.join(exprs)}]: " if exprs else "unknown: ") + src.line(m[0], ret.lineno),
            )
        )
        return exprs
    ev.append(Evidence("default", f, cls.lineno, f"unknown: no {' or '.join(names)} on {cls.name}"))
    return None


def _registered_part(
    src: Source, f: str, cls: ast.ClassDef, attr: str, targets: dict[str, tuple[str, str, int]]
) -> tuple[str, ast.ClassDef] | None:
    """``self.<attr> = init_vllm_registered_model(..., architectures=["X"])``: the registry's class X."""
    for _mf, mc in src.mro(f, cls):
        init = next((n for n in mc.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
        for node in ast.walk(init) if init else ():
            if not (
                isinstance(node, ast.Assign)
                and any(ast.unparse(t) == f"self.{attr}" for t in node.targets)
                and isinstance(node.value, ast.Call)
            ):
                continue
            for kw in node.value.keywords:
                if kw.arg == "architectures" and isinstance(kw.value, ast.List) and kw.value.elts:
                    first = kw.value.elts[0]
                    if isinstance(first, ast.Constant) and first.value in targets:
                        tf, tcls, _line = targets[first.value]
                        return src.find_class(tf, tcls)
    return None


def _holder(
    src: Source, f: str, cls: ast.ClassDef, where: str | None, targets: dict[str, tuple[str, str, int]]
) -> tuple[str, ast.ClassDef] | None:
    """The class whose forward runs the capture loop: the part the setter stored the ids on."""
    path = (where or "self.model").split(".")[1:]
    cur_f, cur = f, cls
    for part in path:
        if part in ("get_language_model()", "language_model"):
            got = src.attr_classes(cur_f, cur).get("language_model")
            if got is not None:
                cur_f, cur = got[0], got[1]
                continue
            reg = _registered_part(src, cur_f, cur, "language_model", targets)
            if reg is not None:
                cur_f, cur = reg
                continue
            if part == "language_model" or src.find_method(cur_f, cur, "get_language_model") is not None:
                return None  # built from the checkpoint's text config: read per config, not here
            continue  # a text model: hasattr(self, "get_language_model") is false there
        got = src.attr_classes(cur_f, cur).get(part)
        if got is None:
            return None
        cur_f, cur = got[0], got[1]
    # the class reached is itself a causal-LM wrapper (the ids handed to its own setter): its ``model``
    if (cur_f, cur.name) == (f, cls.name) or src.find_method(cur_f, cur, VLLM_HOOK) is not None:
        got = src.attr_classes(cur_f, cur).get("model")
        return (got[0], got[1]) if got else None
    return cur_f, cur


# -- the capturing forward -----------------------------------------------------------------------------
def _capture_index(stmt: ast.AST) -> tuple[ast.expr, ast.AST] | None:
    """(index expression, the capture node) of a capture statement."""
    for n in ast.walk(stmt):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "_maybe_add_hidden_state"
            and len(n.args) >= 2
        ):
            return n.args[1], n
        if (
            isinstance(n, ast.Compare)
            and len(n.ops) == 1
            and isinstance(n.ops[0], ast.In)
            and "aux_hidden_state_layers" in ast.unparse(n.comparators[0])
        ):
            return n.left, stmt
    return None


def _is_layer_call(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and ("layer" in ast.unparse(stmt.value.func).rsplit(".", 1)[-1])
    )


def _guarded_value(src: Source, rel: str, node: ast.AST) -> bool:
    """Whether the captured value handles a None residual (``... if residual is not None else ...``, or
    adds none: ``append(hidden_states)``)."""
    from workbench.engine.extract import _guarded

    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "_maybe_add_hidden_state"
    ):
        for g in (rel, INTERFACES):
            t = src.tree(g)
            for fn in ast.walk(t) if t else ():
                if isinstance(fn, ast.FunctionDef) and fn.name == "_maybe_add_hidden_state":
                    return _guarded(fn)
        return False
    appends = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append"
        for n in ast.walk(node)
    )
    if appends and not any(isinstance(x, ast.Name) and x.id == "residual" for x in ast.walk(node)):
        return True  # ``aux_hidden_states.append(hidden_states)``: the capture adds no residual, none can be None
    return _guarded(node)


def _capture_loops(fwd: ast.AST) -> bool:
    return any(isinstance(n, ast.For) and any(_capture_index(st) for st in n.body) for n in ast.walk(fwd))


def classify_forward(
    src: Source, rel: str, fwd: ast.FunctionDef | ast.AsyncFunctionDef, ev: list[Evidence]
) -> dict[str, str]:
    from workbench.engine.extract import _loop_var

    out = {"membership": "index", "index0": UNKNOWN, "boundary": UNKNOWN, "missing": "dropped"}
    loops = [n for n in ast.walk(fwd) if isinstance(n, ast.For) and _loop_var(n)]
    for loop in loops:
        var = _loop_var(loop)
        layer_at = next((i for i, st in enumerate(loop.body) if _is_layer_call(st)), None)
        caps = [(i, st, c) for i, st in enumerate(loop.body) if (c := _capture_index(st)) is not None]
        if layer_at is None or len(caps) != 1:
            continue
        i, st, (idx, node) = caps[0]
        before = i < layer_at
        text = ast.unparse(idx).replace(" ", "")
        where = "before the layer" if before else "after the layer"
        ev.append(Evidence("loop", rel, st.lineno, f"{where}, index {text}: {src.line(rel, st.lineno)}"))
        pre = [c for s in fwd.body if s.lineno < loop.lineno for c in [_capture_index(s)] if c is not None]
        post = [
            c
            for s in fwd.body
            if s.lineno > (loop.end_lineno or loop.lineno)
            for c in [_capture_index(s)]
            if c is not None
        ]
        if before and text == var:
            g = _guarded_value(src, rel, node)
            out["index0"] = "embed" if g else "type-error"
            ev.append(
                Evidence(
                    "index0",
                    rel,
                    st.lineno,
                    (
                        "embed (the captured value handles residual None)"
                        if g
                        else "type-error (hidden_states + residual, residual None at layer 0)"
                    )
                    + f": {src.line(rel, st.lineno)}",
                )
            )
            if not post:
                out["boundary"] = "none"
                ev.append(
                    Evidence(
                        "boundary",
                        rel,
                        loop.end_lineno or loop.lineno,
                        "none: no capture after the layer loop (index N never fires)",
                    )
                )
            else:
                pidx, pnode = post[0]
                ln = getattr(pnode, "lineno", loop.lineno)
                # ``self.end_layer in ...`` after the loop: the stream leaving the last layer, before the norm
                if "end_layer" in ast.unparse(pidx):
                    out["boundary"] = "final-prenorm"
                    ev.append(
                        Evidence(
                            "boundary",
                            rel,
                            ln,
                            "final-prenorm (after the loop, before the final norm): " + src.line(rel, ln),
                        )
                    )
                else:
                    out["boundary"] = UNKNOWN
                    ev.append(
                        Evidence("boundary", rel, ln, "unknown: a capture after the layer loop: " + src.line(rel, ln))
                    )
        elif not before and text == f"{var}+1":
            out["boundary"] = "final-prenorm"
            ev.append(
                Evidence(
                    "boundary",
                    rel,
                    st.lineno,
                    "final-prenorm: index N fires after the last layer, before the final norm",
                )
            )
            if pre:
                pidx, pnode = pre[0]
                g = _guarded_value(src, rel, pnode)
                out["index0"] = "embed" if g else "type-error"
                ln = getattr(pnode, "lineno", loop.lineno)
                ev.append(Evidence("index0", rel, ln, ("embed: " if g else "type-error: ") + src.line(rel, ln)))
            else:
                out["index0"] = "none"
                ev.append(
                    Evidence("index0", rel, loop.lineno, "none: index 0 is never tested (no capture before the loop)")
                )
        else:
            ev.append(Evidence("loop", rel, st.lineno, f"unknown capture index {text}"))
            return {**out, "membership": UNKNOWN}
        ev.append(
            Evidence(
                "missing", rel, fwd.lineno, "dropped: the aux states are a list; one that never fires is simply absent"
            )
        )
        return out
    ev.append(Evidence("forward", rel, fwd.lineno, "unknown: no layer loop with one recognised capture"))
    return {**out, "membership": UNKNOWN, "missing": UNKNOWN}


# -- release-wide: the runner and the config code -------------------------------------------------------------
def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    out: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, node)
    return out


def _exec_function(fn: ast.FunctionDef, filename: str, extra: dict[str, Any] | None = None) -> Callable[..., Any]:
    """Compile one function of the engine's source on its own (decorators and annotations dropped)."""
    kw: dict[str, Any] = {"type_params": []} if sys.version_info >= (3, 12) else {}
    fn = ast.FunctionDef(
        name=fn.name, args=fn.args, body=fn.body, decorator_list=[], returns=None, type_comment=None, **kw
    )
    for a in fn.args.args + fn.args.kwonlyargs:
        a.annotation = None
    mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
    ns: dict[str, Any] = {
        "Optional": Optional,
        "logger": SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None, debug=lambda *a, **k: None),
    }
    ns.update(extra or {})
    exec(compile(mod, filename, "exec"), ns)
    compiled: Callable[..., Any] = ns[fn.name]
    return compiled


# draft-config keys a runner may read the ids from (a key none of its code names is never probed)
ID_KEYS = (TOP, NESTED, "eagle_config.layer_ids")
RUNNER_V2 = "vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py"
RUNNER_V2_MAIN = "vllm/v1/worker/gpu/model_runner.py"


def _hf(cfg: dict[str, Any]) -> SimpleNamespace:
    """A draft hf_config stub: top-level keys as attributes, ``eagle_config`` a dict, as PretrainedConfig has them."""
    top: dict[str, Any] = {}
    for key, value in cfg.items():
        head, _, tail = key.partition(".")
        if tail:
            top.setdefault(head, {})[tail] = value
        else:
            top[key] = value
    return SimpleNamespace(**top)


def _readers(src: Source) -> list[tuple[str, str, int, Callable[[dict[str, Any]], Any]]]:
    """(runner, file, line, read(config) -> ids) for each model runner of the release: V1's
    ``GPUModelRunner._get_eagle3_aux_layers_from_config`` and V2's ``get_eagle3_aux_layers_from_config``."""
    out: list[tuple[str, str, int, Callable[[dict[str, Any]], Any]]] = []
    for label, rel, name, wrap in (
        ("V1", RUNNER, "_get_eagle3_aux_layers_from_config", "self"),
        ("V2", RUNNER_V2, "get_eagle3_aux_layers_from_config", "spec_config"),
    ):
        tree = src.tree(rel)
        fn = _functions(tree).get(name) if tree else None
        if fn is None:
            continue
        f = _exec_function(fn, rel)

        def read(cfg: dict[str, Any], f: Callable[..., Any] = f, wrap: str = wrap) -> Any:
            spec = SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=_hf(cfg)))
            arg = SimpleNamespace(speculative_config=spec) if wrap == "self" else spec
            try:
                r = f(arg)
            except Exception:
                return UNKNOWN
            return list(r) if r is not None else None

        out.append((label, rel, fn.lineno, read))
    return out


def _order(read: Callable[[dict[str, Any]], Any]) -> tuple[str, ...] | str:
    """The keys ``read`` takes the ids from as they are, first-read first; UNKNOWN when it raises."""
    got = []
    for i, key in enumerate(ID_KEYS):
        val = [11 + i, 21 + i, 31 + i]
        r = read({key: val})
        if r == UNKNOWN:
            return UNKNOWN
        if r == val:
            got.append(key)
    # precedence: the key whose value wins when two are set
    ordered: list[str] = []
    for key in got:
        pos = len(ordered)
        for j, other in enumerate(ordered):
            r = read({key: [1, 2, 3], other: [4, 5, 6]})
            if r == [1, 2, 3]:
                pos = j
                break
        ordered.insert(pos, key)
    return tuple(ordered)


def _config_ids(src: Source, ev: list[Evidence]) -> str:
    """Which draft-config keys the runner reads the ids from, in order (``ID_ORDERS``' names, or
    ``keys:a,b`` for another set), by executing its reader on stub configs; the V1 runner's where it
    has one (the V2 runner's reading goes in the evidence when it differs)."""
    readers = _readers(src)
    if not readers:
        tree = src.tree(RUNNER)
        call = next(
            (
                n
                for n in (ast.walk(tree) if tree else ())
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == VLLM_HOOK
            ),
            None,
        )
        if call is not None and call.args and "get_eagle3" in ast.unparse(call.args[0]):
            ev.append(
                Evidence(
                    "config_ids",
                    RUNNER,
                    call.lineno,
                    src.line(RUNNER, call.lineno) + "  (no config lookup: the model's defaults)",
                )
            )
            return "ignored"
        ev.append(Evidence("config_ids", RUNNER, 0, "unknown: no recognised read of the ids"))
        return UNKNOWN
    kinds = []
    for label, rel, line, read in readers:
        order = _order(read)
        kind = order if isinstance(order, str) else _kind(order)
        kinds.append(kind)
        ev.append(
            Evidence(
                "config_ids",
                rel,
                line,
                f"{src.line(rel, line)}  ({label} runner, executed on stub configs: reads "
                f"{' then '.join(order) if isinstance(order, tuple) and order else order or 'no key'})",
            )
        )
    return kinds[0]


def id_keys(kind: str) -> tuple[str, ...]:
    """The keys a ``config_ids`` kind reads, in order."""
    if kind.startswith("keys:"):
        return tuple(kind[5:].split(","))
    return ID_ORDERS.get(kind, ())


def _kind(order: tuple[str, ...]) -> str:
    for name, keys in ID_ORDERS.items():
        if keys == order:
            return name
    return "keys:" + ",".join(order)


def _runner_getter(src: Source) -> str | None:
    t = src.tree(RUNNER)
    for n in ast.walk(t) if t else ():
        if isinstance(n, ast.Attribute) and n.attr in GETTERS:
            return n.attr
    return None


def _graph(src: Source, ev: list[Evidence]) -> bool | None:
    """vLLM sets the capture layers once, when the model loads (V1: the runner calls the model's setter;
    V2: ``set_eagle3_aux_hidden_state_layers``): the CUDA graphs captured later use them."""
    for rel, name in ((RUNNER, VLLM_HOOK), (RUNNER_V2_MAIN, "set_eagle3_aux_hidden_state_layers")):
        t = src.tree(rel)
        for n in ast.walk(t) if t else ():
            if isinstance(n, ast.Call) and ast.unparse(n.func).rsplit(".", 1)[-1] == name:
                ev.append(
                    Evidence(
                        "graph_reset",
                        rel,
                        n.lineno,
                        f"the layers are set once at load, before any graph is captured: {src.line(rel, n.lineno)}",
                    )
                )
                return False
    ev.append(Evidence("graph_reset", RUNNER, 0, f"unknown: no {VLLM_HOOK} call in a model runner"))
    return None


def _arch_map(src: Source, ev: list[Evidence]) -> dict[str, Any] | str:
    """How ``EAGLEConfig`` renames a draft's architectures under method eagle3 (the comprehension executed)."""
    tree = src.tree(EAGLE_CFG)
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.If) and "eagle3" in ast.unparse(node.test) and "method" in ast.unparse(node.test):
            comp = next((n for st in node.body for n in ast.walk(st) if isinstance(n, ast.ListComp)), None)
            if comp is None:
                continue
            code = compile(ast.fix_missing_locations(ast.Expression(body=comp)), EAGLE_CFG, "eval")

            def mapped(arch: str, code: CodeType = code) -> object:
                me = SimpleNamespace(model=SimpleNamespace(architectures=[arch]))
                return eval(code, {"self": me, "model": me.model})[0]

            try:
                probes = {a: mapped(a) for a in ("FooForCausalLM", "Eagle3FooForCausalLM", "FooForCausalLMEagle3")}
            except Exception:
                return UNKNOWN
            ev.append(
                Evidence(
                    "arch_map", EAGLE_CFG, comp.lineno, f"{src.line(EAGLE_CFG, comp.lineno)}  (executed: {probes})"
                )
            )
            if probes["FooForCausalLM"] != "Eagle3FooForCausalLM":
                return UNKNOWN
            return {
                "prefix": "Eagle3",
                "keeps_prefixed": probes["Eagle3FooForCausalLM"] == "Eagle3FooForCausalLM",
                "keeps_suffixed": probes["FooForCausalLMEagle3"] == "FooForCausalLMEagle3",
            }
    return UNKNOWN


def _speculators(src: Source, ev: list[Evidence]) -> dict[str, Any] | str | None:
    """The speculators-format eagle3 reader: the architecture a config becomes (by its model_type) and
    the speculators keys it copies into the config the draft class reads."""
    tree = src.tree(SPEC_ALGOS)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any("eagle3" in ast.unparse(d) for d in node.decorator_list):
            copies = sorted(
                {
                    str(n.args[0].value)
                    for n in ast.walk(node)
                    if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "get"
                    and "config_dict" in ast.unparse(n.func.value)
                    and n.args
                    and isinstance(n.args[0], ast.Constant)
                }
                | {
                    str(n.slice.value)
                    for n in ast.walk(node)
                    if isinstance(n, ast.Subscript)
                    and "config_dict" in ast.unparse(n.value)
                    and isinstance(n.slice, ast.Constant)
                }
            )
            for st in ast.walk(node):
                if isinstance(st, ast.Assign) and "architectures" in ast.unparse(st.targets[0]):
                    ev.append(Evidence("speculators", SPEC_ALGOS, st.lineno, src.line(SPEC_ALGOS, st.lineno)))
                    try:
                        val = ast.literal_eval(st.value)
                        archs: Any = val[0] if isinstance(val, list) and val else UNKNOWN
                    except ValueError:
                        archs = _arch_by_model_type(node, st.value)
                    return {"architectures": archs, "copies": copies, "line": node.lineno}
    return UNKNOWN


def _arch_by_model_type(fn: ast.FunctionDef, value: ast.expr) -> dict[str, Any] | str:
    """``[some_map[model_type]]``: the map, a dict literal assigned in the same function."""
    if not (isinstance(value, ast.List) and len(value.elts) == 1 and isinstance(value.elts[0], ast.Subscript)):
        return UNKNOWN
    name = ast.unparse(value.elts[0].value)
    for st in ast.walk(fn):
        if isinstance(st, ast.Assign) and ast.unparse(st.targets[0]) == name and isinstance(st.value, ast.Dict):
            try:
                return dict(ast.literal_eval(st.value))
            except ValueError:
                return UNKNOWN
    return UNKNOWN


def _draft_len(src: Source, ev: list[Evidence]) -> str:
    for rel in SPEC_CONFIGS:
        tree = src.tree(rel)
        fn = _functions(tree).get("_maybe_override_draft_max_model_len") if tree else None
        if fn is None:
            continue
        f = _exec_function(fn, rel)
        try:
            got = f(None, 2048, 131072)
        except Exception:
            return UNKNOWN
        ev.append(
            Evidence(
                "draft_len",
                rel,
                fn.lineno,
                f"{src.line(rel, fn.lineno)}  (executed: draft 2048, target 131072 -> {got})",
            )
        )
        return "min" if got == 2048 else UNKNOWN
    return UNKNOWN
