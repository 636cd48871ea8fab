"""Regenerate the log grammar (``make log-grammar``): every log statement of every release, read from the wheels.

    python -m workbench.logs.grammar_build [--engines sglang,vllm] [--versions ENGINE=V1,V2 ...] [--out PATH]

For each engine the releases from the oldest the workbench supports (SGLang 0.4.9, vLLM 0.9.0) to the
newest on the package index are downloaded once into the wheel cache the capture rules use
(``workbench.engine.wheels.download``), and every Python file the server runs is read with ``ast``
(``workbench.logs.statements``). The table (``grammar.json`` beside
this file, package data) holds each distinct statement once: its level, its template, and where it is
(``file:line``) in which releases. One statement per line, so a regenerated table diffs by statement.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from workbench.logs.statements import Statement, read

TABLE = Path(__file__).with_name("grammar.json")
GENERATOR = "workbench.logs.grammar_build v1"
OLDEST = {"sglang": "0.4.9", "vllm": "0.9.0"}
# what each engine's server runs: its package (SGLang's without its diffusion server, frontend language,
# benchmarks and tests)
READS = {
    "sglang": (
        ("sglang/",),
        (
            "sglang/test/",
            "sglang/srt/test",
            "sglang/multimodal_gen/",
            "sglang/benchmark/",
            "sglang/lang/",
            "sglang/bench_",
        ),
    ),
    "vllm": (("vllm/",), ("vllm/tests/", "vllm/benchmarks/")),
}


def release_key(v: str) -> tuple[int, ...]:
    """``0.5.4.post2`` < ``0.5.5``; ``0.10.1.1`` after ``0.10.1`` (numbers, ``postN`` as a fourth)."""
    nums = [int(x) for x in re.findall(r"\d+", v.split("+")[0])]
    return tuple(nums + [0] * (4 - len(nums)))


def index_releases(engine: str, minimum: str | None = None) -> list[str]:
    """Every final release of the engine on the package index from ``minimum`` (``pip index versions``)."""
    r = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", engine], capture_output=True, text=True, timeout=120
    )
    m = re.search(r"Available versions:\s*(.+)", r.stdout)
    if not m:
        raise SystemExit(f"pip index versions {engine}: no version list ({(r.stderr or r.stdout).strip()[-200:]})")
    lo = release_key(minimum or OLDEST[engine])
    found = [v.strip() for v in m.group(1).split(",")]
    return sorted(
        (v for v in found if re.fullmatch(r"\d+(?:\.\d+)+(?:\.post\d+)?", v) and release_key(v) >= lo), key=release_key
    )


def wheel(engine: str, version: str) -> Path:
    """The release's wheel from the workbench's wheel cache (downloaded there once)."""
    from workbench.engine.wheels import download

    return download(engine, version)


def statements(engine: str, whl: Path) -> Iterable[tuple[str, Statement]]:
    """(file inside the package, statement) for every log statement the engine's server code holds."""
    take, skip = READS[engine]
    with zipfile.ZipFile(whl) as z:
        for name in sorted(z.namelist()):
            if not name.endswith(".py") or not name.startswith(take) or name.startswith(skip):
                continue
            text = z.read(name).decode("utf-8", "replace")
            rel = name.split("/", 1)[1]
            for st in read(text, name):
                yield rel, st


def _ranges(idx: Sequence[int]) -> str:
    """Release indices as ``0-3,7``."""
    out: list[str] = []
    start = prev = idx[0]
    for i in [*idx[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(out)


def build_engine(engine: str, versions: Sequence[str], log: TextIO) -> dict[str, Any]:
    versions = sorted(versions, key=release_key)
    by_key: dict[tuple[Any, ...], dict[int, str]] = {}  # statement -> {release index: "file:line"}
    for i, v in enumerate(versions):
        n = 0
        for rel, st in statements(engine, wheel(engine, v)):
            key = (st.level, st.exception, tuple((p.template, p.optional) for p in st.pieces))
            by_key.setdefault(key, {}).setdefault(i, f"{rel}:{st.line}")
            n += 1
        print(f"{engine} {v}: {n} statements", file=log, flush=True)
    rows = []
    for (level, exc, parts), where in by_key.items():
        row: dict[str, Any] = {"level": level}
        if exc:
            row["exception"] = exc
        row["t"] = "".join(t for t, _ in parts)
        if len(parts) > 1:
            row["parts"] = [[t, 1 if opt else 0] for t, opt in parts]
        idx = sorted(where)
        row["r"] = _ranges(idx)
        row["at"] = where[idx[-1]]  # in the newest release that writes it
        if where[idx[0]].split(":")[0] != row["at"].split(":")[0]:
            row["first"] = where[idx[0]]  # moved to another file since the oldest
        rows.append(row)
    rows.sort(key=lambda r: (r["t"], r["level"], r.get("exception") or ""))
    return {"releases": list(versions), "statements": rows}


def rules_section(data: dict[str, Any]) -> dict[str, list[list[str]]]:
    """For each parser rule that reads an engine statement: the templates that hold its key, the releases
    that write each (so a release that changed the message shows) and where the newest does."""
    from workbench.logs.grammar import Grammar, rule_statements
    from workbench.logs.rules import RULES

    g = Grammar(data)
    out: dict[str, list[list[str]]] = {}
    for r in RULES:
        if r.statement is None or r.engine not in g.releases:
            continue
        out[r.id] = [list(x) for x in rule_statements(g, r.engine, r.statement, r.levels)]
    return out


def write(data: dict[str, Any], out: Path) -> None:
    """One statement per line (a regenerated release shows as the lines it changed)."""
    data["rules"] = rules_section(data)
    lines = ['{"generator": ' + json.dumps(data["generator"]) + ', "rules": {']
    rules = list(data["rules"].items())
    lines += [
        f"{json.dumps(k)}: {json.dumps(v)}" + ("," if j < len(rules) - 1 else "") for j, (k, v) in enumerate(rules)
    ]
    lines.append('}, "engines": {')
    engines = list(data["engines"].items())
    for k, (name, eng) in enumerate(engines):
        lines.append(f'{json.dumps(name)}: {{"releases": {json.dumps(eng["releases"])}, "statements": [')
        rows = eng["statements"]
        lines += [json.dumps(r, separators=(",", ":")) + ("," if j < len(rows) - 1 else "") for j, r in enumerate(rows)]
        lines.append("]}" + ("," if k < len(engines) - 1 else ""))
    lines.append("}}")
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, out)


def build(
    versions: dict[str, Sequence[str]], out: Path = TABLE, log: TextIO = sys.stderr, keep: bool = True
) -> dict[str, Any]:
    """The table for these engines' releases; engines not named keep what the table at ``out`` holds."""
    data: dict[str, Any] = {"generator": GENERATOR, "engines": {}}
    if keep and out.is_file():
        old = json.loads(out.read_text(encoding="utf-8"))
        if old.get("generator") == GENERATOR:
            data["engines"].update(old.get("engines") or {})
    for engine, vs in versions.items():
        data["engines"][engine] = build_engine(engine, vs, log)
        write(data, out)
    data["engines"] = dict(sorted(data["engines"].items()))
    write(data, out)
    return data


def main(argv: list[str] | None = None, releases: Callable[[str], list[str]] = index_releases) -> int:
    ap = argparse.ArgumentParser(prog="python -m workbench.logs.grammar_build", description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="sglang,vllm")
    ap.add_argument("--versions", action="append", default=[], help="ENGINE=V1,V2 (default: every release)")
    ap.add_argument("--out", default=str(TABLE))
    ap.add_argument("--rules-only", action="store_true", help="only recompute the rules' section (no wheels)")
    a = ap.parse_args(argv)
    if a.rules_only:
        import orjson

        out = Path(a.out)
        write(orjson.loads(out.read_bytes()), out)
        return 0
    chosen = dict(x.split("=", 1) for x in a.versions)
    todo = {e: (chosen[e].split(",") if e in chosen else releases(e)) for e in a.engines.split(",")}
    build(todo, Path(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
