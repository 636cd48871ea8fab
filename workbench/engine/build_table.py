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
from pathlib import Path

TABLE = Path(__file__).with_name("rules.json")
GENERATOR = "workbench.engine.extract v1"


def build(versions, out: Path = TABLE, log=sys.stderr) -> dict:
    from workbench.engine.extract import extract
    from workbench.engine.wheels import unpacked
    from workbench.sglang.version import Version

    data = {"generator": GENERATOR, "releases": {}}
    if out.is_file():
        old = json.loads(out.read_text())
        if old.get("generator") == GENERATOR:
            data["releases"].update(old.get("releases") or {})
    for v in versions:
        rules = extract(unpacked(v), version=v)
        data["releases"][v] = [r.to_dict() for r in rules]
        print(f"{v}: {len(rules)} EAGLE-3 classes", file=log, flush=True)
        _write(data, out)
    data["releases"] = dict(sorted(data["releases"].items(), key=lambda kv: Version.parse(kv[0])))
    _write(data, out)
    return data


def _write(data: dict, out: Path) -> None:
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=0, sort_keys=False) + "\n")
    os.replace(tmp, out)


def main(argv=None) -> int:
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
