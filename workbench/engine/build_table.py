"""Regenerate the rule table (``make engine-rules``): the extractor over every release's wheel.

    python -m workbench.engine.build_table [--min 0.4.9] [--versions 0.5.14,0.5.23] [--out PATH]

Writes ``workbench/engine/rules.json`` (package data, used offline): ``{"generator": ..., "releases":
{version: [rule, ...]}}``. Existing releases are kept unless listed again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from workbench.engine.table import RELEASE_WIDE, TABLE

GENERATOR = "workbench.engine.extract v1"


def build(versions: Iterable[str], out: Path = TABLE, log: TextIO = sys.stderr) -> dict[str, Any]:
    from workbench.engine.extract import extract
    from workbench.engine.version import Version
    from workbench.engine.wheels import unpacked

    data: dict[str, Any] = {"generator": GENERATOR, "releases": {}}
    if out.is_file():
        old = json.loads(out.read_text())
        if old.get("generator") == GENERATOR:
            data["releases"].update(old.get("releases") or {})
    for v in versions:
        rules = extract(unpacked(v), version=v)
        data["releases"][v] = pack([r.to_dict() for r in rules])
        print(f"{v}: {len(rules)} EAGLE-3 classes", file=log, flush=True)
        _write(data, out)
    data["releases"] = dict(sorted(data["releases"].items(), key=lambda kv: Version.parse(kv[0])))
    _write(data, out)
    return data


_RELEASE_EVIDENCE = ("graph_reset", "config_ids", "config_before_graphs", "id_source")


def pack(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One release's rules with what the runner files say (the same for every class) stored once."""
    if not rows:
        return {"common": {}, "rules": []}
    common = {k: rows[0][k] for k in RELEASE_WIDE}
    common["evidence"] = [e for e in rows[0]["evidence"] if e["what"] in _RELEASE_EVIDENCE]
    out = []
    for r in rows:
        if {k: r[k] for k in RELEASE_WIDE} != {k: common[k] for k in RELEASE_WIDE} or [
            e for e in r["evidence"] if e["what"] in _RELEASE_EVIDENCE
        ] != common["evidence"]:
            raise ValueError(f"{r['arch']}: runner facts differ from the release's")
        out.append(
            {
                **{k: v for k, v in r.items() if k not in RELEASE_WIDE},
                "evidence": [e for e in r["evidence"] if e["what"] not in _RELEASE_EVIDENCE],
            }
        )
    return {"common": common, "rules": out}


def _write(data: dict[str, Any], out: Path) -> None:
    # one release per line: a regenerated release shows as one changed line
    tmp = out.with_suffix(".json.tmp")
    lines = [f"{json.dumps(v)}: {json.dumps(rows, separators=(',', ':'))}" for v, rows in data["releases"].items()]
    tmp.write_text(
        '{"generator": ' + json.dumps(data["generator"]) + ', "releases": {\n' + ",\n".join(lines) + "\n}}\n"
    )
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    from workbench.engine.wheels import releases

    ap = argparse.ArgumentParser(prog="python -m workbench.engine.build_table")
    ap.add_argument("--min", default="0.4.9")
    ap.add_argument("--versions", default=None, help="comma-separated releases (default: all on PyPI from --min)")
    ap.add_argument("--out", default=str(TABLE))
    a = ap.parse_args(argv)
    vs = [v.strip() for v in a.versions.split(",")] if a.versions else releases(a.min)
    build(vs, Path(a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
