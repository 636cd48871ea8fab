"""Which architectures an SGLang release can load, and which of them capture EAGLE-3 aux states.

SGLang's model registry (``sglang/srt/models/registry.py``, ``import_model_classes``) imports every
module of ``sglang.srt.models`` and registers each class named by its ``EntryClass`` under the class
``__name__``: that name is what a config's ``architectures`` must say. Importing every model needs
CUDA; the same names are read here from the modules' source (``EntryClass = X`` / ``[X, Y]``), and a
class captures EAGLE-3 aux states when it, or a class it inherits from, defines
``set_eagle3_layers_to_capture``.

The installed sglang is read when there is one (the answer kept on disk until its files change:
``workbench.engine.source_cache``); otherwise the table generated from it
(``sglang_registry.json``, ``python -m workbench.doctor.sglang_loaders regenerate 0.5.12.post1 ...``,
which reads the installed sglang and those releases' wheels).
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

TABLE = Path(__file__).with_name("sglang_registry.json")
_MODELS = "sglang/srt/models"


def _installed_models_dir() -> Path | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "srt" / "models"
    return d if d.is_dir() else None


def _installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return None


def _sources(where: Path) -> Iterator[tuple[str, str]]:
    """(file name, text) of each module of sglang/srt/models, from a folder or a wheel."""
    if where.is_file():
        import zipfile

        with zipfile.ZipFile(where) as z:
            prefix = "sglang/srt/models/"
            for n in sorted(z.namelist()):
                if n.startswith(prefix) and n.endswith(".py") and "/" not in n[len(prefix) :]:
                    yield n[len(prefix) :], z.read(n).decode("utf-8", "replace")
        return
    for path in sorted(where.glob("*.py")):
        try:
            yield path.name, path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def read_registry(models_dir: Path, version: str) -> dict[str, Any]:
    """{"version", "architectures": {name: {"file", "line", "eagle3_capture"}}} from the model sources
    (an installed ``sglang/srt/models`` folder, or a release's wheel)."""
    classes: dict[str, tuple[list[str], bool]] = {}
    entries: dict[str, tuple[str, int]] = {}
    for fname, text in _sources(Path(models_dir)):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        aliases: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).split(".")[-1].split("[")[0] for b in node.bases]
                has = any(
                    isinstance(b, ast.FunctionDef) and b.name == "set_eagle3_layers_to_capture" for b in node.body
                )
                if node.name not in classes or has:
                    classes[node.name] = (bases, has)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
                if name == "EntryClass":
                    vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                    for v in vals:
                        if isinstance(v, ast.Name):
                            entries[aliases.get(v.id, v.id)] = (f"{_MODELS}/{fname}", node.lineno)
                elif isinstance(node.value, ast.Name):
                    aliases[name] = node.value.id

    def captures(name: str, seen: tuple[str, ...] = ()) -> bool:
        if name in seen or name not in classes:
            return False
        bases, has = classes[name]
        return has or any(captures(b, (*seen, name)) for b in bases)

    archs = {
        name: {"file": f, "line": line, "eagle3_capture": captures(name)} for name, (f, line) in sorted(entries.items())
    }
    return {"engine": "sglang", "version": version, "architectures": archs}


@lru_cache(maxsize=4)
def registry(version: str | None = None) -> dict[str, Any] | None:
    """The registry of ``version`` (None: the installed one): read from the installed sglang when it
    is that version, else from the generated table; None when neither has it."""
    inst = _installed_version()
    d = _installed_models_dir()
    if d is not None and inst and (version is None or version == inst):
        from workbench.engine import source_cache  # (255 modules parsed: kept until they change)

        return source_cache.read(f"sglang-registry-{inst}", d, lambda: read_registry(d, inst))
    if TABLE.is_file():
        table = json.loads(TABLE.read_text(encoding="utf-8"))
        rel = table.get("releases", {})
        if version is None and rel:
            return cast("dict[str, Any]", rel[sorted(rel)[-1]])
        return cast("dict[str, Any] | None", rel.get(version))
    return None


def regenerate(versions: list[str], out: Path = TABLE) -> dict[str, Any]:
    """The installed sglang, and each of ``versions`` from its wheel in the wheel cache
    (``pip download --no-deps sglang==X`` when it is not there yet)."""
    import re
    import subprocess

    from workbench.engine.vllm_rules import wheel_cache

    table: dict[str, Any] = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {"releases": {}}
    d, v = _installed_models_dir(), _installed_version()
    if d is not None and v is not None:
        table["releases"][v] = read_registry(d, v)
    cache = wheel_cache()
    for ver in versions:
        found = sorted(cache.glob(f"sglang-{ver}-*.whl"))
        if not found:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"sglang=={ver}", "-d", str(cache)],
                check=True,
            )
            found = sorted(cache.glob(f"sglang-{ver}-*.whl"))
        if not found:
            raise SystemExit(f"no wheel of sglang=={ver} in {cache}")
        table["releases"][ver] = read_registry(found[0], ver)
    table["releases"] = dict(
        sorted(
            table["releases"].items(),
            key=lambda kv: [int(x) if x.isdigit() else 0 for x in re.split(r"[.post]+", kv[0])],
        )
    )
    table["generated_by"] = (
        "python -m workbench.doctor.sglang_loaders regenerate "
        + " ".join(versions)
        + " (the installed sglang and those releases' wheels)"
    )
    out.write_text(json.dumps(table, separators=(",", ":")) + "\n", encoding="utf-8")
    return table


if __name__ == "__main__":
    if sys.argv[1:2] == ["regenerate"]:
        t = regenerate(sys.argv[2:])
        print(f"wrote {TABLE} ({', '.join(t['releases'])})")
    else:
        print("usage: python -m workbench.doctor.sglang_loaders regenerate [VERSION...]", file=sys.stderr)
        raise SystemExit(2)
