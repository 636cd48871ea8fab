"""An engine installation (SGLang or vLLM) read as source: parsed files, classes resolved through
imports and bases.

Nothing here imports the engine; the files are parsed with ``ast`` (a release's model code imports
torch, triton and CUDA kernels at module level, so it cannot be imported on a CPU host without them).
"""

from __future__ import annotations

import ast
import os
from collections import deque
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from workbench.errors import InputError

# what marks each engine's package folder
MARKERS = {"sglang": "srt", "vllm": "model_executor"}


class Source:
    """``root`` is the directory that holds ``sglang/`` or ``vllm/`` (or that package directory itself)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        root = Path(root).expanduser()
        for pkg, marker in MARKERS.items():
            if (root / pkg / marker).is_dir():
                self.root, self.package = root, pkg
                break
            if (root / marker).is_dir() and root.name == pkg:
                self.root, self.package = root.parent, pkg
                break
        else:
            raise InputError(
                f"{root}: not an SGLang or vLLM installation (expected sglang/srt/ or vllm/model_executor/ in it)"
            )
        self._trees: dict[str, ast.Module | None] = {}
        self._lines: dict[str, list[str]] = {}
        # per-installation caches of the extractor's lookups, keyed by what was looked up
        self.memo: dict[Any, Any] = {}

    # -- files --------------------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._trees:
            try:
                text = (self.root / rel).read_text(encoding="utf-8")
                self._trees[rel] = ast.parse(text, rel)
                self._lines[rel] = text.splitlines()
            except (OSError, SyntaxError, ValueError):
                self._trees[rel] = None
        return self._trees[rel]

    def line(self, rel: str, lineno: int) -> str:
        self.tree(rel)
        lines = self._lines.get(rel) or []
        return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""

    def files(self, under: str) -> Iterator[str]:
        base = self.root / under
        if base.is_dir():
            for p in sorted(base.rglob("*.py")):
                yield p.relative_to(self.root).as_posix()

    def module_file(self, module: str) -> str | None:
        rel = module.replace(".", "/")
        for cand in (rel + ".py", rel + "/__init__.py"):
            if self.exists(cand):
                return cand
        return None

    def version(self) -> str | None:
        """The release, from ``sglang/version.py`` or ``vllm/_version.py`` (every release has one)."""
        for rel in (f"{self.package}/version.py", f"{self.package}/_version.py"):
            t = self.tree(rel)
            for node in t.body if t else []:
                if (
                    isinstance(node, ast.Assign)
                    and any(getattr(x, "id", None) in ("__version__", "version") for x in node.targets)
                    and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)
                ):
                    return node.value.value
        return None

    # -- classes ------------------------------------------------------------------------------------
    def find_class(self, rel: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        """The class ``name`` as seen from file ``rel``: defined there or imported (followed)."""
        key = ("class", rel, name)
        if key not in self.memo:
            self.memo[key] = self._find_class(rel, name, depth)
        found: tuple[str, ast.ClassDef] | None = self.memo[key]
        return found

    def imports(self, rel: str) -> list[ast.ImportFrom]:
        key = ("imports", rel)
        if key not in self.memo:
            t = self.tree(rel)
            self.memo[key] = [n for n in statements(t) if isinstance(n, ast.ImportFrom)] if t else []
        found: list[ast.ImportFrom] = self.memo[key]
        return found

    def _find_class(self, rel: str, name: str, depth: int) -> tuple[str, ast.ClassDef] | None:
        t = self.tree(rel)
        if t is None or depth > 6:
            return None
        for node in t.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return rel, node
        for node in self.imports(rel):
            module = self.absolute(rel, node)
            if module:
                for a in node.names:
                    if (a.asname or a.name) == name:
                        f = self.module_file(module)
                        if f:
                            return self.find_class(f, a.name, depth + 1)
        return None

    @staticmethod
    def absolute(rel: str, node: ast.ImportFrom) -> str | None:
        """The module an import names, a relative one (``from .interfaces import X``) resolved against ``rel``."""
        if node.level == 0:
            return node.module
        pkg = rel.rsplit("/", 1)[0].split("/")
        if node.level - 1 >= len(pkg):
            return None
        base = pkg[: len(pkg) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def mro(self, rel: str, cls: ast.ClassDef, depth: int = 0) -> list[tuple[str, ast.ClassDef]]:
        out = [(rel, cls)]
        if depth > 8:
            return out
        for b in cls.bases:
            name = b.id if isinstance(b, ast.Name) else (b.attr if isinstance(b, ast.Attribute) else None)
            if not name:
                continue
            found = self.find_class(rel, name)
            if found:
                for item in self.mro(found[0], found[1], depth + 1):
                    if item not in out:
                        out.append(item)
        return out

    def find_method(
        self, rel: str, cls: ast.ClassDef, meth: str
    ) -> tuple[str, ast.ClassDef, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        for f, c in self.mro(rel, cls):
            for node in c.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == meth:
                    return f, c, node
        return None

    def attr_classes(self, rel: str, cls: ast.ClassDef) -> dict[str, tuple[str, ast.ClassDef, int]]:
        """``self.<attr> = Name(...)`` in the class's ``__init__`` (first along the MRO): attr -> class."""
        key = ("attrs", rel, cls.name, cls.lineno)
        if key in self.memo:
            cached: dict[str, tuple[str, ast.ClassDef, int]] = self.memo[key]
            return cached
        out: dict[str, tuple[str, ast.ClassDef, int]] = {}
        for f, c in self.mro(rel, cls):
            init = next((n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if init is None:
                continue
            for node in ast.walk(init):
                if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Call):
                    continue
                fn = node.value.func
                name = fn.id if isinstance(fn, ast.Name) else None
                ff = f
                if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) and fn.value.id == "self":
                    # ``self.model = self.model_cls(...)`` with ``model_cls = X`` in a class body, or
                    # ``self.model = self._init_model(...)``: the class the factory method returns
                    got = self.find_method(rel, cls, fn.attr)
                    attr_cls = self.class_attr(rel, cls, fn.attr)
                    if attr_cls:
                        name, ff = attr_cls[1], attr_cls[0]
                    elif got:
                        rets = [
                            r.value.func.id
                            for r in ast.walk(got[2])
                            if isinstance(r, ast.Return)
                            and isinstance(r.value, ast.Call)
                            and isinstance(r.value.func, ast.Name)
                        ]
                        if len(set(rets)) == 1:
                            name, ff = rets[0], got[0]
                if name and self.find_class(ff, name) is None:
                    # a class passed in: ``def __init__(..., language_model_cls=Qwen3LLMModel)``
                    args = init.args.args + init.args.kwonlyargs
                    defaults = dict(zip([a.arg for a in init.args.args][::-1], init.args.defaults[::-1]))
                    defaults.update({a.arg: d for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults) if d})
                    d = defaults.get(name) if name in [a.arg for a in args] else None
                    if isinstance(d, ast.Name):
                        name = d.id
                if not name:
                    continue
                for tgt in node.targets:
                    if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self":
                        found = self.find_class(ff, name)
                        if found and tgt.attr not in out:
                            out[tgt.attr] = (found[0], found[1], node.lineno)
        self.memo[key] = out
        return out

    def class_attr(self, rel: str, cls: ast.ClassDef, attr: str) -> tuple[str, str] | None:
        """``attr = Name`` (or ``attr = module.Name``, the module imported by the file) in a class body
        along the MRO (the most derived first): (the file that names it, Name)."""
        for f, c in self.mro(rel, cls):
            for node in c.body:
                if not (
                    isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in node.targets)
                ):
                    continue
                if isinstance(node.value, ast.Name):
                    return f, node.value.id
                v = node.value
                if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name):
                    mf = self.module_alias(f, v.value.id)
                    if mf:
                        return mf, v.attr
        return None

    def module_alias(self, rel: str, alias: str) -> str | None:
        """The file of a module the file imports as ``alias`` (``from sglang.srt.models import qwen3_5``)."""
        for node in self.imports(rel):
            module = self.absolute(rel, node)
            for a in node.names if module else []:
                if (a.asname or a.name) == alias:
                    f = self.module_file(f"{module}.{a.name}")
                    if f:
                        return f
        return None

    def entry_classes(self, rel: str) -> list[str]:
        """``EntryClass = X`` or ``[X, Y]``: the architectures a model file serves."""
        t = self.tree(rel)
        out: list[str] = []
        for node in t.body if t else []:
            if isinstance(node, ast.Assign) and any(getattr(x, "id", None) == "EntryClass" for x in node.targets):
                vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                out += [v.id for v in vals if isinstance(v, ast.Name)]
        return out


def statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements under ``tree`` (with the except handlers and match cases that hold them) in
    the order ``ast.walk`` gives them, without walking a single expression: a statement is never
    inside one, and an import or a ``def`` is a statement (a tenth of ``ast.walk``'s work)."""
    todo = deque([tree])
    while todo:
        node = todo.popleft()
        yield node
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list) and value and isinstance(value[0], _HOLDERS):
                todo.extend(value)


_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case)


@lru_cache(maxsize=64)
def open_source(root: str) -> Source:
    return Source(root)
