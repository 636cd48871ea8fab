"""The code a host needs to run the remote jobs: the workbench modules they import, found by reading
the imports (module level and inside functions), without their comments and docstrings
(``shipped_source``), packed as a deterministic tar.gz whose sha256 over (path, content) names its
cache directory on the host. Faces and the facade are never shipped: the jobs use the core alone.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tarfile
import tokenize
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import cast

ENTRY = ("workbench.remote.runner", "workbench.remote.jobs")
# Never shipped: faces, the facade, and the parts that run servers or build the lab.
EXCLUDED = (
    "workbench.tui",
    "workbench.notebook",
    "workbench.cli",
    "workbench.api",
    "workbench.facade",
    "workbench.lab",
    "workbench.sglang",
    "workbench.hosts",
    "workbench.configs",
    "workbench.journal",
    "workbench.workspace",
    "workbench.timeline",
    "workbench.live",
    "workbench.remote.near",
    "workbench.remote.bundle",
)
# Pure modules inside an excluded package that the core imports (they import nothing heavy).
ALLOWED = ("workbench.sglang", "workbench.sglang.version")
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # .../workbench
# A shipped module's data file, named next to it: ``Path(__file__).with_name("vllm_table.json")``.
_DATA_REF = re.compile(r"""with_name\(\s*["']([\w.-]+\.json)["']\s*\)""")
# Not shipped: the rule tables (megabytes); a job that needs rules gets the entries it needs in its
# arguments (``workbench.remote.engine.shipment``) or reads the host's installed engine, and says which.
DATA_NOT_SHIPPED = ("workbench/engine/sglang_rules.json", "workbench/engine/vllm_rules.json")


@dataclass(frozen=True)
class Bundle:
    files: tuple[tuple[str, bytes], ...]  # ((relative path, bytes), ...) sorted by path
    digest: str  # sha256 over paths and contents

    @property
    def name(self) -> str:
        return f"wb-{self.digest[:16]}"

    @property
    def source_bytes(self) -> int:
        return sum(len(b) for _, b in self.files)

    def modules(self) -> list[str]:
        return [p[:-3].replace("/", ".").removesuffix(".__init__") for p, _ in self.files if p.endswith(".py")]

    def data_files(self) -> list[str]:
        return [p for p, _ in self.files if not p.endswith(".py")]

    def tarball(self, fmt: str = "xz") -> bytes:
        """A compressed tar with fixed metadata: the same code gives the same bytes. ``xz`` by default
        (a fifth smaller than gzip on source text: the bundle is most of what a first job moves);
        ``gz`` for a host python built without lzma."""
        import gzip
        import lzma

        buf = io.BytesIO()
        # the compressor's header carries no time (tarfile's "w:gz" would stamp the current one)
        with (
            (
                lzma.LZMAFile(buf, "wb", preset=9 | lzma.PRESET_EXTREME)
                if fmt == "xz"
                else gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0)
            ) as out,
            tarfile.open(fileobj=out, mode="w") as tar,
        ):
            for rel, data in self.files:
                info = tarfile.TarInfo(rel)
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()


def _module_file(name: str) -> Path | None:
    rel = Path(*name.split("."))
    base = PACKAGE_ROOT.parent
    for cand in (base / rel / "__init__.py", base / rel.with_suffix(".py")):
        if cand.is_file():
            return cand
    return None


def _excluded(name: str) -> bool:
    return name not in ALLOWED and any(name == e or name.startswith(e + ".") for e in EXCLUDED)


def _imports(path: Path) -> set[str]:
    """Every workbench module named by an import anywhere in the file."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "workbench")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] == "workbench"
        ):
            found.add(node.module)
            for a in node.names:  # ``from workbench.hidden import specforge`` names a module
                sub = f"{node.module}.{a.name}"
                if _module_file(sub) is not None:
                    found.add(sub)
    return found


def closure(entries: tuple[str, ...] = ENTRY) -> dict[str, Path]:
    """Module name -> file for the entries, what they import, and every parent package."""
    todo, seen = list(entries), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        parts = name.split(".")
        for i in range(1, len(parts)):  # parent packages run first on import
            parent = ".".join(parts[:i])
            if parent not in seen:
                todo.append(parent)
        if _excluded(name) and name not in entries:
            raise RuntimeError(f"the remote jobs reach {name}, which is not shipped to hosts")
        f = _module_file(name)
        if f is None:
            raise RuntimeError(f"module {name}: no source file under {PACKAGE_ROOT}")
        seen[name] = f
        todo.extend(m for m in _imports(f) if m not in seen and not _excluded(m))
    return seen


def shipped_source(text: str) -> str:
    """A module as hosts get it: its comments and docstrings left out (a host runs the code and
    never shows them; they were a third of the bytes a first job moves), every other character in
    place, so a traceback on the host names the same lines. A docstring becomes ``""``."""
    tree = ast.parse(text)
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def at(line: int, col: int) -> int:  # ast's (1-based line, utf-8 byte column) -> str index
        return starts[line - 1] + len(text[starts[line - 1] : starts[line]].encode()[:col].decode())

    spans: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            d = body[0].value
            a, b = at(d.lineno, d.col_offset), at(cast(int, d.end_lineno), cast(int, d.end_col_offset))
            spans.append((a, b, '""' + "\n" * text[a:b].count("\n")))
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:  # (tokenize counts characters, not bytes)
            spans.append((starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1], ""))
    out, pos = [], 0
    for a, b, repl in sorted(spans):
        out += [text[pos:a], repl]
        pos = b
    return "".join(out) + text[pos:]


@lru_cache(maxsize=1)
def current() -> Bundle:
    files = []
    for f in closure().values():
        rel = f.relative_to(PACKAGE_ROOT.parent).as_posix()
        data = f.read_bytes()
        files.append((rel, shipped_source(data.decode("utf-8")).encode("utf-8")))
        for ref in sorted(set(_DATA_REF.findall(data.decode("utf-8", "replace")))):
            dfile = f.with_name(ref)
            drel = dfile.relative_to(PACKAGE_ROOT.parent).as_posix()
            if dfile.is_file() and drel not in DATA_NOT_SHIPPED:  # the doctor's tables, read on the host
                files.append((drel, dfile.read_bytes()))
    files = sorted(set(files))
    h = hashlib.sha256()
    for rel, data in files:
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return Bundle(tuple(files), h.hexdigest())
