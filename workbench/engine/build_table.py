"""Regenerate the rule tables (``make engine-rules``): the extractor over every release's wheel of
both engines.

    python -m workbench.engine.build_table [--engine sglang|vllm|both] [--versions 0.5.14,0.5.23]
                                           [--min-sglang 0.4.9] [--min-vllm 0.9.0]

Writes ``workbench/engine/sglang_rules.json`` and ``vllm_rules.json`` (package data, read offline):
``{"generator": ..., "releases": {version: entry}}``, one release a line. Releases already in a table
written by the same extractor are kept unless listed again; wheels are downloaded with pip into the
wheel cache and kept there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from workbench.engine.table import GENERATOR, TABLES

MINIMUM = {"sglang": "0.4.9", "vllm": "0.9.0"}


def build(
    engine: str, versions: Iterable[str], out: Path | None = None, log: TextIO = sys.stderr, again: bool = False
) -> dict[str, Any]:
    from workbench.engine.lookup import read_at
    from workbench.engine.table import pack
    from workbench.engine.version import Version
    from workbench.engine.wheels import unpacked

    out = out or TABLES[engine]
    data: dict[str, Any] = {"generator": GENERATOR, "releases": {}}
    if out.is_file():
        old = json.loads(out.read_text())
        if old.get("generator") == GENERATOR:
            data["releases"].update(old.get("releases") or {})
    for v in versions:
        if v in data["releases"] and not again:
            continue
        t0 = time.perf_counter()
        rel = read_at(unpacked(engine, v), v)
        data["releases"][v] = pack(rel)
        print(
            f"{engine}=={v}: {len(rel.rules)} EAGLE-3 target classes, {len(rel.registry)} registered, "
            f"{len(rel.drafts)} EAGLE-3 drafts ({time.perf_counter() - t0:.1f} s)",
            file=log,
            flush=True,
        )
        _write(data, out)
    data["releases"] = dict(sorted(data["releases"].items(), key=lambda kv: Version.parse(kv[0])))
    _write(data, out)
    return data


def _write(data: dict[str, Any], out: Path) -> None:
    tmp = out.with_suffix(".json.tmp")
    lines = [f"{json.dumps(v)}: {json.dumps(e, separators=(',', ':'))}" for v, e in data["releases"].items()]
    tmp.write_text(
        '{"generator": ' + json.dumps(data["generator"]) + ', "releases": {\n' + ",\n".join(lines) + "\n}}\n"
    )
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    from workbench.engine.wheels import releases

    ap = argparse.ArgumentParser(prog="python -m workbench.engine.build_table")
    ap.add_argument("--engine", choices=("sglang", "vllm", "both"), default="both")
    ap.add_argument("--versions", default=None, help="comma-separated releases (default: every one on the index)")
    ap.add_argument("--min-sglang", default=MINIMUM["sglang"])
    ap.add_argument("--min-vllm", default=MINIMUM["vllm"])
    ap.add_argument("--again", action="store_true", help="read releases already in the table again")
    a = ap.parse_args(argv)
    engines = ("sglang", "vllm") if a.engine == "both" else (a.engine,)
    for engine in engines:
        lo = a.min_sglang if engine == "sglang" else a.min_vllm
        vs = [v.strip() for v in a.versions.split(",")] if a.versions else releases(engine, lo)
        build(engine, vs, again=a.again)
    return 0


if __name__ == "__main__":
    sys.exit(main())
