"""Config history: track, set by key, diff, revert (byte for byte), external edits, compare-and-swap."""

import json
import shutil

import pytest

from tests.fixtures.drafts import KIMI_DRAFT
from workbench.configs import ConfigStore, ConflictError, LocalFiles, sha256
from workbench.errors import ConfirmationRequired, InputError

IDS = "eagle_config.eagle_aux_hidden_state_layer_ids"


@pytest.fixture
def cfg(tmp_path):
    d = tmp_path / "draft"
    shutil.copytree(KIMI_DRAFT, d)
    return d / "config.json"


def test_track_set_diff_revert_byte_for_byte(wb, cfg):
    original = cfg.read_bytes()
    t = wb.config_track(str(cfg), "kimi draft")
    assert t.versions == 1 and t.location == f"local:{cfg}"
    change = wb.config_set(str(cfg), {IDS: [-1, 2, 30]})
    assert change.version.number == 2 and change.version.parent_sha256 == sha256(original)
    assert json.loads(cfg.read_text())["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [-1, 2, 30]
    # only the edited value changed: same keys in the same order, same indentation elsewhere
    old_lines, new_lines = original.decode().splitlines(), cfg.read_text().splitlines()
    assert len(new_lines) == len(old_lines)
    assert [line for line in new_lines if line not in old_lines] == ["      -1,", "      30"]
    diff = wb.config_diff(str(cfg), 1, 2).diff
    assert "+      -1," in diff and "-      58" in diff
    with pytest.raises(ConfirmationRequired) as err:
        wb.config_revert(str(cfg), 1)
    assert "revert" in err.value.plan.summary and any("58" in d for d in err.value.plan.details)
    assert cfg.read_bytes() != original  # nothing happened without confirm
    back = wb.config_revert(str(cfg), 1, confirm=True)
    assert cfg.read_bytes() == original and back.version.sha256 == sha256(original)
    assert [v.reason for v in wb.config_history(str(cfg)).versions] == [
        "tracked",
        "set eagle_config.eagle_aux_hidden_state_layer_ids=[-1, 2, 30]",
        "revert to v1",
    ]
    kinds = [e.kind for e in wb.events(kind="config.*")]
    assert kinds == ["config.track", "config.set", "config.revert"]


def test_revert_with_an_external_edit_in_between(wb, cfg):
    original = cfg.read_bytes()
    wb.config_track(str(cfg))
    wb.config_set(str(cfg), {IDS: [-1, 2, 30]})
    # someone edits the file by hand (vim, sed, another tool)
    edited = cfg.read_text().replace('"use_aux_hidden_state": true', '"use_aux_hidden_state": false')
    cfg.write_text(edited)
    plan = wb.config_revert_plan(str(cfg), 1)  # looking stores the edit already
    history = wb.config_history(str(cfg)).versions
    assert [v.reason for v in history] == [
        "tracked",
        "set eagle_config.eagle_aux_hidden_state_layer_ids=[-1, 2, 30]",
        "external edit",
    ]
    assert wb.configs.blob(history[-1].sha256) == edited.encode()
    assert any('"use_aux_hidden_state": true' in d for d in plan.details)
    wb.config_revert(str(cfg), 1, confirm=True)
    assert cfg.read_bytes() == original
    # the hand edit is still there, one revert away
    wb.config_revert(str(cfg), 3, confirm=True)
    assert cfg.read_text() == edited


def test_set_notices_external_edit_first(wb, cfg):
    wb.config_track(str(cfg))
    cfg.write_text(cfg.read_text().replace("163584", "1"))
    change = wb.config_set(str(cfg), {"draft_vocab_size": 16000})
    assert change.external_edit is not None and change.external_edit.reason == "external edit"
    assert change.version.parent_sha256 == change.external_edit.sha256
    assert '"bos_token_id": 1,' in cfg.read_text() and '"draft_vocab_size": 16000' in cfg.read_text()


class _RacingFiles(LocalFiles):
    """Another writer changes the file between our read and our write."""

    def write_cas(self, path, data, expected_sha256):
        with open(path, "ab") as fh:
            fh.write(b" ")
        return super().write_cas(path, data, expected_sha256)


def test_compare_and_swap_refuses_and_keeps_the_other_write(wb, cfg):
    store = ConfigStore(wb.journal, lambda host: _RacingFiles())
    store.track(str(cfg))
    with pytest.raises(ConflictError) as err:
        store.set(str(cfg), [(IDS, [1, 29, 57])])
    assert "changed on disk" in str(err.value) and "nothing written" in str(err.value)
    assert cfg.read_bytes().endswith(b"} \n") or cfg.read_bytes().endswith(b"\n ")
    assert b"58" in cfg.read_bytes()  # our edit did not land
    versions = store.history(str(cfg)).versions
    assert versions[-1].reason == "external edit" and versions[-1].sha256 == sha256(cfg.read_bytes())


def test_cas_on_local_files_directly(tmp_path):
    p = tmp_path / "f.json"
    p.write_bytes(b"{}")
    acc = LocalFiles()
    with pytest.raises(ConflictError):
        acc.write_cas(str(p), b'{"a": 1}', sha256(b"something else"))
    with pytest.raises(ConflictError):
        acc.write_cas(str(p), b'{"a": 1}', None)  # None means: must not exist
    acc.write_cas(str(p), b'{"a": 1}', sha256(b"{}"))
    assert p.read_bytes() == b'{"a": 1}'
    assert [x.name for x in tmp_path.iterdir()] == ["f.json"]  # no temp files left behind


def test_file_mode_is_kept(wb, cfg):
    cfg.chmod(0o600)
    wb.config_set(str(cfg), {"draft_vocab_size": 16000})
    assert cfg.stat().st_mode & 0o777 == 0o600


def test_formatting_kept_for_other_styles(wb, tmp_path):
    p = tmp_path / "c.json"
    text = '{\n    "a": [1, 2, 3],\n    "name": "caf\u00e9",\n    "x": {"y": 1e-06}\n}'  # 4 spaces, no final newline
    p.write_text(text, encoding="utf-8")
    wb.config_set(str(p), ["a=[4,5]", "x.z=true", 'name="bar"'], add=True)
    assert p.read_text() == '{\n    "a": [4, 5],\n    "name": "bar",\n    "x": {"y": 1e-06, "z": true}\n}'
    wb.config_revert(str(p), 1, confirm=True)
    assert p.read_text(encoding="utf-8") == text


def test_missing_file_restored_by_revert(wb, cfg):
    original = cfg.read_bytes()
    wb.config_track(str(cfg))
    cfg.unlink()
    assert wb.config_history(str(cfg)).config.state == "missing"
    with pytest.raises(InputError, match="gone"):
        wb.config_set(str(cfg), {"draft_vocab_size": 1})
    wb.config_revert(str(cfg), 1, confirm=True)
    assert cfg.read_bytes() == original


def test_version_references(wb, cfg):
    wb.config_track(str(cfg))
    wb.config_set(str(cfg), {"draft_vocab_size": 1})
    wb.config_set(str(cfg), {"draft_vocab_size": 2})
    s = wb.configs
    assert s.resolve(str(cfg), "latest").number == 3
    assert s.resolve(str(cfg), "previous").number == 2
    assert s.resolve(str(cfg), "v1").number == 1 and s.resolve(str(cfg), -1).number == 3
    v2 = s.resolve(str(cfg), 2)
    assert s.resolve(str(cfg), v2.sha256[:10]).number == 2
    assert json.loads(wb.config_show(str(cfg), 2).text)["draft_vocab_size"] == 1
    assert s.value(str(cfg), "draft_vocab_size", 3) == 2
    for bad in (0, 9, "v99", "zzz", "previous-ish"):
        with pytest.raises(InputError):
            s.resolve(str(cfg), bad)


def test_same_content_set_is_not_a_new_version(wb, cfg):
    wb.config_track(str(cfg))
    change = wb.config_set(str(cfg), {IDS: [2, 30, 58]})
    assert not change.changed and wb.config_history(str(cfg)).config.versions == 1


def test_blobs_are_content_addressed_and_shared(wb, cfg):
    wb.config_track(str(cfg))
    wb.config_set(str(cfg), {IDS: [1, 29, 57]})
    wb.config_revert(str(cfg), 1, confirm=True)
    n_blobs = wb.journal.db.execute("SELECT count(*) FROM blobs").fetchone()[0]
    assert n_blobs == 2 and wb.config_history(str(cfg)).config.versions == 3


@pytest.mark.parametrize(
    "args,needle",
    [
        ({IDS: "2,30,58"}, "expected a list of integers"),
        ({"tie_word_embeddings": "false"}, "true or false"),
        ({"max_position_embeddings": -4}, "positive integer"),
    ],
)
def test_wrong_types_refused_unless_forced(wb, cfg, args, needle):
    with pytest.raises(InputError, match=needle):
        wb.config_set(str(cfg), args)
    wb.config_set(str(cfg), args, force=True)


def test_bad_input_one_line(wb, tmp_path, cfg):
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1,, }')
    for call in (
        lambda: wb.config_set(str(bad), {"a": 2}),
        lambda: wb.config_track(str(tmp_path / "nope.json")),
        lambda: wb.config_revert(str(cfg), 1, confirm=True),  # not tracked
        lambda: wb.config_set(str(cfg), ["no-equals-sign"]),
        lambda: wb.config_set(str(cfg), ["a=2,30,58"]),
        lambda: wb.config_set(str(cfg), {"architectures.x": 1}),
        lambda: wb.config_set(str(cfg), {"eagle_config..x": 1}),
        lambda: wb.config_track(str(tmp_path)),
    ):
        with pytest.raises(InputError) as err:
            call()
        assert "\n" not in str(err.value)
    assert bad.read_text() == '{"a": 1,, }'


def test_configs_declared_in_workbench_toml_are_tracked(workspace, cfg):
    from workbench.api import Workbench

    (workspace / "workbench.toml").write_text(
        f'[configs]\nkimi = "{cfg}"\nother = {{ path = "{cfg.parent}/missing.json" }}\n'
    )
    with Workbench.open(workspace) as wb:
        listed = wb.config_list()
        assert [(t.label, t.versions) for t in listed if t.versions] == [("kimi", 1)]
        assert any(t.state.startswith("error:") and "missing.json" in t.state for t in listed)
        assert len(wb.config_list()) == 2  # tracked once, not again


def test_host_locations_go_through_the_hosts_interface(workspace, cfg):
    """``HOST:/path`` plugs in through workbench.hosts; a local-kind host stands in for SSH here."""
    from workbench.api import Workbench

    (workspace / "workbench.toml").write_text('[hosts.box]\nkind = "local"\n')
    original = cfg.read_bytes()
    with Workbench.open(workspace) as wb:
        loc = f"box:{cfg}"
        t = wb.config_track(loc)
        assert t.location == loc
        wb.config_set(loc, {IDS: [-1, 2, 30]})
        cfg.write_text(cfg.read_text() + " ")  # an edit made on the host
        assert wb.config_history(loc).versions[-1].reason == "external edit"
        wb.config_revert(loc, 1, confirm=True)
        assert cfg.read_bytes() == original
        with pytest.raises(InputError, match="no host 'nowhere'"):
            wb.config_track(f"nowhere:{cfg}")
