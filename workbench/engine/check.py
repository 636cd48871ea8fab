"""The truth table: what ``engine capture`` answers against each release's own code, *executed*.

    python -m workbench.engine.check [--engine sglang|vllm|both] [--versions 0.5.14,0.5.23] [--json]

For every release (its wheel, unpacked in the cache), every target class the table has a rule for and
every case of ids (the defaults, each trainer's convention, the embedding, the last layer, the final
boundary, past it, two and four ids, unsorted and repeated ids), the truth is what the release's code
does when run: its capture hook (SGLang's ``set_eagle3_layers_to_capture``, vLLM's setter and default
getter) executed on a stub model, then the capturing model's own ``forward`` executed over stand-in
decoder layers with traced values (``hidden_states + residual`` of layer i is the stream ``out(i)``,
the embedding's residual is None as the code makes it), through the release's own aux collectors
(``AuxHiddenStateList``, ``AuxHiddenStatePacker``, ``_maybe_add_hidden_state``) compiled from its
source. What the forward returns (or raises) is compared with ``engine.capture(..., source="table")``.

The one part that is not the release's code: the decoder layers are stand-ins. One handed an in-layer
capture (``capture_output=``, ``captured_last_layer_outputs=``) gives it its input stream, which is what
those releases' layers capture (``layer_boundary/stage.py``: the residual stream entering the layer,
the embedding for layer 0). A case whose forward the stand-ins cannot run is counted as not executed,
never as agreement.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import itertools
import json
import re
import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.engine.release import Release
from workbench.engine.rule import MISSING, UNKNOWN, CaptureRule, apply
from workbench.engine.source import Source
from workbench.engine.stub import HOOK, VLLM_HOOK, run_hook

_OUT = re.compile(r"^out\((\d+)\)$")


# -- traced values -------------------------------------------------------------------------------------------
class Traced:
    """A tensor standing for one residual-stream place: ``h<i>``/``r<i>`` (layer i's two outputs),
    ``out(i)`` (their sum), ``embed``; any tensor method keeps the place (a copy, a view, a gather)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __add__(self, other: object) -> Traced:
        if other is None:
            raise TypeError("unsupported operand type(s) for +: 'Tensor' and 'NoneType'")
        if isinstance(other, Traced):
            a, b = sorted((self.name, other.name))
            m, n = re.fullmatch(r"h(\d+)", a), re.fullmatch(r"r(\d+)", b)
            if m and n and m.group(1) == n.group(1):
                return Traced(f"out({m.group(1)})")
            return Traced(f"({a}+{b})")
        return self

    __radd__ = __add__

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ("shape", "device", "dtype"):
            return Nothing()
        return lambda *a, **k: self  # clone, contiguous, view, to, copy_ ...

    def __getitem__(self, key: object) -> Traced:
        return self

    def __mul__(self, other: object) -> Traced:
        return self

    __rmul__ = __imul__ = __truediv__ = __itruediv__ = __mul__

    def __repr__(self) -> str:
        return f"<{self.name}>"


class _NotExecutedError(Exception):
    pass


def _name(x: object) -> str:
    return x.name if isinstance(x, Traced) else "?"


class Nothing:
    """Anything else: falsy, callable, empty, equal to what it is compared with (one device, one rank,
    no two-batch overlap, no data parallel attention: the paths a single-GPU launch takes)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in ("is_first_rank", "is_last_rank"):
            return True
        if name in ("world_size",):
            return 1
        if name in ("rank_in_group", "rank"):
            return 0
        return Nothing()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if any("captur" in k and v is not None for k, v in kwargs.items()):
            # a capture handed to code that is not executed here: what it would capture is not known
            raise _NotExecutedError("a capture is handed to code the check does not run")
        return Nothing()

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __int__(self) -> int:
        return 1

    def __index__(self) -> int:
        return 1

    def __getitem__(self, key: object) -> Nothing:
        return Nothing()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Nothing)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, Nothing)

    def __hash__(self) -> int:
        return 0

    def __enter__(self) -> Nothing:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __mul__(self, other: object) -> Nothing:
        return Nothing()

    def __lt__(self, other: object) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __lt__

    __rmul__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__


class _Torch(Nothing):
    """``torch``: ``cat`` keeps the order of what it joins (what a packed buffer holds)."""

    def cat(self, values: Sequence[Any], dim: int = 0) -> Traced:
        return Traced("cat:" + ",".join(_name(v) for v in values))


def _hand(sink: Any, value: Traced) -> None:
    """Give a capture what it captures: a callback, a collector's ``capture`` or a list's ``append``."""
    if isinstance(sink, types.FunctionType | types.MethodType):
        sink(value)
    elif hasattr(type(sink), "capture"):
        sink.capture(value)
    else:
        sink.append(value)


class _Layer:
    """A stand-in decoder layer i: takes the stream in, gives ``h<i>``/``r<i>`` out (their sum is
    ``out(i)``); an in-layer capture it is handed gets its input stream."""

    def __init__(self, i: int, arity: int) -> None:
        self.i, self.arity = i, arity

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for k, v in kwargs.items():
            if "captur" in k and v is not None:
                _hand(v, Traced("embed" if self.i == 0 else f"out({self.i - 1})"))
        h, r = Traced(f"h{self.i}"), Traced(f"r{self.i}")
        if self.arity == 1:  # a layer that adds its residual itself: its output is the stream
            return Traced(f"out({self.i})")
        return (h, r, *[Nothing()] * (self.arity - 2))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name.startswith("_is_"):
            raise AttributeError(name)  # a flag the model's setter did not set
        return Nothing()


class _Norm:
    """The final norm; one handed a capture gives it the stream entering it (before the norm)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for k, v in kwargs.items():
            if "captur" in k and v is not None:
                _hand(v, Traced(f"out({self.n - 1})"))
        return _Pair()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return Nothing()


class _Pair(Traced):
    """The final norm's output: ``final-postnorm`` (and a residual when unpacked)."""

    def __init__(self) -> None:
        super().__init__("final-postnorm")

    def __iter__(self) -> Iterator[Any]:
        return iter((Traced("final-postnorm"), Nothing()))


# -- compiling the release's own methods and collectors -------------------------------------------------------
class _Unpacks(ast.NodeTransformer):
    """``a, b = f(...)`` -> ``a, b = _unpack(f(...), 2)``: a value the stand-ins cannot give whole
    (a helper that is nothing here) unpacks into nothings."""

    def visit_Assign(self, node: ast.Assign) -> ast.Assign:
        t = node.targets[0]
        if len(node.targets) == 1 and isinstance(t, ast.Tuple):
            plain = [e for e in t.elts if not isinstance(e, ast.Starred)]
            node.value = ast.Call(ast.Name("_unpack", ast.Load()), [node.value, ast.Constant(len(plain))], [])
        return node


def _unpack(value: Any, k: int) -> Any:
    if isinstance(value, (tuple, list)) and len(value) == k:
        return value
    if isinstance(value, _Pair) and k == 2:
        return tuple(value)
    if isinstance(value, (tuple, list)) and len(value) > k:
        return tuple(value[:k])
    if isinstance(value, (tuple, list)):
        return (*value, *[Nothing()] * (k - len(value)))
    return (value, *[Nothing()] * (k - 1)) if isinstance(value, Traced) else (Nothing(),) * k


def _plain(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef:
    fn = _Unpacks().visit(copy.deepcopy(fn))
    fn.decorator_list = []
    fn.returns = None
    for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs:
        a.annotation = None
    for va in (fn.args.vararg, fn.args.kwarg):
        if va is not None:
            va.annotation = None
    for n in ast.walk(fn):
        if isinstance(n, ast.AnnAssign):
            n.annotation = ast.Constant(None)
    return fn  # type: ignore[return-value]


_REAL = {"islice": itertools.islice, "nullcontext": contextlib.nullcontext, "torch": _Torch()}


def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
    """An import inside the release's code: the engine itself and torch are nothing here."""
    if level or name.split(".")[0] in ("sglang", "vllm", "torch", "triton"):
        return Nothing()
    return __import__(name, globals, locals, fromlist, level)


_BUILTINS = {**vars(builtins), "__import__": _import}


class _Env:
    """Module globals for the release's code: its aux collectors compiled from source, the rest nothing."""

    def __init__(self, src: Source) -> None:
        self.src = src
        self.classes: dict[str, Any] = {}
        self.helpers: dict[tuple[str, str], Any] = {}

    def globals_for(self, fn: ast.AST, filename: str | None = None) -> dict[str, Any]:
        names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        # a class an ``isinstance`` tests against: one nothing is an instance of (the single-GPU path)
        tested = {
            e.id
            for n in ast.walk(fn)
            if isinstance(n, ast.Call) and ast.unparse(n.func) == "isinstance" and len(n.args) == 2
            for e in ([n.args[1]] if not isinstance(n.args[1], ast.Tuple) else n.args[1].elts)
            if isinstance(e, ast.Name)
        }
        glb: dict[str, Any] = {"__builtins__": _BUILTINS, "__name__": "wb_engine_check", "_unpack": _unpack}
        for name in names:
            if hasattr(builtins, name) or name in glb:
                continue
            if name in _REAL:
                glb[name] = _REAL[name]
            elif "AuxHiddenState" in name:
                glb[name] = self.collector(name)
            elif name in tested:
                glb[name] = type(name, (), {})
            else:
                glb[name] = self.helper(name, filename) if filename else Nothing()
        return glb

    def helper(self, name: str, filename: str, depth: int = 0) -> Any:
        """A module-level function of the release's layer helpers (``snapshot(hidden_states, residual)``),
        imported by ``filename`` from ``<package>/srt/layers/``: compiled from its source; else nothing."""
        key = (name, filename)
        if key in self.helpers:
            return self.helpers[key]
        self.helpers[key] = Nothing()  # while compiling (a helper that calls itself)
        t = self.src.tree(filename)
        node = next(
            (n for n in (t.body if t else []) if isinstance(n, ast.FunctionDef) and n.name == name and depth), None
        )
        if node is None:
            for imp in self.src.imports(filename):
                module = self.src.absolute(filename, imp)
                if not module or not module.startswith(f"{self.src.package}.srt.layers"):
                    continue
                for a in imp.names:
                    if (a.asname or a.name) == name:
                        f = self.src.module_file(module)
                        if f and depth < 3:
                            self.helpers[key] = self.helper(a.name, f, depth + 1)
                            return self.helpers[key]
            return self.helpers[key]
        fn = _plain(node)
        mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
        glb = self.globals_for(mod, filename)
        exec(compile(mod, filename, "exec"), glb)
        self.helpers[key] = glb[name]
        return glb[name]

    def collector(self, name: str) -> Any:
        """The release's own aux collector class (``AuxHiddenStateList``/``Packer``), compiled from its
        source, recording what each capture is handed."""
        if name in self.classes:
            return self.classes[name]
        for rel in self.src.files(f"{self.src.package}/srt/layers"):
            t = self.src.tree(rel)
            node = next((n for n in (t.body if t else []) if isinstance(n, ast.ClassDef) and n.name == name), None)
            if node is None:
                continue
            body = [_plain(b) if isinstance(b, ast.FunctionDef) else b for b in node.body]
            cls = ast.ClassDef(name=node.name, bases=node.bases, keywords=[], body=body, decorator_list=[])
            if sys.version_info >= (3, 12):
                cls.type_params = []
            mod = ast.fix_missing_locations(ast.Module(body=[cls], type_ignores=[]))
            glb = self.globals_for(mod, rel)
            exec(compile(mod, rel, "exec"), glb)
            real = glb[name]

            class Recorded(real):  # type: ignore[misc, valid-type]
                trace: list[str]

                def append(self, x: Any) -> None:
                    self.__dict__.setdefault("trace", []).append(_name(x))
                    super().append(x)

                def finalize(self, *a: Any, **k: Any) -> Any:
                    # the packer's own checks run; the buffer it returns holds the appends in order
                    own = getattr(super(), "finalize", None)
                    got = own(*a, **k) if own is not None else self
                    if isinstance(got, Traced | Nothing):
                        return Traced("cat:" + ",".join(self.__dict__.get("trace", [])))
                    return got

            self.classes[name] = Recorded
            return Recorded
        self.classes[name] = Nothing()  # not in this release
        return self.classes[name]


class _Model:
    """``self`` of the capturing model's forward: N stand-in layers, the capture indices, the class's
    own methods (compiled from the release's source) and nothing else."""

    def __init__(
        self, src: Source, env: _Env, rel: str, cls: ast.ClassDef, n: int, attr: str, indices: Any, arity: int
    ):
        d = self.__dict__
        d["_src"], d["_env"], d["_rel"], d["_cls"] = src, env, rel, cls
        d["layers"] = [_Layer(i, arity) for i in range(n)]
        d[attr] = indices
        d["start_layer"], d["end_layer"] = 0, n
        d["pp_group"] = Nothing()
        d["norm"] = _Norm(n)
        d["embed_tokens"] = lambda *a, **k: Traced("embed")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if "embed" in name and self._src.find_method(self._rel, self._cls, name) is None:
            return lambda *a, **k: Traced("embed")  # word_embeddings, embed_tokens, tok_embeddings ...
        found = self._src.find_method(self._rel, self._cls, name)
        if found is not None:
            f, _c, node = found
            prop = any(
                ast.unparse(d) in ("property", "cached_property", "functools.cached_property")
                for d in node.decorator_list
            )
            fn = _plain(node)
            mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
            glb = self._env.globals_for(mod, f)
            exec(compile(mod, f, "exec"), glb)
            bound = types.MethodType(glb[fn.name], self)
            if prop:  # a property is its value (``self.use_sequence_parallel``), read each time
                return bound()
            self.__dict__[name] = bound
            return bound
        return Nothing()

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value


def _arity(fwd: ast.AST) -> int:
    """How many values the forward unpacks from a layer call (``hidden_states, residual = layer(...)``)."""
    for n in ast.walk(fwd):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            f = ast.unparse(n.value.func)
            if f == "layer" or f.startswith("self.layers[") or f == "decoder_layer":
                t = n.targets[0]
                return len(t.elts) if isinstance(t, ast.Tuple) else 1
    return 2


# -- one case ------------------------------------------------------------------------------------------------
@dataclass
class Truth:
    points: list[str] | None  # what the forward hands the drafter, in order (None: it failed)
    fatal: str | None = None  # "type-error", "index-error", "runtime-error: ..." (the release's own raise)
    skipped: str | None = None  # the case could not be executed with the stand-ins (why)


def _points(names: Sequence[str], n: int) -> list[str]:
    out = []
    for name in names:
        m = _OUT.match(name)
        out.append(f"out({m.group(1)})" if m else name)
    return out


def _returned(value: Any) -> list[str] | None:
    """The aux states a forward returned: ``(hidden, aux)``, aux a list, a collector or a packed buffer."""
    if not isinstance(value, tuple) or len(value) < 2:
        return []
    aux = value[1]
    if isinstance(aux, list):
        return [_name(x) for x in aux]
    if isinstance(aux, Traced) and aux.name.startswith("cat:"):
        return aux.name[4:].split(",") if aux.name != "cat:" else []
    trace = vars(aux).get("trace") if hasattr(aux, "__dict__") and not isinstance(aux, Traced) else None
    if trace is None and not isinstance(aux, Traced) and hasattr(aux, "__dict__") and "_idx" in vars(aux):
        trace = []  # a collector nothing was handed to
    return list(trace) if trace is not None else None


def _resolve_model(
    src: Source, f: str, cls: ast.ClassDef, where: str | None, engine: str
) -> tuple[str, ast.ClassDef] | None:
    """The class whose forward runs the capture loop: the part the hook wrote the indices on."""
    if engine == "vllm":
        from workbench.engine.registry import vllm_registry
        from workbench.engine.vllm_extract import _holder

        return _holder(src, f, cls, where, vllm_registry(src)[0])
    from workbench.engine.extract import _resolve_path

    return _resolve_path(src, f, cls, where) if where else None


class _SettledError(Exception):
    """The case is settled before the forward runs (a start-up failure, or what cannot be run)."""

    def __init__(self, truth: Truth) -> None:
        self.truth = truth


def _hook(src: Source, rule: CaptureRule, ids: list[int] | None, n: int) -> tuple[Any, str, ast.ClassDef]:
    """The release's hook executed on a stub: (its outcome, the class's file, the class)."""
    clsname = rule.arch
    if rule.engine == "vllm":
        from workbench.engine.registry import vllm_registry

        clsname = vllm_registry(src)[0].get(rule.arch, ("", rule.arch, 0))[1]
    found = src.find_class(rule.file, clsname)
    if found is None:
        raise _SettledError(Truth(None, skipped=f"class {clsname} not found from {rule.file}"))
    f, cls = found
    if rule.engine == "sglang":
        o = run_hook(src, f, cls, ids, n)
    else:
        if ids is None or rule.config_ids == "ignored":  # the runner asks the model's default getter
            getters = ("get_eagle3_default_aux_hidden_state_layers", "get_eagle3_aux_hidden_state_layers")
            getter = next((g for g in getters if src.find_method(f, cls, g)), None)
            if getter is None:
                raise _SettledError(Truth(None, skipped="no default getter"))
            got = run_hook(src, f, cls, None, n, hook_name=getter)
            if got.error:
                raise _SettledError(Truth(None, skipped=f"default getter raised {got.error}"))
            ids = list(got.returned or [])
        o = run_hook(src, f, cls, ids, n, hook_name=VLLM_HOOK, as_tuple=True)
    if o.error:
        raise _SettledError(
            Truth(None, "index-error")
            if o.error.startswith("IndexError")
            else Truth(None, skipped=f"hook raised {o.error}")
        )
    if o.indices is None:
        raise _SettledError(Truth(None, skipped="the hook wrote no indices"))
    return o, f, cls


def _forward(
    src: Source, mf: str, mcls: ast.ClassDef
) -> tuple[str, ast.ClassDef, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The forward that runs: the class's own, or the base's it hands over to (``super().forward``)."""
    fwd = src.find_method(mf, mcls, "forward")
    if fwd is None:
        raise _SettledError(Truth(None, skipped=f"{mcls.name} has no forward"))
    ff, fcls, fnode = fwd
    if any(isinstance(x, ast.Call) and ast.unparse(x.func) == "super().forward" for x in ast.walk(fnode)):
        later = [(g, c) for g, c in src.mro(mf, mcls) if c is not fcls and src.find_method(g, c, "forward")]
        if later:
            got = src.find_method(later[0][0], later[0][1], "forward")
            if got is not None:
                return got
    return ff, fcls, fnode


def _mark(src: Source, me: _Model, o: Any, mf: str, mcls: ast.ClassDef, engine: str, n: int) -> None:
    """The layers as the release's code marks them: the flags the hook wrote on the stub's layers,
    and what the capturing model's own setter does."""
    for path, attr_name, value in o.writes:
        m = re.fullmatch(re.escape(o.where or "") + r"\.layers\[(-?\d+)\]", path)
        if m and -n <= int(m.group(1)) < n:
            setattr(me.layers[int(m.group(1))], attr_name, value)
    own = src.find_method(mf, mcls, HOOK if engine == "sglang" else "_set_aux_hidden_state_layers")
    if own is None:
        return
    indices = me.__dict__[_ATTR[engine]]
    try:
        getattr(me, own[2].name)(list(indices) if engine == "sglang" else indices)
    except IndexError:
        raise _SettledError(Truth(None, "index-error")) from None
    except Exception as exc:
        raise _SettledError(Truth(None, skipped=f"the model's own setter raised {type(exc).__name__}: {exc}")) from None


_ATTR = {"sglang": "layers_to_capture", "vllm": "aux_hidden_state_layers"}
_NONE_ARGS = ("input_embeds", "inputs_embeds", "pp_proxy_tensors", "intermediate_tensors")


def _call(fnode: ast.FunctionDef | ast.AsyncFunctionDef, filename: str, env: _Env, me: _Model) -> Any:
    """Run the forward: the optional inputs absent, every other argument nothing."""
    fn = _plain(fnode)
    mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
    glb = env.globals_for(mod, filename)
    exec(compile(mod, filename, "exec"), glb)
    params = [a.arg for a in fn.args.args[1:]]
    defaulted = {a.arg for a in fn.args.args[len(fn.args.args) - len(fn.args.defaults) :]}
    kwargs = {p: None for p in params if p in _NONE_ARGS}
    args = [Nothing() for p in params if p not in kwargs and p not in defaulted]
    return glb[fn.name](me, *args, **kwargs)


def _failed(exc: BaseException) -> Truth:
    """What an exception from the forward means: the release's own failure, or a case not run."""
    if isinstance(exc, TypeError) and "NoneType" in str(exc):
        return Truth(None, "type-error")
    if isinstance(exc, RuntimeError):
        return Truth(None, f"runtime-error: {exc}")
    if isinstance(exc, AssertionError):  # the collector's own check (``assert self._idx == ...``)
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        if tb is not None and "aux_hidden_states" in tb.tb_frame.f_code.co_filename:
            return Truth(None, f"runtime-error: {exc}")
    return Truth(None, skipped=f"{type(exc).__name__}: {exc}")


def execute(src: Source, rule: CaptureRule, ids: list[int] | None, n: int) -> Truth:
    """What the release's code does for ``ids`` (None: the config has none) on an ``n``-layer target of
    ``rule.arch``: its hook executed, then its capturing forward."""
    try:
        o, f, cls = _hook(src, rule, ids, n)
        model = _resolve_model(src, f, cls, o.where, rule.engine)
        if model is None:
            return Truth(None, skipped=f"the model at {o.where} was not resolved")
        mf, mcls = model
        ff, fcls, fnode = _forward(src, mf, mcls)
        env = _Env(src)
        indices = tuple(o.indices) if rule.engine == "vllm" else list(o.indices)
        me = _Model(src, env, ff, fcls, n, _ATTR[rule.engine], indices, _arity(fnode))
        _mark(src, me, o, mf, mcls, rule.engine, n)
    except _SettledError as done:
        return done.truth
    try:
        out = _call(fnode, ff, env, me)
    except Exception as exc:  # the release's own failure, or what the stand-ins could not run
        return _failed(exc)
    names = _returned(out)
    if names is None:
        return Truth(None, skipped="the forward returned no recognised aux states")
    return Truth(_points(names, n))


# -- the table of cases ------------------------------------------------------------------------------------
def cases(n: int) -> list[list[int] | None]:
    """The ids a draft config carries: none, SpecForge's defaults, capture-before defaults, the
    embedding, the last layer, the final boundary, past it, zero, two and four ids, unsorted, repeated."""
    return [
        None,
        [1, n // 2 - 1, n - 4],
        [2, n // 2, n - 3],
        [-1, 2, n // 2],
        [0, 2, n // 2],
        [1, n // 2, n - 1],
        [1, n // 2, n],
        [1, n // 2, n + 1],
        [2, n // 2],
        [1, 3, n // 2, n - 4],
        [n - 4, 1, n // 2],
        [2, 2, n // 2],
    ]


@dataclass
class Outcome:
    engine: str
    arch: str
    num_layers: int
    ids: list[int] | None
    product: list[str]
    product_fatal: str | None
    truth: list[str] | None
    truth_fatal: str | None
    agree: bool | None  # None: not executed
    why: str = ""


def _kind(fatal: str | None) -> str | None:
    if fatal is None:
        return None
    if fatal.startswith("TypeError"):
        return "type-error"
    if fatal.startswith("IndexError"):
        return "index-error"
    return "runtime-error"


def compare(src: Source, rule: CaptureRule, ids: list[int] | None, n: int) -> Outcome:
    prod = apply(rule, ids, n, cuda_graph=False)
    truth = execute(src, rule, ids, n)
    base = Outcome(rule.name, rule.arch, n, ids, prod.points, prod.fatal, truth.points, truth.fatal, None)
    if truth.skipped or UNKNOWN in prod.points or rule.unknowns:
        base.why = truth.skipped or "the table says unknown"
        return base
    pk, tk = _kind(prod.fatal), (truth.fatal.split(":")[0] if truth.fatal else None)
    if pk or tk:
        base.agree = pk == tk
        base.why = "" if base.agree else f"fatal: table {pk}, code {tk}"
        return base
    have = [p for p in prod.points if p != MISSING]
    want = truth.points or []
    if "?" in want:  # a value the stand-ins cannot name (code the check does not run made it)
        base.why = "a captured value comes from code the check does not run"
        return base
    if any(re.fullmatch(r"[hr]\d+", w) for w in want):
        # the capture takes one of a layer's two outputs alone: what that is depends on the layer's code
        base.why = "the capture takes a layer's first output alone (its meaning is the layer's, not run here)"
        return base
    canon = [("final-prenorm" if p == f"out({n - 1})" else p) for p in have]
    wcanon = [("final-prenorm" if p == f"out({n - 1})" else p) for p in want]
    base.agree = canon == wcanon
    base.why = "" if base.agree else f"table {have}, code {want}"
    return base


def check_release(rel: Release, src: Source, layers: Sequence[int] = (32, 61)) -> list[Outcome]:
    out = []
    for rule in rel.rules:
        for n in layers:
            for ids in cases(n):
                out.append(compare(src, rule, ids, n))
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    from workbench.engine import release, releases
    from workbench.engine.wheels import unpacked

    ap = argparse.ArgumentParser(prog="python -m workbench.engine.check")
    ap.add_argument("--engine", choices=("sglang", "vllm", "both"), default="both")
    ap.add_argument("--versions", default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    engines = ("sglang", "vllm") if a.engine == "both" else (a.engine,)
    summary: dict[str, Any] = {}
    bad: list[dict[str, Any]] = []
    for name in engines:
        vs = a.versions.split(",") if a.versions else releases(name)
        tot = {"cases": 0, "agree": 0, "disagree": 0, "not_executed": 0, "releases": 0}
        for v in vs:
            rel = release(f"{name}=={v}", source="table")
            src = Source(unpacked(name, v))
            res = check_release(rel, src)
            tot["releases"] += 1
            for o in res:
                tot["cases"] += 1
                key = "not_executed" if o.agree is None else "agree" if o.agree else "disagree"
                tot[key] += 1
                if o.agree is False:
                    bad.append(o.__dict__)
            tally = [sum(o.agree is x for o in res) for x in (True, False, None)]
            print(
                f"{name}=={v}: {tally[0]} agree, {tally[1]} disagree, {tally[2]} not executed of {len(res)}",
                file=sys.stderr,
                flush=True,
            )
        summary[name] = tot
    print(json.dumps({"summary": summary, "disagreements": bad[:200]}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
