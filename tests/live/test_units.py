"""The live loop's pure parts: ranking, the payload verdict, engine names, report JSON, the
comparison from the journal, and the CLI's argument rules."""

from __future__ import annotations

import json
import time

import pytest

from workbench.doctor.findings import ConfigEdit, Finding, Fix
from workbench.live.doctor import SAME_MAX, _diff_text, _same_as_engine, engine_of
from workbench.live.report import LiveReport, RankedFinding, rank
from workbench.live.types import (
    AlignedSlot,
    Alignment,
    Draft,
    Features,
    LayerRecommendation,
    Observed,
    Predicted,
    Spec,
    Target,
)


def _f(code, sev="error", fix=None):
    return Finding(code, sev, f"{code} happened", {"x": 1}, fix)


def test_rank_puts_the_biggest_share_of_the_gap_first():
    r = rank(
        [
            RankedFinding(_f("layer-ids-embedding"), "static"),
            RankedFinding(_f("tied-embeddings", "warning"), "static"),
            RankedFinding(_f("layer-ids-engine-mismatch"), "hidden states", explains=0.8, share=0.9),
            RankedFinding(_f("draft-context-too-short"), "static", explains=0.1),
        ]
    )
    assert [x.code for x in r] == [
        "layer-ids-engine-mismatch",
        "draft-context-too-short",
        "layer-ids-embedding",
        "tied-embeddings",
    ]


def _al(values, cands, cols=("p[0]", "p[1]", "p[2]"), phys=("out(2)", "out(5)", "out(7)"), verdict="match"):
    return Alignment.from_dict(
        {
            "cols": list(cols),
            "cols_physical": list(phys),
            "best": [
                {
                    "slot": f"aux[{i}]",
                    "candidate": c,
                    "value": v,
                    "verdict": verdict,
                    "physical": phys[list(cols).index(c)],
                }
                for i, (v, c) in enumerate(zip(values, cands))
            ],
        }
    )


def test_payload_verdict_needs_each_slot_at_its_own_part_at_noise_level():
    assert _same_as_engine(_al([2e-5, 3e-5, 4e-5], ["p[0]", "p[1]", "p[2]"]))
    # an adjacent layer below the generic match threshold is still not the same state
    near = _al([2e-5, 3e-5, 4.1e-3], ["p[0]", "p[1]", "p[2]"])
    assert SAME_MAX < 4.1e-3 and not _same_as_engine(near)
    assert "slot 2 vs the engine's out(7): rel_diff 0.0041" in _diff_text(near)
    moved = _al([2e-5, 3e-5, 4e-5], ["p[1]", "p[2]", "p[2]"])
    assert not _same_as_engine(moved)
    assert "slot 0 is closest to the engine's slot 1 out(5)" in _diff_text(moved)


def test_engine_names_from_server_info_versions():
    assert engine_of("0.5.23") == "sglang==0.5.23"
    assert engine_of("0.5.12.post1") == "sglang==0.5.12.post1"
    assert engine_of(None) == "sglang" and engine_of("weird") == "sglang"


def test_report_json_round_trip_and_text():
    fix = Fix("set ids", "gpu:/d/config.json", [ConfigEdit("eagle_config.eagle_aux_hidden_state_layer_ids", [1, 4, 6])])
    rf = RankedFinding(_f("layer-ids-engine-mismatch", fix=fix), "hidden states", 0.85, 1.0)
    rep = LiveReport(
        3,
        "story",
        "gpu",
        "ready",
        "sglang==0.5.23",
        "0.5.23",
        Spec(steps=5),
        Target(num_layers=10),
        Draft(ids=[-1, 1, 4]),
        Observed(2.2, source="protocol"),
        Predicted(2.9, source="drafter"),
        0.7,
        Features(train_accept_length=3.2, live_accept_length=2.35, explains=0.85, samples=2),
        Alignment(
            "dump",
            best=[AlignedSlot(slot="aux[0]", physical="out(1)", value=2e-6, verdict="match")],
            tokens_compared=256,
        ),
        [rf],
        fix,
    )
    d = json.loads(json.dumps(rep.to_dict()))
    assert d["findings"][0]["explains"] == 0.85 and d["findings"][0]["fix"]["edits"][0]["value"] == [1, 4, 6]
    back = LiveReport.from_dict(d)
    assert back.findings[0].code == "layer-ids-engine-mismatch" and back.fix.file == "gpu:/d/config.json"
    text = rep.text()
    assert "observed 2.20" in text and "predicted 2.90" in text and "the features cost 0.85" in text
    assert "1. ERROR   layer-ids-engine-mismatch (explains 0.85, 100% of the gap)" in text


def test_compare_reads_measurements_and_loaded_configs(wb):
    from workbench.live.fix import compare

    db = wb.journal.db
    shas = []
    for ids in ([-1, 1, 4], [1, 4, 6]):
        raw = json.dumps({"eagle_config": {"eagle_aux_hidden_state_layer_ids": ids}}).encode()
        import hashlib

        sha = hashlib.sha256(raw).hexdigest()
        db.execute("INSERT INTO blobs(sha256, content) VALUES (?, ?)", (sha, raw))
        shas.append(sha)
    ids = []
    for sha, al in zip(shas, (2.0, 3.1)):
        cur = db.execute(
            "INSERT INTO servers(profile, host, port, log_path, argv, env, draft_config_sha256, state, "
            "launched, extra) VALUES ('story', 'local', 1, '/x', '[]', '{}', ?, 'stopped', ?, '{}')",
            (sha, time.time()),
        )
        sid = cur.lastrowid
        ids.append(sid)
        db.execute(
            "INSERT INTO measurements(server_id, ts, kind, payload) VALUES (?, ?, 'protocol', ?)",
            (
                sid,
                time.time(),
                json.dumps({"server_accept_len": al, "accept_len": {"mean": al}, "tokens_per_s": 10.0 * al}),
            ),
        )
    cmp = compare(wb, *ids)
    assert cmp.value("accept length", "before") == 2.0 and cmp.value("accept length", "after") == 3.1
    assert [r for r in cmp.rows if r["name"] == "accept length"][0]["change"] == "x1.55"
    assert cmp.value("layer ids", "before") == [-1, 1, 4] and cmp.value("layer ids", "after") == [1, 4, 6]
    assert "accept length" in cmp.text()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["doctor"], "give --draft DIR"),
        (["doctor", "--server", "1", "--draft", "x"], "give one"),
        (["doctor", "--apply-fix", "--draft", "x"], "--apply-fix needs --server"),
        (["doctor", "--server", "7"], "server 7: no such server"),
        (["doctor", "--server", "1", "--dump", "maybe"], "invalid choice"),
    ],
)
def test_cli_rules_are_one_line(cli, workspace, args, needle):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_live_api_without_a_server_is_one_line(wb):
    from workbench.errors import InputError

    with pytest.raises(InputError, match="server 5: no such server"):
        wb.doctor_live(5)
    with pytest.raises(InputError, match="no live doctor report with a fix"):
        from workbench.live.fix import last_fix

        last_fix(wb, 5)


def test_static_layer_fixes_give_way_to_the_alignment():
    from workbench.live.doctor import _settle_fixes

    key = "eagle_config.eagle_aux_hidden_state_layer_ids"
    cfg = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [-1, 1, 3]}}
    restating = Fix("keep", "/d/config.json", [ConfigEdit(key, [-1, 1, 3])])
    alone = _settle_fixes([RankedFinding(_f("layer-ids-embedding", "warning", restating), "static")], cfg)
    assert alone[0].fix is None  # a fix that writes what is there is no fix
    named = Fix("set", "/d/config.json", [ConfigEdit(key, [1, 3, 4])])
    both = _settle_fixes(
        [
            RankedFinding(_f("layer-ids-embedding", "warning", restating), "static"),
            RankedFinding(_f("layer-ids-engine-mismatch", fix=named), "hidden states"),
        ],
        cfg,
    )
    assert both[0].fix is named and both[1].fix is named
    other = _settle_fixes([RankedFinding(_f("tied-embeddings", fix=restating), "static")], cfg)
    assert other[0].fix is restating  # only layer findings


def test_demo_prompts_follow_the_lab_world(lab_world, tmp_path):
    """The demo's measurement prompts are held-out documents of the world's own corpus; a prompt
    file left by another world is written again, one of this world is kept."""
    from transformers import AutoTokenizer

    from workbench.live.demo import write_prompts

    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({"name": "lab-tiny-0000000000000000-16", "prompts": ["stale"]}))
    write_prompts(lab_world, path)
    data = json.loads(path.read_text())
    assert data["name"].endswith(lab_world["dir"].rsplit("/", 1)[-1] + "-16") and len(data["prompts"]) == 16
    tok = AutoTokenizer.from_pretrained(lab_world["target"])
    for text in data["prompts"]:  # every word is in the lab's vocabulary
        assert tok.unk_token_id not in tok(text)["input_ids"], text
    stamp = path.stat().st_mtime_ns
    write_prompts(lab_world, path)
    assert path.stat().st_mtime_ns == stamp


def test_saved_report_round_trips_byte_for_byte_with_typed_parts():
    from pathlib import Path

    saved = json.loads((Path(__file__).with_name("data") / "story.json").read_text())["report"]
    rep = LiveReport.from_dict(saved)
    assert isinstance(rep.spec, Spec) and rep.spec.steps == saved["spec"]["steps"]
    assert isinstance(rep.observed, Observed) and rep.observed.accept_length == saved["observed"]["accept_length"]
    assert isinstance(rep.predicted, Predicted) and rep.predicted.acc == saved["predicted"]["acc"]
    assert isinstance(rep.features, Features) and rep.features.explains == saved["features"]["explains"]
    assert isinstance(rep.target, Target) and rep.target.num_layers == saved["target"]["num_layers"]
    assert isinstance(rep.draft, Draft) and rep.draft.ids == saved["draft"]["ids"]
    assert (
        isinstance(rep.alignment, Alignment) and [b.to_dict() for b in rep.alignment.best] == saved["alignment"]["best"]
    )
    assert (
        isinstance(rep.alignment.best[0], AlignedSlot)
        and rep.alignment.best[0].verdict == saved["alignment"]["best"][0]["verdict"]
    )
    assert isinstance(rep.alignment.recommendation, LayerRecommendation)
    assert rep.alignment.recommendation.layer_ids == saved["alignment"]["recommendation"]["layer_ids"]
    for name in ("spec", "target", "draft", "observed", "predicted", "features", "alignment"):
        assert json.dumps(rep.to_dict()[name]) == json.dumps(saved[name]), name
    again = json.loads(json.dumps(rep.to_dict()))
    assert LiveReport.from_dict(again) == rep


def test_parts_leave_out_the_keys_their_producer_left_out():
    # a key left out is not a null: each form the doctor writes comes back as it was written
    from workbench.errors import InputError

    forms = [
        (Observed, {"accept_length": None, "tokens_per_s": None, "source": "not measured"}),
        (
            Observed,
            {
                "accept_length": 2.0,
                "tokens_per_s": 90.5,
                "per_request": {"mean": 2.0, "stdev": 0.1, "min": 1.5, "max": 2.5},
                "source": "protocol",
            },
        ),
        (Observed, {"accept_length": 2.0, "tokens_per_s": 90.5, "per_request": None, "source": "protocol"}),
        (Predicted, {"accept_length": None, "source": None}),
        (Predicted, {"accept_length": 2.5, "acc": [0.7, 0.5], "source": "predictor"}),
        (Predicted, {"accept_length": None, "acc": None, "source": "drafter", "samples": None}),
        (Features, {}),
        (Features, {"verdict": "the server does not return hidden states"}),
        (Target, {"path": "/m", "arch": None, "num_layers": None}),
        (Spec, {"steps": 5, "future_key": {"a": 1}}),  # a key of another version is kept
    ]
    for cls, d in forms:
        part = cls.from_dict(d)
        assert json.dumps(part.to_dict()) == json.dumps(d), (cls.__name__, d)
        assert cls.from_dict(part.to_dict()) == part
    assert Observed(2.0, 90.0, source="x").to_dict() == {"accept_length": 2.0, "tokens_per_s": 90.0, "source": "x"}
    assert "per_request" in Observed(2.0, None, None, "x", absent=frozenset()).to_dict()
    assert Predicted().to_dict() == {"accept_length": None, "source": None}
    assert Features(explains=0.5).to_dict() == {"explains": 0.5}
    assert Observed(float("nan")).to_dict()["accept_length"] is None  # JSON-safe like every result
    with pytest.raises(InputError, match="observed: expected an object"):
        Observed.from_dict([1.0])


def test_a_saved_report_with_a_wrong_value_names_the_field():
    from pathlib import Path

    from workbench.errors import InputError

    saved = json.loads((Path(__file__).with_name("data") / "story.json").read_text())["report"]
    bad = [
        ("observed", "accept_length", "2.2", "observed.accept_length: expected a finite number"),
        ("observed", "accept_length", float("nan"), "observed.accept_length: expected a finite number"),
        ("spec", "steps", 2.5, "spec.steps: expected an integer"),
        ("spec", "steps", True, "spec.steps: expected an integer"),
        ("predicted", "acc", [0.7, "x"], r"predicted.acc\[1\]: expected a finite number"),
        ("features", "verdict", 3, "features.verdict: expected a string"),
        ("draft", "changed_since_launch", "no", "draft.changed_since_launch: expected true or false"),
        ("alignment", "best", {"slot": 1}, "alignment.best: expected a list"),
        ("alignment", "best", [{"slot": 1}], r"alignment.best\[0\].slot: expected a string"),
        ("alignment", "best", ["out(1)"], r"alignment.best\[0\]: expected an object"),
        (
            "alignment",
            "recommendation",
            {"layer_ids": ["1"]},
            r"alignment.recommendation.layer_ids\[0\]: expected an integer",
        ),
    ]
    for part, key, value, message in bad:
        d = json.loads(json.dumps(saved))
        d[part][key] = value
        with pytest.raises(InputError, match=message):
            LiveReport.from_dict(d)
    d = json.loads(json.dumps(saved))
    d["observed"]["accept_length"] = 3  # an integer is a number
    assert LiveReport.from_dict(d).observed.accept_length == 3
    # the doctor keeps what the host gave it (a config's odd value is its subject)
    assert Target.from_dict({"num_layers": "ten"}, check=False).num_layers == "ten"


def test_alignment_records_name_the_fields_of_what_the_host_job_writes():
    """AlignedSlot and LayerRecommendation are the JSON forms of hidden.results' SlotBest and
    Recommendation: the same keys in the same order, so a field added there is not silently
    demoted to an extra key here."""
    import dataclasses

    from workbench.hidden.results import Recommendation, SlotBest

    def keys(cls):
        return [f.name for f in dataclasses.fields(cls) if f.name not in ("absent", "extra")]

    assert keys(AlignedSlot) == keys(SlotBest)
    assert keys(LayerRecommendation) == keys(Recommendation)
