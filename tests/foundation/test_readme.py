"""The README as a new user reads it: each command block runs verbatim on a fresh home (cwd the
repository, ``~`` an empty folder), its printed output is what the commands print, the Python
blocks run in order, and the key table and every "Screen (Fn)" agree with the app's bindings.

A block that cannot run here says why just above it: ``<!-- readme-test: skip REASON -->``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
DIRECTIVE = re.compile(r"<!--\s*readme-test:\s*(\w+)\s*(.*?)\s*-->")


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    directive: tuple[str, str] = ("", "")
    commands: list[tuple[str, list[str]]] = field(default_factory=list)  # (command, expected output lines)


def blocks() -> list[Block]:
    lines = README.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang, body = i, m.group(1), []
        i += 1
        while not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        d = DIRECTIVE.search(prev)
        out.append(Block(start + 1, lang, "\n".join(body), (d.group(1), d.group(2)) if d else ("", "")))
        i += 1
    for b in out:
        b.commands = _commands(b.text)
    return out


def _commands(text: str) -> list[tuple[str, list[str]]]:
    cmds: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    if not any(line.startswith("$ ") for line in lines):
        # a block of bare commands (``make demo  # ...``), no output shown
        if lines and re.match(r"^(eagle-workbench|make|python|cp|mkdir)\b", lines[0]):
            return [(line, []) for line in lines if line.strip() and not line.startswith(" ")]
        return []
    k = 0
    while k < len(lines):
        if lines[k].startswith("$ "):
            cmd = lines[k][2:]
            while cmd.rstrip().endswith("\\"):
                k += 1
                cmd = cmd.rstrip()[:-1] + " " + lines[k].strip()
            cmds.append((cmd, []))
        elif cmds:
            cmds[-1][1].append(lines[k])
        k += 1
    return cmds


def _norm(s: str) -> str:
    """Without whitespace: column alignment and JSON indentation are not what the README shows."""
    return "".join(s.split())


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EAGLE_WORKBENCH")}
    env.update(
        HOME=str(home), PYTHONPATH=str(ROOT), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    )
    return env


SHELL_BLOCKS = [b for b in blocks() if b.commands and b.lang in ("", "sh", "bash", "console")]
PY_BLOCKS = [b for b in blocks() if b.lang == "python"]


def test_every_command_block_runs_or_says_why_not():
    for b in SHELL_BLOCKS:
        kind, reason = b.directive
        assert kind in ("", "skip"), f"README.md:{b.line}: unknown directive {kind!r}"
        assert kind != "skip" or len(reason) > 10, f"README.md:{b.line}: a skip names its reason"
    assert sum(1 for b in SHELL_BLOCKS if not b.directive[0]) >= 3


@pytest.mark.parametrize("block", [b for b in SHELL_BLOCKS if not b.directive[0]], ids=lambda b: f"line{b.line}")
def test_readme_command_block_runs_verbatim(block, tmp_path):
    """Each command of the block exits 0 (or 1 where the README says a finding is an error) and
    prints every output line the README shows (lines with '...' are abridged and only begin)."""
    home = tmp_path / "home"
    home.mkdir()
    for cmd, expected in block.commands:
        r = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=_env(home), capture_output=True, text=True, timeout=300)
        where = f"README.md:{block.line}: {cmd}"
        assert "Traceback" not in r.stderr, f"{where}\n{r.stderr[-2000:]}"
        allowed = (0, 1) if cmd.split()[1:2] == ["doctor"] else (0,)
        assert r.returncode in allowed, f"{where}: exit {r.returncode}\n{r.stderr[-2000:]}"
        got = _norm(r.stdout)
        for line in expected:
            text = line.strip()
            if not text or text == "...":
                continue
            cut = min((text.find(m) for m in ("...", "…") if m in text), default=-1)
            want = _norm(text[:cut] if cut >= 0 else text)
            assert want in got, f"{where}\nREADME shows: {text}\nprinted:\n{r.stdout[:3000]}"


def test_readme_python_blocks_run_in_order(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    script = "\n\n".join(b.text for b in PY_BLOCKS)
    r = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=_env(home), capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]


def test_readme_key_table_is_the_bindings():
    from workbench.tui.app import screen_keys_markdown

    text = README.read_text()
    m = re.search(r"<!-- screen-keys.*?-->\n(.*?)<!-- /screen-keys -->", text, re.S)
    assert m, "README.md: the screen-keys table is missing"
    assert m.group(1).strip() == screen_keys_markdown().strip()


def test_every_screen_key_the_readme_names_is_right():
    from workbench.tui.app import SCREENS

    keys = {s.title: s.key.upper() for s in SCREENS}
    text = README.read_text()
    named = re.findall(r"\b([A-Z][a-z]+) \(`?(F\d+)\b", text) + [
        (t, k) for k, t in re.findall(r"\b(F\d+) \(([A-Z][a-z]+)\)", text)
    ]
    assert named
    for title, key in named:
        if title in keys:
            assert keys[title] == key, f"README.md says {title} is {key}; the app binds {keys[title]}"
