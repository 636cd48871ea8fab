"""Real log lines from public threads, each read alone as ``logs parse`` reads a one-line file.

``data/real_sglang.tsv`` and ``data/real_vllm.tsv`` hold lines users pasted into the engines' and trainers'
issue threads (2024-2026, many releases, behind whatever their setup put in front), with the record each
should give and where it was found. At least 95% of each engine's lines are read right, every failure line
gives a failure with a class, and a line not read right is never silent: it is counted as not recognised.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.logs import parse_text

DATA = Path(__file__).with_name("data")


def _sample(engine: str) -> list[tuple[str, str, str]]:
    rows = []
    for raw in (DATA / f"real_{engine}.tsv").read_text(encoding="utf-8").splitlines():
        if raw and not raw.startswith("#"):
            expect, url, line = raw.split("\t", 2)
            rows.append((expect, url, line))
    return rows


def _read(line: str) -> tuple[dict | None, int]:
    scan = parse_text(line + "\n")
    return (scan.records[0] if scan.records else None), scan.unrecognised


def _right(expect: str, rec: dict | None) -> bool:
    if expect == "none":
        return rec is None
    kind, _, name = expect.partition(":")
    if rec is None or rec["kind"] != kind:
        return False
    got = rec.get("class") if kind == "failure" else rec.get("name")
    return not name or got == name


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_real_lines_are_read_right(engine):
    rows = _sample(engine)
    assert len(rows) >= 70 and len({u for _, u, _ in rows}) >= 25  # many threads, not one log
    wrong = []
    for expect, url, line in rows:
        rec, unrecognised = _read(line)
        if not _right(expect, rec):
            wrong.append((expect, rec and (rec["kind"], rec.get("class") or rec.get("name")), line[:120]))
            assert rec is not None or unrecognised, f"silent miss: {line!r} ({url})"
    assert len(wrong) <= 0.05 * len(rows), wrong


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_every_failure_line_is_classified(engine):
    for expect, url, line in _sample(engine):
        if expect.startswith("failure"):
            rec, _ = _read(line)
            assert rec is not None and rec["kind"] == "failure" and rec["class"], (line, url)
            assert rec["hint"]


def test_the_samples_span_releases_and_setups():
    """The lines come from many releases and setups: plain and ranked stamps, undated ones, vLLM's process
    tags, container and orchestrator prefixes."""
    lines = [line for e in ("sglang", "vllm") for _, _, line in _sample(e)]
    assert any(line.startswith("[17:") for line in lines)  # SGLang's undated stamp (0.3)
    assert any("Decode batch." in line for line in lines) and any("Prefill batch" in line for line in lines)
    assert any(line.startswith("(EngineCore_DP0 pid=") for line in lines)
    assert any(" metrics.py:" in line and "[" not in line[:40] for line in lines)  # vLLM before its brackets
    assert any(line[:4].isdigit() and "T" in line[:11] for line in lines)  # a container runtime's stamp


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_sample_read_as_one_log_by_the_command(engine, cli, tmp_path):
    """The lines one after the other (a traceback's head then swallows the exception lines after it, as
    in a log): the command writes the records the parser gives, and says what it did not recognise."""
    import json

    from workbench.logs import parse_text

    rows = _sample(engine)
    log = tmp_path / f"{engine}.log"
    log.write_text("".join(line + "\n" for _, _, line in rows), encoding="utf-8")
    r = cli("logs", "parse", str(log), "--json")
    assert r.returncode == 0, r.stderr
    scan = parse_text(log.read_bytes())
    assert [json.loads(x) for x in r.stdout.splitlines()] == scan.records
    assert len(scan.records) >= sum(e != "none" for e, _, _ in rows) // 2
    if scan.unrecognised:
        assert f"logs parse: {scan.unrecognised} of {len(rows)} lines not recognised" in r.stderr
