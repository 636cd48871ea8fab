"""Every malformed input of the corpus ends in one line naming the file and the field, exit 2 (or,
for the doctor, an error finding that does), and writes nothing: the files and the journal stay
byte for byte as they were. Run through the real CLI entry point, in process (a few by subprocess)."""

from __future__ import annotations

import builtins
import json
import sqlite3
import warnings
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.inputs.corpus import CASES, KEYMAPS, Spec
from workbench.cli import main
from workbench.errors import InputError


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """One workspace for the corpus, opened once so its journal exists before any case runs."""
    from workbench.api import Workbench

    ws = tmp_path_factory.mktemp("home")
    with Workbench.open(ws) as wb:
        wb.config_list()
    return ws


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def journal(ws: Path) -> list:
    db = ws / ".workbench" / "journal.sqlite3"
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return list(con.iterdump())
    finally:
        con.close()


def run_in_process(argv, capsys) -> tuple[int, str, str]:
    """main() as the console runs it; a warning Python would print counts as a second stderr line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            rc = main(list(argv))
        except SystemExit as exc:  # argparse's usage errors
            rc = exc.code if isinstance(exc.code, int) else 1
    cap = capsys.readouterr()
    shown = [
        f"{w.category.__name__}: {w.message}"
        for w in caught
        if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))
    ]
    return rc, cap.out, cap.err + "".join(line + "\n" for line in shown)


def check_outcome(spec: Spec, rc: int, out: str, err: str) -> None:
    assert "Traceback" not in out + err
    if spec.finding is None:
        lines = err.strip().splitlines()
        assert rc == 2, f"exit {rc}, stderr {err!r}, stdout {out[:300]!r}"
        assert len(lines) == 1 and lines[0].startswith("eagle-workbench"), err
        assert "internal error" not in lines[0], lines[0]
        for needle in spec.needles:
            assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    else:
        assert rc == spec.code, f"exit {rc}, stderr {err!r}"
        findings = json.loads(out)["findings"]
        hits = [f for f in findings if f["code"] == spec.finding and f["severity"] == "error"]
        assert hits, [f["code"] for f in findings]
        msgs = [f["message"] for f in hits]
        assert all("\n" not in m for m in msgs)
        assert any(all(n in m for n in spec.needles) for m in msgs), (spec.needles, msgs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_writes_nothing(case, tmp_path, home, monkeypatch, capsys):
    monkeypatch.setenv("EAGLE_WORKBENCH_HOME", str(home))
    spec = case.build(tmp_path)
    files, rows = snapshot(tmp_path), journal(home)
    opened: list[str] = []
    if spec.forbidden_reads:
        real_open = builtins.open

        def watching_open(file, *a, **kw):
            opened.append(str(file))
            return real_open(file, *a, **kw)

        monkeypatch.setattr(builtins, "open", watching_open)
    rc, out, err = run_in_process(spec.argv, capsys)
    monkeypatch.setattr(builtins, "open", builtins.open)
    check_outcome(spec, rc, out, err)
    for path in spec.forbidden_reads:
        assert not any(Path(o).resolve() == Path(path).resolve() for o in opened), f"{path} was opened"
    assert snapshot(tmp_path) == files, "a file was written or changed"
    if spec.finding is None:  # a diagnosis is recorded; refused input never is
        assert journal(home) == rows, "the journal changed"


def test_corpus_covers_every_reader_with_200_cases():
    groups = {c.group.split("/")[0] for c in CASES}
    assert {
        "draft-json",
        "draft-fields",
        "target-json",
        "target-fields",
        "safetensors",
        "specforge",
        "speculators",
        "sglang-dump",
        "payload",
        "workbench-toml",
        "config-set",
        "cli-flags",
    } <= groups
    assert len(CASES) + len(KEYMAPS) >= 200
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("key", sorted(KEYMAPS))
def test_bad_keymap_is_one_line_naming_the_file(key, tmp_path):
    from workbench.workspace import load_keymap

    raw, needle = KEYMAPS[key]
    p = tmp_path / "keymap.toml"
    p.write_bytes(raw)
    with pytest.raises(InputError) as err:
        load_keymap(p)
    msg = str(err.value)
    assert "\n" not in msg and "keymap.toml" in msg and needle in msg, msg
    assert p.read_bytes() == raw


SUBPROCESS = [
    "draft-json/drafter-check:nan",
    "draft-fields/drafter-check:layers-30-million",
    "config-set:ids-item-string",
    "payload:ragged-rows",
    "workbench-toml:non-utf8",
    "safetensors/stack:metadata-string",
]


@pytest.mark.parametrize("case_id", SUBPROCESS)
def test_through_the_console_entry_point(case_id, tmp_path, home):
    spec = next(c for c in CASES if c.id == case_id).build(tmp_path)
    files, rows = snapshot(tmp_path), journal(home)
    r = run_cli(*spec.argv, env={"EAGLE_WORKBENCH_HOME": str(home)})
    check_outcome(spec, r.returncode, r.stdout, r.stderr)
    assert snapshot(tmp_path) == files and (spec.finding or journal(home) == rows)
