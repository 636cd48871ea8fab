"""Workbench methods for draft-config history (track, set, diff, revert)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.confirm import Plan, require
from workbench.facade.base import WorkbenchBase

if TYPE_CHECKING:
    from workbench.configs import ConfigStore
    from workbench.configs.access import FileAccess
    from workbench.configs.history import ConfigChange, ConfigDiff, ConfigHistory, ConfigShow, TrackedConfig
    from workbench.doctor.findings import Finding, Fix

    FixLike = Fix | Finding | dict[str, Any] | None


class ConfigsAPI(WorkbenchBase):
    """Every version of a tracked config is kept in the journal; writes are atomic and
    compare-and-swap; an edit made outside the workbench is stored before any write."""

    @property
    def _configs(self) -> ConfigStore:
        """The config history over the journal (the operations below are its public face)."""
        from workbench.configs import ConfigStore

        store = self.__dict__.get("_config_store")
        if store is None:
            store = self.__dict__["_config_store"] = ConfigStore(self.journal, self._config_access)
        return store

    def _config_access(self, host: str) -> FileAccess:
        """Local paths directly; ``HOST:/path`` through the workspace's hosts (SSH or local)."""
        from workbench.configs.access import LOCAL, HostFiles, LocalFiles

        if host == LOCAL and "local" not in self.workspace.section("hosts"):
            return LocalFiles()
        return HostFiles(self._hosts.get(host))

    def config_track(self, path: str, label: str = "") -> TrackedConfig:
        """Start keeping every version of ``path`` (a local path or ``HOST:/path``): its content now
        is version 1 (tracking a tracked file stores an outside edit, if any). ``label`` names it in
        listings. Journaled as ``config.track``."""
        result = self._configs.track(path, label)
        self._record("config.track", result.location, {"label": label, "versions": result.versions})
        return result

    def config_list(self) -> list[TrackedConfig]:
        """Tracked files; those declared under ``[configs]`` in workbench.toml are tracked on first look
        (``name = "/abs/path/config.json"`` or ``name = {path = "...", host = "..."}``)."""
        from workbench.configs import TrackedConfig
        from workbench.errors import WorkbenchError

        problems: list[TrackedConfig] = []
        for name, entry in self.workspace.section("configs").items():
            path = entry.get("path") if isinstance(entry, dict) else entry
            host = entry.get("host", "local") if isinstance(entry, dict) else "local"
            if not isinstance(path, str):
                continue
            location = path if host == "local" else f"{host}:{path}"
            try:
                if self._configs._row(_location(location)) is None:
                    self.config_track(location, label=str(name))
            except WorkbenchError as exc:
                problems.append(TrackedConfig(0, _location(location), str(name), 0.0, 0, state=f"error: {exc}"))
        return self._configs.list() + problems

    def config_history(self, path: str) -> ConfigHistory:
        """Every stored version of a tracked file, oldest first; looking stores an edit made outside
        the workbench as a version first (journaled as ``config.sync``)."""
        result = self._configs.history(path)
        if result.config.state != "clean":
            self._record("config.sync", result.config.location, {"state": result.config.state})
        return result

    def config_show(self, path: str, version: int | str | None = None) -> ConfigShow:
        """One stored version's content. ``version``: its number (``3`` or ``"v3"``), ``"latest"``
        (the default), ``"previous"``, a sha256 prefix, or a negative number counting back from the
        newest (-1 is the newest)."""
        return self._configs.show(path, version)

    def config_diff(self, path: str, a: int | str | None = None, b: int | str | None = None) -> ConfigDiff:
        """The unified diff from version ``a`` to ``b`` (spelled as for ``config_show``; default:
        the one before ``b``, to the newest)."""
        return self._configs.diff(path, a, b)

    def config_set(
        self,
        path: str,
        assignments: dict[str, Any] | list[str | tuple[str, Any]],
        *,
        reason: str | None = None,
        force: bool = False,
        delete: list[str] | None = None,
        add: bool = False,
    ) -> ConfigChange:
        """Set dotted keys, e.g. ``{"eagle_config.eagle_aux_hidden_state_layer_ids": [2, 30, 58]}``
        or ``["key=JSON", ...]``. Not destructive: the previous version stays one revert away. A key
        the file does not have is refused with a did-you-mean unless ``add`` (or ``force``)."""
        from workbench.configs import parse_assignment
        from workbench.errors import InputError

        try:
            if isinstance(assignments, dict):
                pairs = list(assignments.items())
            else:
                pairs = [parse_assignment(a) if isinstance(a, str) else (a[0], a[1]) for a in assignments]
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
        change = self._configs.set(path, pairs, reason=reason, force=force, deletions=delete, add=add)
        self._record(
            "config.set",
            change.location,
            {
                "version": change.version.number,
                "reason": change.version.reason,
                "changed": change.changed,
                "external_edit": change.external_edit is not None,
            },
        )
        return change

    def config_revert_plan(self, path: str, to: int | str) -> Plan:
        """What ``config_revert`` would write: the target version and the diff from the file's
        content now (``to`` spelled as ``config_show``'s ``version``)."""
        v, diff, _ = self._configs.revert_plan_details(path, to)
        from workbench.configs import location_of

        loc = location_of(path)
        return Plan(
            "revert",
            loc,
            f"revert {loc} to v{v.number} ({v.sha256[:12]}, {v.reason})",
            diff.splitlines() or ["(no change: the file already holds that version)"],
        )

    def config_revert(self, path: str, to: int | str, *, confirm: bool = False) -> ConfigChange:
        """Write version ``to`` back byte for byte, as a new version (nothing is lost: the version
        it replaces stays one revert away). Destructive: without ``confirm=True`` it raises
        ``ConfirmationRequired`` with the plan. Journaled as ``config.revert``."""
        require(self.config_revert_plan(path, to), confirm)
        change = self._configs.revert(path, to)
        self._record(
            "config.revert",
            change.location,
            {"to": str(to), "version": change.version.number, "sha256": change.version.sha256},
        )
        return change

    def config_fix_plan(self, fix: FixLike) -> Plan:
        """What applying a doctor fix would write (a diff against the file as it is now)."""
        from workbench.configs import location_of, unified_diff
        from workbench.configs.access import parse_location
        from workbench.configs.jsonedit import delete_key, set_key
        from workbench.errors import InputError

        fix = _as_fix(fix)
        if not fix.applicable or fix.file is None:
            raise InputError(f"fix {fix.summary!r}: not a config edit (change the launch command instead)")
        host, p = parse_location(fix.file)
        current = self._config_access(host).read_bytes(p)
        if current is None:
            raise InputError(f"{p}: no such file")
        text = current.decode("utf-8")
        for e in fix.edits:
            text = delete_key(text, e.key, name=p) if e.delete else set_key(text, e.key, e.value, name=p)
        diff = unified_diff(current, text.encode("utf-8"), "current", "fixed")
        return Plan("overwrite", location_of(fix.file), f"apply fix to {p}: {fix.summary}", diff.splitlines())

    def config_apply_fix(self, fix: FixLike, *, confirm: bool = False) -> ConfigChange:
        """Write a doctor fix (a ``Fix``, the ``Finding`` that carries it, or its ``to_dict()``)
        through the config history, the fix as the version's reason; a key the config lacks is
        added. Destructive: without ``confirm=True`` it raises ``ConfirmationRequired`` with the
        plan (``config_fix_plan``). Journaled as ``config.fix``."""
        fix = _as_fix(fix)
        require(self.config_fix_plan(fix), confirm)  # refuses a fix that edits no file
        assert fix.file is not None
        sets = [(e.key, e.value) for e in fix.edits if not e.delete]
        dels = [e.key for e in fix.edits if e.delete]
        change = self._configs.set(
            fix.file, sets, reason=f"doctor fix: {fix.summary}", deletions=dels, add=True
        )  # a fix may add the key a config lacks
        self._record("config.fix", change.location, {"fix": fix.to_dict(), "version": change.version.number})
        return change


def _location(text: str) -> str:
    from workbench.configs import location_of

    return location_of(text)


def _as_fix(fix: FixLike) -> Fix:
    from workbench.doctor import ConfigEdit, Finding, Fix

    if isinstance(fix, Finding):
        fix = fix.fix
    if isinstance(fix, dict):
        fix = Fix(
            fix.get("summary", ""),
            fix.get("file"),
            [ConfigEdit(e["key"], e.get("value"), e.get("delete", False)) for e in fix.get("edits", [])],
            list(fix.get("launch", [])),
        )
    if fix is None:
        from workbench.errors import InputError

        raise InputError("this finding has no fix to apply")
    return fix
