import pytest

from workbench.errors import InputError
from workbench.journal import MIGRATIONS, Journal
from workbench.workspace import Workspace


def test_journal_is_wal_and_migrated_once(tmp_path):
    j = Journal(tmp_path / "j.sqlite3")
    assert j.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert j.schema == sorted(MIGRATIONS)
    j.record("predict", "x", {"a": 1})
    j.close()
    j2 = Journal(tmp_path / "j.sqlite3")  # reopening applies nothing twice and keeps the data
    assert j2.schema == sorted(MIGRATIONS)
    ev = j2.events()
    assert [(e.kind, e.subject, e.payload) for e in ev] == [("predict", "x", {"a": 1})]


def test_journal_applies_new_migration_on_open(tmp_path, monkeypatch):
    Journal(tmp_path / "j.sqlite3").record("a")
    monkeypatch.setitem(MIGRATIONS, "9999_extra", "CREATE TABLE extra (x INTEGER)")
    j = Journal(tmp_path / "j.sqlite3")
    assert "9999_extra" in j.schema
    assert j.db.execute("SELECT count(*) FROM events").fetchone()[0] == 1


def test_journal_filters(tmp_path):
    j = Journal(tmp_path / "j.sqlite3")
    j.record("config.set", "a")
    j.record("config.revert", "a")
    j.record("predict", "b")
    assert [e.kind for e in j.events(kind="config.*")] == ["config.set", "config.revert"]
    assert [e.kind for e in j.events(subject="b")] == ["predict"]
    assert len(j.events(limit=1)) == 1


def test_workspace_bad_toml_is_one_line(tmp_path):
    (tmp_path / "workbench.toml").write_text("[hosts\n")
    with pytest.raises(InputError) as err:
        Workspace.open(tmp_path)
    assert "workbench.toml" in str(err.value) and "\n" not in str(err.value)


def test_workspace_section_type_checked(tmp_path):
    (tmp_path / "workbench.toml").write_text("hosts = 3\n")
    with pytest.raises(InputError, match=r"\[hosts\] must be a table"):
        Workspace.open(tmp_path)


def test_workspace_env_default(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_WORKBENCH_HOME", str(tmp_path / "home"))
    ws = Workspace.open()
    assert ws.root == (tmp_path / "home").resolve()
    assert ws.journal_path.parent.is_dir()
