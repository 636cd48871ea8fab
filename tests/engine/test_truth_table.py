"""``engine capture`` against each release's own code, executed (``workbench.engine.check``), on a
sample of real releases of both engines: SGLang as ``.venv`` installs it and a few cached wheels,
vLLM from ``.venv-vllm`` (``make vllm``) when present, else from the wheel cache. The check over
every release is ``make engine-check``."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from workbench.engine import release
from workbench.engine.check import check_release, compare
from workbench.engine.source import Source

REPO = Path(__file__).resolve().parents[2]
SGLANG_WHEELS = ("0.5.10", "0.5.14", "0.5.17", "0.5.21")  # cached under ~/.cache/eagle-workbench
VLLM_WHEELS = ("0.9.2", "0.33.0")  # in the wheel cache when .venv-vllm is not built


def _wheel(engine, version):
    from workbench.engine.wheels import unpacked

    try:
        return unpacked(engine, version)
    except Exception as exc:  # no index reachable and not cached
        pytest.skip(f"{engine}=={version} wheel not available: {exc}")


def _venv_vllm():
    for site in sorted(REPO.glob(".venv-vllm/lib/python3*/site-packages")):
        if (site / "vllm" / "model_executor").is_dir():
            return site
    return None


def _sample():
    from workbench.engine.lookup import installed

    out = []
    got = installed("sglang")
    if got is not None:
        out.append(("sglang", got[1], lambda r=got[0]: r))
    out += [("sglang", v, lambda v=v: _wheel("sglang", v)) for v in SGLANG_WHEELS]
    site = _venv_vllm()
    if site is not None:
        ver = Source(site).version()
        out.append(
            ("vllm", str(__import__("workbench.engine", fromlist=["Version"]).Version.parse(ver)), lambda s=site: s)
        )
    else:
        out += [("vllm", v, lambda v=v: _wheel("vllm", v)) for v in VLLM_WHEELS]
    return out


SAMPLE = _sample()


@pytest.mark.parametrize("engine,version,root", SAMPLE, ids=[f"{e}=={v}" for e, v, _ in SAMPLE])
def test_capture_agrees_with_the_releases_code(engine, version, root):
    rel = release(f"{engine}=={version}", source="table")
    res = check_release(rel, Source(root()), layers=(32,))
    tally = Counter("agree" if o.agree else "disagree" if o.agree is False else "not executed" for o in res)
    bad = [(o.arch, o.ids, o.why) for o in res if o.agree is False]
    assert not bad, bad[:10]
    # the code really ran on most cases: a check that executes nothing proves nothing
    assert tally["agree"] >= 100 and tally["agree"] >= tally["not executed"] / 2, tally
    # every kind of case ran somewhere: the final boundary, past it, the embedding, two and four ids
    kinds = {len(o.ids or []) for o in res if o.agree}
    assert {0, 2, 3, 4} <= kinds | ({0} if any(o.ids is None and o.agree for o in res) else set())


def test_the_check_catches_a_wrong_table():
    """A rule that says what the code does not do is caught: the check is not vacuous."""
    from workbench.engine.lookup import installed

    got = installed("sglang")
    if got is None:
        pytest.skip("no installed sglang")
    rel = release(f"sglang=={got[1]}", source="table")
    rule = rel.serve(["LlamaForCausalLM"]).rule
    src = Source(got[0])
    assert compare(src, rule, [1, 15, 28], 32).agree is True
    for wrong in (
        replace(rule, id_map="as-is"),
        replace(rule, index0="type-error"),
        replace(rule, boundary="final-prenorm"),
    ):
        outcomes = [compare(src, wrong, ids, 32) for ids in ([1, 15, 28], [-1, 2, 16], [1, 16, 31])]
        assert any(o.agree is False for o in outcomes), wrong


@pytest.mark.parametrize(
    "version,arch",
    [
        ("0.5.21", "Qwen2ForCausalLM"),  # captures through the release's snapshot(hidden_states, residual) helper
        ("0.5.23", "DeepseekV2ForCausalLM"),  # an in-layer capture into the packed AuxHiddenStatePacker buffer
        ("0.5.23", "Qwen3_5ForCausalLM"),  # the capturing body named by a class attribute (body_cls = qwen3_5.X)
    ],
)
def test_the_newer_capture_paths_are_executed_not_skipped(version, arch):
    from workbench.engine.lookup import installed

    got = installed("sglang")
    root = got[0] if got is not None and got[1] == version else _wheel("sglang", version)
    rule = release(f"sglang=={version}", source="table").serve([arch]).rule
    assert rule is not None and not rule.unknowns, rule
    outcomes = [compare(Source(root), rule, ids, 32) for ids in (None, [1, 15, 28], [-1, 2, 16], [1, 16, 32])]
    assert all(o.agree for o in outcomes), [(o.ids, o.why) for o in outcomes]
