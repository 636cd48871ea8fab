"""Run a release's own capture hook (SGLang's ``set_eagle3_layers_to_capture``, vLLM's
``set_aux_hidden_state_layers`` and its default getters) on a stub model, without importing the engine.

The method's source is compiled alone (annotations and decorators dropped: they name torch types)
under its own file name, so tracebacks point at the release's lines. ``self`` is a ``Stub``: any
attribute is another stub (``self.pp_group.is_last_rank`` is truthy), ``num_hidden_layers`` anywhere
is N, ``layers`` is a list of N stubs (so ``self.layers[N]`` raises IndexError as a real ModuleList
does), and attributes that ``__init__`` builds from a class with its own hook (``self.model``,
``self.language_model``) carry that class's compiled hook. Every attribute write is recorded.
"""

from __future__ import annotations

import ast
import builtins
import copy
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.engine.source import Source

HOOK = "set_eagle3_layers_to_capture"
VLLM_HOOK = "set_aux_hidden_state_layers"
# the attribute each engine's capture loop tests
CAPTURE_ATTRS = ("layers_to_capture", "aux_hidden_state_layers")


class _AnyMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return True  # ``assert isinstance(holder, EagleModelMixin)``: the stub is whatever is asked


class _Anything(metaclass=_AnyMeta):
    """A class the hook names (a mixin, a protocol): every stub is an instance of it."""


class Stub:
    _path: str
    _run: Run
    _cls: str | None

    def __init__(self, path: str, run: Run, cls: str | None = None) -> None:
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_run", run)
        object.__setattr__(self, "_cls", cls)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        run = object.__getattribute__(self, "_run")
        if name == "num_hidden_layers":
            return run.n
        value: list[Stub] | Stub
        if name == "layers":
            value = [Stub(f"{self._path}.layers[{i}]", run) for i in range(run.n)]
        else:
            value = Stub(f"{self._path}.{name}", run)
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        self._run.writes.append((self._path, name, _copy(value)))
        object.__setattr__(self, name, value)

    def __call__(self, *args: Any, **kwargs: Any) -> Stub:
        self._run.calls.append((self._path, args, kwargs))
        return Stub(self._path + "()", self._run)

    def __getitem__(self, key: object) -> Stub:
        return Stub(f"{self._path}[{key!r}]", self._run)

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __repr__(self) -> str:
        return f"<stub {self._path}>"


def _copy(v: Any) -> Any:
    try:
        return copy.deepcopy(v) if isinstance(v, (list, tuple, dict)) else v
    except Exception:
        return v


@dataclass
class Run:
    n: int
    writes: list[tuple[str, str, Any]] = field(default_factory=list)  # (stub path, attribute, value)
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)


@dataclass
class Outcome:
    indices: list[Any] | None  # the last ``layers_to_capture`` written
    where: str | None  # the stub path it was written on ("self.model")
    error: str | None = None  # "IndexError: ..." raised by the hook
    error_line: tuple[str, int] | None = None  # (file, line) of the raising statement
    capture_flag: bool = False  # capture_aux_hidden_states = True was written
    returned: Any = None  # what the method returned (a default getter's indices)
    writes: list[tuple[str, str, Any]] = field(default_factory=list)  # every attribute the hook wrote


def compile_hook(
    src_text_tree: ast.FunctionDef | ast.AsyncFunctionDef, filename: str, module_tree: ast.Module | None = None
) -> Callable[..., Any]:
    """The hook as a plain function, compiled under ``filename`` with its original line numbers."""
    fn = copy.deepcopy(src_text_tree)
    fn.decorator_list = []
    fn.returns = None
    for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs:
        a.annotation = None
    for va in (fn.args.vararg, fn.args.kwarg):
        if va is not None:
            va.annotation = None
    for node in ast.walk(fn):  # annotated assignments would evaluate torch types
        if isinstance(node, ast.AnnAssign):
            node.annotation = ast.Constant(None)
    mod = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(mod)
    code = compile(mod, filename, "exec")
    names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    glb: dict[str, Any] = {"__builtins__": builtins, "__name__": "wb_engine_stub"}
    for name in names:
        if not hasattr(builtins, name):
            # module globals the hook names: a class (a mixin it asserts) or anything else (a logger, a helper)
            glb[name] = type(name, (_Anything,), {}) if name[:1].isupper() else Stub(name, Run(0))
    exec(code, glb)
    hook: Callable[..., Any] = glb[fn.name]
    return hook


def build(
    source: Source, rel: str, cls: ast.ClassDef, path: str, run: Run, depth: int = 0, hook_name: str = HOOK
) -> Stub:
    """A stub instance of ``cls``: its hook, and the hooks of the parts ``__init__`` builds."""
    s = Stub(path, run, cls.name)
    found = source.find_method(rel, cls, hook_name)
    if found is not None:
        f, _c, node = found
        key = ("hook", f, node.lineno)
        if key not in source.memo:
            source.memo[key] = compile_hook(node, f)
        object.__setattr__(s, hook_name, types.MethodType(source.memo[key], s))
    if depth < 3:
        for attr, (f, c, _line) in source.attr_classes(rel, cls).items():
            if source.find_method(f, c, hook_name) is not None:
                object.__setattr__(s, attr, build(source, f, c, f"{path}.{attr}", run, depth + 1, hook_name))
    return s


def run_hook(
    source: Source,
    rel: str,
    cls: ast.ClassDef,
    ids: Sequence[int] | None,
    n: int,
    hook_name: str = HOOK,
    as_tuple: bool = False,
) -> Outcome:
    """Call the class's ``hook_name`` with ``ids`` (a list, or a tuple as vLLM passes them; None: no
    argument) on a stub with ``n`` layers, and report the indices it writes or hands to a part."""
    run = Run(n)
    s = build(source, rel, cls, "self", run, hook_name=hook_name)
    hook = getattr(s, hook_name, None)
    if not isinstance(hook, types.MethodType):
        return Outcome(None, None, error="no hook")
    err = None
    err_line = None
    returned = None
    try:
        returned = hook() if ids is None else hook(tuple(ids) if as_tuple else list(ids))
    except Exception as exc:  # the release's own code raised: that is the finding
        err = f"{type(exc).__name__}: {exc}"
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None:
            err_line = (tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        del tb  # the traceback holds this frame: kept, the two (and the whole Source) wait for the collector
    writes = [(p, v) for p, name, v in run.writes if name in CAPTURE_ATTRS]
    flag = any(name == "capture_aux_hidden_states" and v is True for _p, name, v in run.writes)
    ret = list(returned) if isinstance(returned, (list, tuple)) else None
    if writes:
        p, v = writes[-1]
        idx = list(v) if isinstance(v, (list, tuple)) else None
        return Outcome(idx, p, err, err_line, flag, ret, run.writes)
    # the indices handed to the hook of a part whose class was not resolved (``self.model``), or to
    # vLLM's holder (``holder._set_aux_hidden_state_layers(layers)``)
    names = (hook_name, "_" + hook_name)
    handed = [
        (p, a)
        for p, a, _k in run.calls
        if p.rsplit(".", 1)[-1] in names and len(a) == 1 and isinstance(a[0], (list, tuple))
    ]
    if handed:
        p, a = handed[-1]
        return Outcome(list(a[0]), p.rsplit(".", 1)[0], err, err_line, flag, ret, run.writes)
    return Outcome(None, None, err, err_line, flag, ret, run.writes)
