"""No import cycle spans two packages: the graph of every ``workbench`` import, at module level, inside
functions and under ``TYPE_CHECKING`` alike, has no strongly connected component whose modules live
in more than one top-level package (``workbench.doctor``, ``workbench.engine``, ``workbench.layers``, ...).
import-linter's contracts (pyproject.toml) hold the layering; this holds the rest."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import workbench

ROOT = Path(workbench.__file__).parent


def modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(n, ast.Import):
                names = [a.name for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = n.module or ""
                if n.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in n.names]
            for name in names:
                if name.split(".")[0] == "workbench":
                    r = resolve(name)
                    if r and r != m:
                        edges[m].add(r)
    return edges


def components(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in edges:
        if v not in index:
            visit(v)
    return out


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def cross_package_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    return [sorted(c) for c in components(edges) if len({package(m) for m in c}) > 1]


def test_no_import_cycle_spans_two_packages():
    bad = cross_package_cycles(graph(modules()))
    assert not bad, "import cycles across packages: " + "; ".join(" <-> ".join(c) for c in bad)


def test_the_check_sees_function_level_imports(tmp_path):
    """A cycle closed by an import inside a function is a cycle."""
    edges = {
        "workbench.a.x": {"workbench.b.y"},
        "workbench.b.y": set(),
    }
    assert not cross_package_cycles(edges)
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from workbench.a.x import g\n")
    found = {n.module for n in ast.walk(ast.parse(src.read_text())) if isinstance(n, ast.ImportFrom) and n.module}
    edges["workbench.b.y"] |= found
    assert cross_package_cycles(edges) == [["workbench.a.x", "workbench.b.y"]]
