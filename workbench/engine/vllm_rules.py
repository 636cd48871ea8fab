"""What vLLM does with an EAGLE-3 drafter, read from a vLLM release's own source.

The reader opens a release (a wheel, or an installed ``vllm`` folder) and settles, with file:line
evidence, each part of the rule the doctor needs; a part whose code it does not recognise is
``"unknown"``, never a guess:

- ``config_ids``   which draft-config keys pick the target layers to capture, found by *executing*
                   ``GPUModelRunner._get_eagle3_aux_layers_from_config`` on stub configs: ``top-level``,
                   ``eagle_config``, ``top-level-then-eagle_config``, or ``ignored`` (the runner calls the
                   model's defaults with no config lookup, as 0.9-0.11 do);
- ``default``      the model's default indices as expressions of N (``["2", "N//2", "N-3"]``), from
                   executing ``get_eagle3_[default_]aux_hidden_state_layers`` on a stub with N layers;
- ``index0``       what index 0 captures: ``embed`` or ``type-error`` (``hidden_states + None``), or ``none``;
- ``boundary``     what index N captures: ``final-prenorm`` or ``none`` (never fires);
- ``arch_map``     how ``EAGLEConfig`` renames a draft's architectures under ``method="eagle3"`` (the
                   comprehension executed on probe names);
- ``draft_archs``  the draft architectures vLLM's model registry can load (``_SPECULATIVE_DECODING_MODELS``);
- ``speculators``  the architecture a speculators-format (``speculators_model_type: eagle3``) config becomes,
                   or None when the release has no speculators config reader;
- ``eagle3_targets`` target architectures whose class implements ``set_aux_hidden_state_layers``;
- ``draft_len``    what ``SpeculativeConfig._maybe_override_draft_max_model_len`` makes of a draft shorter
                   than the target: ``min`` (the draft is served with its own length) or ``unknown``;
- ``fc_states``    how many target states the EAGLE-3 draft's ``fc`` takes (``llama_eagle3.py``): ``"3"``
                   (``hidden_size * 3``, whatever the config says) or ``"config"`` (``num_aux_hidden_states`` or
                   the number of ids).

``python -m workbench.engine.vllm_rules regenerate 0.9.2 0.10.2 0.11.0`` downloads those wheels
(``pip download --no-deps``) into the wheel cache and rewrites ``vllm_table.json`` beside this file.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import CodeType, SimpleNamespace
from typing import Any, Optional, cast

UNKNOWN = "unknown"
TABLE = Path(__file__).with_name("vllm_table.json")

_MODELS = "vllm/model_executor/models/"
_RUNNER = "vllm/v1/worker/gpu_model_runner.py"
_EAGLE_CFG = "vllm/transformers_utils/configs/eagle.py"
_SPEC_ALGOS = "vllm/transformers_utils/configs/speculators/algos.py"
_SPEC_CONFIGS = ("vllm/config/speculative.py", "vllm/config/__init__.py", "vllm/config.py")


def wheel_cache() -> Path:
    return Path(os.environ.get("EAGLE_WB_WHEEL_CACHE") or Path.home() / ".cache" / "eagle-workbench" / "wheels")


# -- sources ----------------------------------------------------------------------------------------
class Source:
    """The text of a release's files, from a wheel (zip) or an installed package folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._zip = zipfile.ZipFile(self.path) if self.path.is_file() else None
        self._names: set[str] = set(self._zip.namelist()) if self._zip else set()

    def read(self, rel: str) -> str | None:
        if self._zip is not None:
            return self._zip.read(rel).decode("utf-8") if rel in self._names else None
        p = self.path.parent / rel if (self.path / "__init__.py").is_file() else self.path / rel
        if not p.is_file():
            p = self.path / rel.split("/", 1)[1]
        return p.read_text(encoding="utf-8") if p.is_file() else None

    def listdir(self, prefix: str) -> list[str]:
        if self._zip is not None:
            return sorted(
                n for n in self._names if n.startswith(prefix) and n.endswith(".py") and "/" not in n[len(prefix) :]
            )
        base = self.path / prefix.split("/", 1)[1]
        return sorted(f"{prefix}{p.name}" for p in base.glob("*.py")) if base.is_dir() else []

    def version(self) -> str:
        if self._zip is not None:
            m = re.match(r"vllm-([^-]+)-", self.path.name)
            if m:
                return m.group(1)
        text = self.read("vllm/_version.py") or ""
        m = re.search(r"version\s*=\s*['\"]([^'\"]+)", text) or re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
        return m.group(1) if m else UNKNOWN


class _Ev:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, what: str, file: str, line: int, text: str) -> None:
        self.items.append({"what": what, "file": file, "line": int(line), "text": text.strip()[:200]})


def _line(src: str, node: ast.AST | None) -> str:
    return src.splitlines()[node.lineno - 1] if node is not None and hasattr(node, "lineno") else ""


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    out: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, node)
    return out


def _exec_function(src: str, fn: ast.FunctionDef, extra: dict[str, Any] | None = None) -> Callable[..., Any]:
    """Compile one function of the engine's source on its own (decorators dropped) and return it."""
    if sys.version_info >= (3, 12):
        fn = ast.FunctionDef(
            name=fn.name, args=fn.args, body=fn.body, decorator_list=[], returns=None, type_comment=None, type_params=[]
        )
    else:
        fn = ast.FunctionDef(
            name=fn.name, args=fn.args, body=fn.body, decorator_list=[], returns=None, type_comment=None
        )
    for a in fn.args.args + fn.args.kwonlyargs:
        a.annotation = None
    mod = ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[]))
    ns: dict[str, Any] = {
        "Optional": Optional,
        "logger": SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None),
    }
    ns.update(extra or {})
    exec(compile(mod, "<vllm source>", "exec"), ns)
    compiled: Callable[..., Any] = ns[fn.name]
    return compiled


# -- the parts ----------------------------------------------------------------------------------------
class _HF(SimpleNamespace):
    """A draft hf_config stub: config.json keys as attributes, as PretrainedConfig exposes them."""


def _config_ids(s: Source, ev: _Ev) -> dict[str, str]:
    src = s.read(_RUNNER)
    if src is None:
        return {"config_ids": UNKNOWN}
    tree = ast.parse(src)
    fns = _functions(tree)
    fn = fns.get("_get_eagle3_aux_layers_from_config")
    if fn is None:
        call = next(
            (
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "set_aux_hidden_state_layers"
            ),
            None,
        )
        if call is not None and call.args and "get_eagle3_aux_hidden_state_layers" in ast.unparse(call.args[0]):
            ev.add("config_ids", _RUNNER, call.lineno, _line(src, call) + "  (no config lookup: model defaults)")
            return {"config_ids": "ignored"}
        return {"config_ids": UNKNOWN}
    f = _exec_function(src, fn)

    def run(cfg: dict[str, Any]) -> list[Any] | str | None:
        hf = _HF(**cfg)
        me = SimpleNamespace(speculative_config=SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=hf)))
        try:
            r = f(me)
        except Exception:
            return UNKNOWN
        return list(r) if r is not None else None

    top, nested = [1, 2, 3], [4, 5, 6]
    k = "eagle_aux_hidden_state_layer_ids"
    r_top, r_nested = run({k: top}), run({"eagle_config": {k: nested}})
    r_both = run({k: top, "eagle_config": {k: nested}})
    ev.add(
        "config_ids",
        _RUNNER,
        fn.lineno,
        _line(src, fn) + f"  (executed: top -> {r_top}, eagle_config -> {r_nested}, both -> {r_both})",
    )
    if UNKNOWN in (r_top, r_nested, r_both):
        return {"config_ids": UNKNOWN}
    if r_top == top and r_nested == nested:
        kind = "top-level-then-eagle_config" if r_both == top else "eagle_config-then-top-level"
    elif r_top == top:
        kind = "top-level"
    elif r_nested == nested:
        kind = "eagle_config"
    else:
        kind = "ignored"
    return {"config_ids": kind}


def _fit_default(f: Callable[..., Any]) -> list[str] | None:
    """Express the default indices as a, N//b, N-c from runs at several N."""
    runs: dict[int, list[Any]] = {}
    for n in (16, 32, 61, 80):

        class _Holder:
            layers = [None] * n

        me = SimpleNamespace(model=_Holder())
        try:
            runs[n] = list(f(me))
        except Exception:
            return None
    width = {len(v) for v in runs.values()}
    if len(width) != 1:
        return None
    exprs = []
    for j in range(width.pop()):
        vals = {n: v[j] for n, v in runs.items()}
        cands = [str(vals[16])] + [f"N//{b}" for b in range(1, 9)] + [f"N-{c}" for c in range(1, 9)] + ["N"]
        hit = next((e for e in cands if all(_eval(e, n) == v for n, v in vals.items())), None)
        if hit is None:
            return None
        exprs.append(hit)
    return exprs


def _eval(expr: str, n: int) -> int:
    if expr == "N":
        return n
    if expr.startswith("N//"):
        return n // int(expr[3:])
    if expr.startswith("N-"):
        return n - int(expr[2:])
    return int(expr)


def _default(s: Source, ev: _Ev) -> dict[str, list[str] | str]:
    for rel, name in (
        (_MODELS + "interfaces.py", "get_eagle3_default_aux_hidden_state_layers"),
        (_MODELS + "llama.py", "get_eagle3_default_aux_hidden_state_layers"),
        (_MODELS + "llama.py", "get_eagle3_aux_hidden_state_layers"),
    ):
        src = s.read(rel)
        if src is None:
            continue
        fn = _functions(ast.parse(src)).get(name)
        if fn is None:
            continue
        exprs = _fit_default(_exec_function(src, fn))
        ret = next((n for n in ast.walk(fn) if isinstance(n, ast.Return)), fn)
        ev.add("default", rel, ret.lineno, _line(src, ret) + f"  (executed: {exprs})")
        return {"default": exprs or UNKNOWN}
    return {"default": UNKNOWN}


def _is_capture(stmt: ast.AST) -> str | None:
    """The index expression of a capture statement, or None."""
    for n in ast.walk(stmt):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "_maybe_add_hidden_state"
            and len(n.args) >= 2
        ):
            return ast.unparse(n.args[1])
        if (
            isinstance(n, ast.Compare)
            and len(n.ops) == 1
            and isinstance(n.ops[0], ast.In)
            and "aux_hidden_state_layers" in ast.unparse(n.comparators[0])
        ):
            return ast.unparse(n.left)
    return None


def _guarded(s: Source, node: ast.AST) -> bool:
    """Whether the captured value handles a None residual (``... if residual is not None else ...``)."""
    text = ast.unparse(node)
    if "_maybe_add_hidden_state" in text:
        src = s.read(_MODELS + "interfaces.py") or ""
        fn = _functions(ast.parse(src)).get("_maybe_add_hidden_state") if src else None
        text = ast.unparse(fn) if fn is not None else ""
    return bool(re.search(r"residual is not None|residual is None", text))


def _capture(s: Source, ev: _Ev) -> dict[str, str]:
    rel = _MODELS + "llama.py"
    src = s.read(rel)
    if src is None:
        return {"index0": UNKNOWN, "boundary": UNKNOWN}
    tree = ast.parse(src)
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "forward"):
        loop = next((n for n in fn.body if isinstance(n, ast.For) and "self.layers" in ast.unparse(n.iter)), None)
        if loop is None:
            continue
        layer_at = next(
            (
                i
                for i, st in enumerate(loop.body)
                if isinstance(st, ast.Assign)
                and isinstance(st.value, ast.Call)
                and ast.unparse(st.value.func) == "layer"
            ),
            None,
        )
        caps = [(i, st, _is_capture(st)) for i, st in enumerate(loop.body) if _is_capture(st)]
        if layer_at is None or len(caps) != 1:
            continue
        loop_var = ast.unparse(loop.target).split(",")[0].strip("() ")
        i, st, idx = caps[0]
        before = i < layer_at
        pre = [st2 for st2 in fn.body[: fn.body.index(loop)] if _is_capture(st2)]
        ev.add("capture", rel, st.lineno, _line(src, st) + (" (before the layer)" if before else " (after the layer)"))
        if before and idx == loop_var:
            index0 = "embed" if _guarded(s, st) else "type-error"
            boundary = "none"
        elif not before and idx is not None and idx.replace(" ", "") == f"{loop_var}+1":
            boundary = "final-prenorm"  # index N fires after the last layer, before the final norm
            if pre:
                ev.add("index0", rel, pre[0].lineno, _line(src, pre[0]))
                index0 = "embed" if _guarded(s, pre[0]) else "type-error"
            else:
                index0 = "none"
        else:
            return {"index0": UNKNOWN, "boundary": UNKNOWN}
        return {"index0": index0, "boundary": boundary}
    return {"index0": UNKNOWN, "boundary": UNKNOWN}


def _arch_map(s: Source, ev: _Ev) -> dict[str, str | dict[str, Any]]:
    src = s.read(_EAGLE_CFG)
    if src is None:
        return {"arch_map": UNKNOWN}
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "eagle3" in ast.unparse(node.test) and "method" in ast.unparse(node.test):
            comp = next((n for st in node.body for n in ast.walk(st) if isinstance(n, ast.ListComp)), None)
            if comp is None:
                continue
            expr = ast.Expression(body=comp)
            code = compile(ast.fix_missing_locations(expr), "<vllm eagle.py>", "eval")

            def mapped(arch: str, code: CodeType = code) -> object:
                me = SimpleNamespace(model=SimpleNamespace(architectures=[arch]))
                return eval(code, {"self": me, "model": me.model})[0]

            try:
                probes = {a: mapped(a) for a in ("FooForCausalLM", "Eagle3FooForCausalLM", "FooForCausalLMEagle3")}
            except Exception:
                return {"arch_map": UNKNOWN}
            ev.add("arch_map", _EAGLE_CFG, comp.lineno, _line(src, comp) + f"  (executed: {probes})")
            ok = probes["FooForCausalLM"] == "Eagle3FooForCausalLM"
            if not ok:
                return {"arch_map": UNKNOWN}
            return {
                "arch_map": {
                    "prefix": "Eagle3",
                    "keeps_prefixed": probes["Eagle3FooForCausalLM"] == "Eagle3FooForCausalLM",
                    "keeps_suffixed": probes["FooForCausalLMEagle3"] == "FooForCausalLMEagle3",
                }
            }
    return {"arch_map": UNKNOWN}


def _registry(s: Source, ev: _Ev) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    rel = _MODELS + "registry.py"
    src = s.read(rel)
    if src is None:
        return {}, {}
    tables: dict[str, dict[str, list[Any]]] = {}
    for node in ast.parse(src).body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else node.target
            if isinstance(node, ast.AnnAssign)
            else None
        )
        if (
            isinstance(target, ast.Name)
            and target.id.startswith("_")
            and target.id.endswith("_MODELS")
            and isinstance(node, (ast.Assign, ast.AnnAssign))
            and isinstance(node.value, ast.Dict)
        ):
            try:
                tables[target.id] = {k: list(v) for k, v in ast.literal_eval(node.value).items()}
            except ValueError:
                tables[target.id] = {}
            if target.id == "_SPECULATIVE_DECODING_MODELS":
                ev.add("draft_archs", rel, node.lineno, _line(src, node))
    spec = tables.get("_SPECULATIVE_DECODING_MODELS", {})
    targets: dict[str, list[Any]] = {}
    for name in ("_TEXT_GENERATION_MODELS", "_MULTIMODAL_MODELS"):
        targets.update(tables.get(name, {}))
    return spec, targets


def _eagle3_targets(s: Source, ev: _Ev, targets: dict[str, list[Any]]) -> list[str]:
    classes: dict[str, tuple[list[str], bool]] = {}
    for rel in s.listdir(_MODELS):
        try:
            tree = ast.parse(s.read(rel) or "")
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).split(".")[-1].split("[")[0] for b in node.bases]
                has = any(isinstance(b, ast.FunctionDef) and b.name == "set_aux_hidden_state_layers" for b in node.body)
                if node.name not in classes or has:
                    classes[node.name] = (bases, has)

    def supports(name: str, seen: tuple[str, ...] = ()) -> bool:
        if name in seen or name not in classes:
            return False
        bases, has = classes[name]
        return has or any(supports(b, (*seen, name)) for b in bases)

    out = sorted(a for a, (_mod, cls) in targets.items() if supports(cls))
    ev.add("eagle3_targets", _MODELS, 1, f"{len(out)} registered architectures implement set_aux_hidden_state_layers")
    return out


def _speculators(s: Source, ev: _Ev) -> dict[str, Any] | str | None:
    src = s.read(_SPEC_ALGOS)
    if src is None:
        return None
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef) and any("eagle3" in ast.unparse(d) for d in node.decorator_list):
            for st in ast.walk(node):
                if isinstance(st, ast.Assign) and "architectures" in ast.unparse(st.targets[0]):
                    ev.add("speculators", _SPEC_ALGOS, st.lineno, _line(src, st))
                    try:
                        val = ast.literal_eval(st.value)
                    except ValueError:
                        return _arch_by_model_type(node, st.value)
                    return val[0] if isinstance(val, list) and val else UNKNOWN
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


def _draft_len(s: Source, ev: _Ev) -> str:
    for rel in _SPEC_CONFIGS:
        src = s.read(rel)
        if src is None:
            continue
        fn = _functions(ast.parse(src)).get("_maybe_override_draft_max_model_len")
        if fn is None:
            continue
        f = _exec_function(src, fn)
        try:
            got = f(None, 2048, 131072)
        except Exception:
            return UNKNOWN
        ev.add("draft_len", rel, fn.lineno, _line(src, fn) + f"  (executed: draft 2048, target 131072 -> {got})")
        return "min" if got == 2048 else UNKNOWN
    return UNKNOWN


def _fc_states(s: Source, ev: _Ev) -> str:
    rel = _MODELS + "llama_eagle3.py"
    src = s.read(rel)
    if src is None:
        return UNKNOWN
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Assign) and any(
            ast.unparse(t) in ("self.fc", "self.fc_input_size", "fc_input_size") for t in node.targets
        ):
            text = ast.unparse(node.value)
            if re.search(r"hidden_size \* 3\b", text):
                ev.add("fc_states", rel, node.lineno, _line(src, node))
                return "3"
            if "num_aux_hidden_states" in text:
                ev.add("fc_states", rel, node.lineno, _line(src, node))
                return "config"
    return UNKNOWN


def extract(path: str | Path) -> dict[str, Any]:
    """Every rule part of one vLLM release (a wheel or an installed vllm folder)."""
    s = Source(path)
    ev = _Ev()
    facts: dict[str, Any] = {"engine": "vllm", "version": s.version(), "source": Path(path).name}
    facts.update(_config_ids(s, ev))
    facts.update(_default(s, ev))
    facts.update(_capture(s, ev))
    facts.update(_arch_map(s, ev))
    spec, targets = _registry(s, ev)
    facts["draft_archs"] = sorted(spec)
    facts["speculators"] = _speculators(s, ev)
    facts["eagle3_targets"] = _eagle3_targets(s, ev, targets) if targets else UNKNOWN
    facts["draft_len"] = _draft_len(s, ev)
    facts["fc_states"] = _fc_states(s, ev)
    facts["evidence"] = ev.items
    return facts


# -- the generated table ----------------------------------------------------------------------------------
def load_table(path: Path = TABLE) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads(path.read_text(encoding="utf-8")))


def download(version: str, dest: Path | None = None) -> Path:
    """``pip download --no-deps vllm==VERSION`` into the wheel cache (kept for the next call)."""
    import subprocess

    dest = dest or wheel_cache() / "vllm"
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"vllm-{version}-*.whl"))
    if found:
        return found[0]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            f"vllm=={version}",
            "-d",
            str(dest),
        ],
        check=True,
    )
    found = sorted(dest.glob(f"vllm-{version}-*.whl"))
    if not found:
        raise RuntimeError(f"pip download vllm=={version} left no wheel in {dest}")
    return found[0]


def regenerate(versions: list[str], out: Path = TABLE) -> dict[str, Any]:
    releases: dict[str, dict[str, Any]] = {}
    for v in versions:
        facts = extract(download(v))
        releases[facts["version"]] = facts
    table = {
        "generated_by": "python -m workbench.engine.vllm_rules regenerate " + " ".join(versions),
        "releases": dict(sorted(releases.items(), key=lambda kv: _vkey(kv[0]))),
    }
    out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return table


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.+]", v)[:4])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) >= 2 and argv[0] == "regenerate":
        t = regenerate(argv[1:])
        print(f"wrote {TABLE} ({', '.join(t['releases'])})")
        return 0
    if len(argv) == 2 and argv[0] == "show":
        print(json.dumps(extract(argv[1]), indent=1))
        return 0
    print("usage: python -m workbench.engine.vllm_rules regenerate VERSION... | show WHEEL_OR_DIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
