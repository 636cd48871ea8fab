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


def test_workspace_bad_toml_is_one_line_where_a_section_is_needed(tmp_path):
    """A broken workbench.toml fails what needs hosts or profiles, with one line naming the file;
    opening the workspace (and work that needs no section) goes on."""
    (tmp_path / "workbench.toml").write_text("[hosts\n")
    ws = Workspace.open(tmp_path)
    assert "workbench.toml" in ws.settings_error and "\n" not in ws.settings_error
    with pytest.raises(InputError) as err:
        ws.section("hosts")
    assert str(err.value) == ws.settings_error


def test_workspace_section_type_checked(tmp_path):
    (tmp_path / "workbench.toml").write_text("hosts = 3\n")
    with pytest.raises(InputError, match=r"\[hosts\] must be a table"):
        Workspace.open(tmp_path).section("profiles")


def test_workspace_follows_its_file(tmp_path):
    """Settings are read again when workbench.toml changes: mended, broken, removed."""
    path = tmp_path / "workbench.toml"
    path.write_text("[hosts\n")
    ws = Workspace.open(tmp_path)
    assert ws.settings_error
    path.write_text('[hosts.gpu]\naddress = "10.0.0.2"\n')
    assert ws.settings_error is None and ws.section("hosts")["gpu"]["address"] == "10.0.0.2"
    path.unlink()
    assert ws.section("hosts") == {}


def test_workspace_env_default(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE_WORKBENCH_HOME", str(tmp_path / "home"))
    ws = Workspace.open()
    assert ws.root == (tmp_path / "home").resolve()
    assert ws.journal_path.parent.is_dir()


def test_revision_moves_with_every_commit_from_anywhere(tmp_path):
    """The faces follow the journal by its revision: a write from this thread, another thread or
    another connection (another process) moves it; reading does not."""
    import sqlite3
    import threading

    j = Journal(tmp_path / "j.sqlite3")
    r0 = j.revision()
    j.events()
    assert j.revision() == r0
    j.record("predict", "a")
    r1 = j.revision()
    assert r1 != r0
    t = threading.Thread(target=lambda: j.record("config.set", "b"))
    t.start()
    t.join()
    r2 = j.revision()
    assert r2 != r1
    other = sqlite3.connect(tmp_path / "j.sqlite3", isolation_level=None)
    other.execute("UPDATE events SET subject = 'c' WHERE id = 1")
    other.close()
    assert j.revision() != r2
    j.close()
