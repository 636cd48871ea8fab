"""The grammar read from the engines' own code, and the parser's rules checked against it.

``workbench/logs/grammar.json`` holds every log statement of every SGLang release from 0.4.9 and every
vLLM release from 0.9.0 (``make log-grammar`` reads the wheels). Here: each rule that reads an engine
statement matches the statement's format string in every release that writes it (a release that
changed the message shows in the table's ``rules`` section, with the releases of each form); the table
is what the extractor reads from the SGLang installed in the test environment; the extractor reads the
ways the engines build their messages.
"""

from __future__ import annotations

import ast
import json
import zipfile
from pathlib import Path

import pytest

from workbench.logs import grammar_build, statements
from workbench.logs.grammar import TABLE, Grammar, as_logged, load, rule_statements
from workbench.logs.rules import RULES


@pytest.fixture(scope="module")
def table() -> dict:
    return json.loads(TABLE.read_text(encoding="utf-8"))


def test_the_table_spans_every_release_from_the_oldest_supported(table):
    sg, vl = table["engines"]["sglang"]["releases"], table["engines"]["vllm"]["releases"]
    assert sg[0] == "0.4.9" and vl[0] == "0.9.0"
    for rel in (sg, vl):
        assert rel == sorted(rel, key=grammar_build.release_key) and len(set(rel)) == len(rel)
    assert {"0.5.5", "0.5.12.post1", "0.5.23"} <= set(sg) and {"0.10.1.1", "0.11.0", "0.32.0"} <= set(vl)
    g = load()
    for st in g.statements:
        idx = st.release_indices()
        assert idx == sorted(set(idx)) and idx[0] >= 0 and idx[-1] < len(g.releases[st.engine])
        path, _, line = st.at.rpartition(":")
        assert path.endswith(".py") and int(line) > 0


RULES_WITH_STATEMENTS = [r for r in RULES if r.statement is not None]


@pytest.mark.parametrize("rule", RULES_WITH_STATEMENTS, ids=[r.id for r in RULES_WITH_STATEMENTS])
def test_each_rule_reads_the_statement_of_every_release_that_writes_it(rule):
    g = load()
    rows = rule_statements(g, rule.engine, rule.statement, rule.levels)
    assert rows, f"{rule.id}: no release of {rule.engine} writes a statement its key {rule.statement!r} finds"
    for template, releases, at, exception in rows:
        lines = as_logged(template, exception, rule.fill)
        hits = [x for x in lines if rule.regex.search(x)]
        assert hits, f"{rule.id} does not read {template!r} ({releases}, {at})"
        for x in hits:  # the rule's trigger literal is in what it reads (the scan finds it)
            assert any(t in x for t in rule.triggers), (rule.id, x)


def test_the_rules_section_is_the_table_read_with_these_rules(table):
    """Regenerated with ``python -m workbench.logs.grammar_build --rules-only`` after a rule changes."""
    assert table["rules"] == grammar_build.rules_section(table)


def test_changed_messages_are_known_by_release(table):
    """Messages the releases changed, as the table tells them (read from the wheels, not written here)."""
    weights = {t: r for t, r, _, _ in table["rules"]["sglang.weights_end"]}
    assert weights["Load weight end. type={}, dtype={}, avail mem={:.2f} GB, mem usage={:.2f} GB."].startswith("0.4.9-")
    assert any(t.startswith("Load weight end. elapsed=") for t in weights)
    serving = {t: r for t, r, _, _ in table["rules"]["vllm.serving"]}
    assert serving["Starting vLLM API server on http{}://{}:{:d}"].startswith("0.9.0")
    assert serving["Starting vLLM server on {}"].endswith("0.34.0") or "0.3" in serving["Starting vLLM server on {}"]
    spec = [t for t, _, _, _ in table["rules"]["vllm.drafter_begin"]]
    assert spec == ["Loading drafter model..."]


def test_the_table_is_what_the_extractor_reads_from_the_installed_sglang():
    """The newest SGLang in the table is the one installed here: its statements in the files the rules
    read, line for line, are the table's for that release."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("sglang")  # found, not imported (its package imports CUDA kernels)
    assert spec is not None and spec.submodule_search_locations, "the test environment installs SGLang"
    root = Path(next(iter(spec.submodule_search_locations))).parent
    version = importlib.metadata.version("sglang")
    g = load()
    assert version == g.releases["sglang"][-1], "the installed SGLang is not the table's newest release"
    last = len(g.releases["sglang"]) - 1
    files = sorted(
        {
            st.at.rpartition(":")[0]
            for r in RULES_WITH_STATEMENTS
            if r.engine == "sglang"
            for st in g.of("sglang", r.statement)
            if last in st.release_indices()
        }
    )
    assert len(files) >= 8
    for rel in files:
        text = (root / "sglang" / rel).read_text(encoding="utf-8")
        read = {(s.level, s.template, s.line) for s in statements.read(text, rel)}
        table = {
            (st.level, st.template, int(st.at.rpartition(":")[2]))
            for st in g.statements
            if st.engine == "sglang" and st.at.rpartition(":")[0] == rel and last in st.release_indices()
        }
        assert table <= read, (rel, sorted(table - read)[:3])


def test_a_line_is_known_by_the_statement_that_wrote_it():
    g = load()
    st = g.match("vllm", "Using auxiliary layers from speculative config: (1, 5, 8)")
    assert st is not None and st.level == "info" and "gpu_model_runner.py" in st.at
    st = g.match("sglang", "Cache flushed successfully!")
    assert st is not None and st.level == "info"
    warn = g.match(
        "sglang",
        "Warning: Target model's context_length (8192) is greater than the derived "
        "context_length (2048). This may lead to incorrect model outputs or CUDA errors. Note that "
        "the derived context_length may differ from max_position_embeddings in the model's config.",
    )
    assert warn is not None and warn.level == "warning"
    assert g.match("sglang", "a line no release of SGLang writes") is None
    assert g.match("vllm", "Cache flushed successfully!") is None  # an SGLang line is not vLLM's


# -- the extractor ---------------------------------------------------------------------------------------
SOURCE = """
import logging
logger = logging.getLogger(__name__)

def load(self, n, t):
    logger.info(f"Load weight begin. avail mem={t:.2f} GB")
    logger.info("Loaded %d shards in %.1f s", n, t)
    logger.warning("Context {} for {}".format(n, t))
    print_warning_once(f"only once: {n!r}")
    log_info_on_rank0(logger, "rank0 only " + str(n))

def decode(self, spec, dp):
    msg = f"Decode batch [{self.ct}], #running-req: {self.n}, "
    if spec:
        msg += f"accept len: {self.al:.2f}, "
    msg += f"#queue-req: {self.q}"
    logger.info(msg)

def metrics(self, log_fn=logger.info):
    parts = ["Avg prompt throughput: %.1f tokens/s", "Running: %d reqs"]
    if self.pre:
        parts.append("Preemptions: %d")
    log_fn(self.prefix + ", ".join(parts), *self.args)

def fail(self, c, d):
    msg = f"Warning: {self.who} context_length ({c}) is greater than the derived context_length ({d})."
    raise ValueError(f"{msg} To allow overriding this maximum, set the env var X=1")

def died(rank, code):
    return RuntimeError(f"Rank {rank} scheduler died during initialization (exit code: {code}).")

def banner(lgr: Logger, version, plain):
    if plain:
        message = "server version %s"
    else:
        logo = Template("\\n  ${w}##${r}\\n  ${w}###${r}  version ${w}%s${r}\\n")
        message = logo.substitute(colors)
    lgr.info(message, version)
"""


def test_the_extractor_reads_the_ways_messages_are_built():
    got = {(s.level, s.template): s for s in statements.read(SOURCE)}
    assert ("info", "Load weight begin. avail mem={:.2f} GB") in got
    assert ("info", "Loaded {:d} shards in {:.1f} s") in got
    assert ("warning", "Context {} for {}") in got
    assert ("warning", "only once: {!r}") in got
    assert ("info", "rank0 only {}") in got
    dec = got["info", "Decode batch [{}], #running-req: {}, accept len: {:.2f}, #queue-req: {}"]
    assert [(p.template, p.optional) for p in dec.pieces] == [
        ("Decode batch [{}], #running-req: {}, ", False),
        ("accept len: {:.2f}, ", True),
        ("#queue-req: {}", False),
    ]
    met = got["info", "{}Avg prompt throughput: {:.1f} tokens/s, Running: {:d} reqs, Preemptions: {:d}"]
    assert [p.optional for p in met.pieces] == [False, False, False, True]
    raised = got[
        "raise",
        "Warning: {} context_length ({}) is greater than the derived context_length ({})."
        " To allow overriding this maximum, set the env var X=1",
    ]
    assert raised.exception == "ValueError" and raised.line == 27
    assert got["raise", "Rank {} scheduler died during initialization (exit code: {})."].exception == "RuntimeError"
    # a message chosen in branches, one of them a string.Template, logged through a parameter typed Logger
    assert ("info", "server version {}") in got
    assert ("info", "\n  {}##{}\n  {}###{}  version {}{}{}\n") in got


def test_a_message_of_several_lines_is_known_line_by_line():
    data = {
        "generator": "test",
        "engines": {
            "vllm": {
                "releases": ["0.1"],
                "statements": [
                    {"level": "info", "t": "\n  {}##{}\n  {}###{}  version {}{}{}\n", "r": "0", "at": "u.py:9"},
                    {"level": "raise", "exception": "RuntimeError", "t": "Bad thing {}\nTry the other flag",
                     "r": "0", "at": "u.py:20"},
                ],
            }
        },
    }  # fmt: skip
    g = Grammar(data)
    assert g.match("vllm", "###  version 0.19.0").at == "u.py:9"
    assert g.match("vllm", "RuntimeError: Bad thing 7").exception == "RuntimeError"
    assert g.match("vllm", "Try the other flag").level == "raise"
    assert g.match("vllm", "##") is None  # too little text to say which statement wrote it


def test_the_build_reads_each_release_of_a_wheel_once_per_statement(tmp_path, monkeypatch):
    """Two releases of a made-up engine: a statement kept, one changed, one added; releases as ranges,
    file:line of the newest, the rules' section beside."""
    wheels = {}
    for version, body in (
        ("1.0", 'logger.info("Load weight begin. avail mem=%.2f GB", x)\nlogger.info("old form")\n'),
        ("1.1", '\nlogger.info("Load weight begin. avail mem=%.2f GB", x)\nlogger.info("new form %d", 1)\n'),
    ):
        w = tmp_path / f"sglang-{version}.whl"
        with zipfile.ZipFile(w, "w") as z:
            z.writestr("sglang/srt/runner.py", "import logging\nlogger = logging.getLogger()\n" + body)
            z.writestr("sglang/srt/test/ignored.py", 'logger.info("not read")\n')
        wheels[version] = w
    monkeypatch.setattr(grammar_build, "wheel", lambda engine, v: wheels[v])
    out = tmp_path / "grammar.json"
    data = grammar_build.build({"sglang": ["1.1", "1.0"]}, out, log=open("/dev/null", "w"))  # noqa: SIM115
    rows = {r["t"]: r for r in data["engines"]["sglang"]["statements"]}
    assert data["engines"]["sglang"]["releases"] == ["1.0", "1.1"]
    assert rows["Load weight begin. avail mem={:.2f} GB"]["r"] == "0-1"
    assert rows["Load weight begin. avail mem={:.2f} GB"]["at"] == "srt/runner.py:4"
    assert rows["old form"]["r"] == "0" and rows["new form {:d}"]["r"] == "1"
    assert "not read" not in rows
    assert json.loads(out.read_text()) == data
    g = Grammar(data)
    assert g.match("sglang", "Load weight begin. avail mem=12.00 GB").at == "srt/runner.py:4"
    assert data["rules"]["sglang.weights_begin"] == [
        ["Load weight begin. avail mem={:.2f} GB", "1.0-1.1", "srt/runner.py:4", ""]
    ]


def test_every_rule_compiles_and_names_where_its_text_comes_from():
    for r in RULES:
        assert (r.statement is None) != (r.source is None), r.id  # the engine's own statement, or a named source
        r.regex  # noqa: B018 - compiles
        assert r.kind in ("milestone", "ready", "warning", "failure", "metrics"), r.id
        ast.parse(repr(r.pattern))
