"""Config history: every version of a tracked file kept content-addressed in the journal.

Rules that make "nothing is ever lost" true:
- before any write, the file on disk is compared with the last stored version; a difference is
  stored first as a version with reason "external edit";
- the new content's blob is stored before the file is written, and the version row after, so a
  crash in between leaves a file whose content is already in the blobs table (and is recorded as
  an external edit on the next look);
- writes are compare-and-swap: the file must still hold what was read, or nothing is written
  (``workbench.hosts.casfile``: one lock and one check-and-exchange for every write path);
- the intent (new sha, parent, reason) is journalled before the file is written, so a writer killed
  after the rename but before its version row is recognised on the next look by the hash: its
  version is recorded with its own reason, not as an "external edit";
- a version row is added only if it is not already the latest (checked inside the insert's
  transaction), so concurrent writers and syncs never store one write twice.
"""

from __future__ import annotations

import builtins
import difflib
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.configs.access import ConflictError, FileAccess, access_for, parse_location, sha256
from workbench.configs.jsonedit import apply_edits, get_key
from workbench.errors import InputError, WorkbenchError
from workbench.hosts import casfile
from workbench.journal import Journal
from workbench.results import Result

REASON_TRACKED = "tracked"
REASON_EXTERNAL = "external edit"


@dataclass
class ConfigVersion(Result):
    number: int  # 1-based, per tracked file
    sha256: str
    ts: float
    reason: str
    parent_sha256: str | None
    size: int


@dataclass
class TrackedConfig(Result):
    id: int
    location: str
    label: str
    added: float
    versions: int
    current_sha256: str | None = None  # None when the file is missing now
    latest_sha256: str | None = None
    state: str = "clean"  # clean | external edit stored | missing


@dataclass
class ConfigHistory(Result):
    config: TrackedConfig
    versions: list[ConfigVersion]


@dataclass
class ConfigChange(Result):
    location: str
    version: ConfigVersion
    previous_sha256: str | None
    diff: str
    external_edit: ConfigVersion | None = None  # stored before writing, when one was found
    changed: bool = True


@dataclass
class ConfigDiff(Result):
    location: str
    a: str
    b: str
    diff: str


@dataclass
class ConfigShow(Result):
    location: str
    version: int | None
    sha256: str
    text: str


def unified_diff(a: bytes, b: bytes, a_name: str, b_name: str) -> str:
    at = a.decode("utf-8", errors="replace").splitlines(keepends=True)
    bt = b.decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = list(difflib.unified_diff(at, bt, a_name, b_name))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def check_type(key: str, value: Any) -> None:
    """A value for a typed draft-config key (``workbench.draftconfig.schema``); InputError otherwise."""
    from workbench.draftconfig.schema import validate

    try:
        validate(key, value)
    except InputError as exc:
        raise InputError(f"{exc} (use force to write it anyway)") from None


class ConfigStore:
    """Tracked config files and their versions, over a Journal and a FileAccess per host."""

    def __init__(self, journal: Journal, access_resolver: Callable[[str], FileAccess] = access_for):
        self.journal = journal
        self._access = access_resolver

    # -- plumbing -----------------------------------------------------------------------------
    def _open(self, location: str) -> tuple[str, FileAccess, str]:
        host, path = parse_location(location)
        return f"{host}:{path}", self._access(host), path

    def _row(self, location: str) -> sqlite3.Row | None:
        return self.journal.tracked_config(location)

    def _store_blob(self, data: bytes) -> str:
        digest = sha256(data)
        self.journal.put_blob(digest, data)
        return digest

    def blob(self, digest: str) -> bytes:
        content = self.journal.blob(digest)
        if content is None:
            raise WorkbenchError(f"blob {digest[:12]} missing from the journal")
        return content

    def _add_version(
        self,
        config_id: int,
        data: bytes,
        reason: str | None,
        parent: str | None = None,
        location: str | None = None,
        sync: bool = False,
    ) -> str | None:
        """Add a version unless it is already the latest (see ``Journal.add_config_version``)."""
        return self.journal.add_config_version(
            config_id, sha256(data), data, reason, parent, location=location, sync=sync
        )

    def _announce(self, location: str, digest: str, parent: str | None, reason: str) -> None:
        self.journal.announce_config_write(location, digest, parent, reason)

    def _versions(self, config_id: int) -> list[ConfigVersion]:
        rows = self.journal.config_versions(config_id)
        return [
            ConfigVersion(i + 1, r["sha256"], r["ts"], r["reason"], r["parent_sha256"], r["size"])
            for i, r in enumerate(rows)
        ]

    def _tracked(self, row: sqlite3.Row, current: bytes | None = None, state: str = "clean") -> TrackedConfig:
        versions = self._versions(row["id"])
        return TrackedConfig(
            row["id"],
            row["location"],
            row["label"],
            row["added"],
            len(versions),
            None if current is None else sha256(current),
            versions[-1].sha256 if versions else None,
            state,
        )

    # -- tracking -----------------------------------------------------------------------------
    def track(self, location: str, label: str = "") -> TrackedConfig:
        loc, acc, path = self._open(location)
        data = acc.read_bytes(path)
        if data is None:
            raise InputError(f"{path}: no such file")
        row = self._row(loc)
        if row is None:
            self.journal.add_tracked_config(loc, label)
            row = self.require(loc)
            self._add_version(row["id"], data, REASON_TRACKED, None)
            return self._tracked(row, data)
        if label and label != row["label"]:
            self.journal.set_tracked_label(row["id"], label)
            row = self._row(loc)
        return self.sync(loc)

    def require(self, location: str) -> sqlite3.Row:
        loc, _, _ = self._open(location)
        row = self._row(loc)
        if row is None:
            raise InputError(f"{loc}: not tracked (run `config track` first)")
        return row

    def list(self) -> list[TrackedConfig]:
        out = []
        for row in self.journal.tracked_configs():
            try:
                out.append(self.sync(row["location"]))
            except InputError:
                out.append(self._tracked(row, None, "missing"))
        return out

    def sync(self, location: str) -> TrackedConfig:
        """Notice an edit made outside the workbench and store it as a version."""
        loc, acc, path = self._open(location)
        row = self.require(loc)
        data = acc.read_bytes(path)
        if data is None:
            return self._tracked(row, None, "missing")
        # a workbench write whose writer died before its version row keeps its own reason (by hash)
        if self._add_version(row["id"], data, REASON_EXTERNAL, location=loc, sync=True) == REASON_EXTERNAL:
            return self._tracked(row, data, REASON_EXTERNAL + " stored")
        return self._tracked(row, data)

    def history(self, location: str) -> ConfigHistory:
        tracked = self.sync(location)
        return ConfigHistory(tracked, self._versions(tracked.id))

    # -- versions -----------------------------------------------------------------------------
    def resolve(self, location: str, ref: int | str | None) -> ConfigVersion:
        """A version by number (1-based; negative from the end), 'vN', 'latest', 'previous' or sha prefix."""
        row = self.require(location)
        versions = self._versions(row["id"])
        if not versions:
            raise InputError(f"{location}: no versions stored")
        if ref is None or ref == "latest":
            return versions[-1]
        if ref == "previous":
            if len(versions) < 2:
                raise InputError(f"{location}: only one version stored, there is no previous one")
            return versions[-2]
        text = str(ref).strip()
        m = re.fullmatch(r"v?(-?\d+)", text)
        if m and not (len(text) >= 6 and re.fullmatch(r"[0-9a-f]+", text)):
            n = int(m.group(1))
            if n < 0:
                n = len(versions) + 1 + n
            if not 1 <= n <= len(versions):
                raise InputError(f"version {ref}: {location} has versions 1..{len(versions)}")
            return versions[n - 1]
        if re.fullmatch(r"[0-9a-fA-F]{6,64}", text):
            hits = [v for v in versions if v.sha256.startswith(text.lower())]
            if hits:
                return hits[-1]
        raise InputError(f"version {ref!r}: not a version number (1..{len(versions)}), 'latest' or a sha256 prefix")

    def show(self, location: str, ref: int | str | None = None) -> ConfigShow:
        loc, _, _ = self._open(location)
        self.sync(loc)
        v = self.resolve(loc, ref)
        return ConfigShow(loc, v.number, v.sha256, self.blob(v.sha256).decode("utf-8", errors="replace"))

    def diff(self, location: str, a: int | str | None, b: int | str | None = None) -> ConfigDiff:
        loc, _, _ = self._open(location)
        self.sync(loc)
        va = self.resolve(loc, a if a is not None else "previous")
        vb = self.resolve(loc, b)
        text = unified_diff(self.blob(va.sha256), self.blob(vb.sha256), f"v{va.number}", f"v{vb.number}")
        return ConfigDiff(loc, f"v{va.number}", f"v{vb.number}", text)

    # -- writes -------------------------------------------------------------------------------
    def _write(
        self, location: str, make: Callable[[bytes | None], bytes], reason: str, *, allow_missing: bool = False
    ) -> ConfigChange:
        """Sync, compute the new bytes from the current ones, CAS-write, record the version."""
        loc, acc, path = self._open(location)
        row = self._row(loc)
        if row is None:
            self.track(loc)
            row = self.require(loc)
        before = self._versions(row["id"])
        tracked = self.sync(loc)
        external = None
        after_sync = self._versions(row["id"])
        if len(after_sync) > len(before) and tracked.state != "clean":
            external = after_sync[-1]
        current = acc.read_bytes(path)
        if current is None and not allow_missing:
            raise InputError(f"{path}: the file is gone (its versions are kept; revert to restore it)")
        if current is not None and sha256(current) != tracked.latest_sha256:  # changed again while we looked
            self.sync(loc)
            raise ConflictError(f"{path}: changed on disk while being read; stored that version, nothing written")
        new = make(current)
        prev_sha = None if current is None else sha256(current)
        diff = unified_diff(current or b"", new, "current", "new")
        if new == current:
            return ConfigChange(loc, after_sync[-1], prev_sha, "", external, changed=False)
        self._store_blob(new)
        self._announce(loc, sha256(new), prev_sha, reason)
        casfile.hook("read")
        try:
            acc.write_cas(path, new, prev_sha)
        except ConflictError:
            self.sync(loc)  # keep what the other writer (or a hand edit) put there
            raise
        casfile.hook("renamed")  # written; the version row not yet added
        self._add_version(row["id"], new, reason, prev_sha, location=loc)
        mine = [v for v in self._versions(row["id"]) if v.sha256 == sha256(new) and v.parent_sha256 == prev_sha]
        return ConfigChange(loc, mine[-1], prev_sha, diff, external)

    def set(
        self,
        location: str,
        assignments: builtins.list[tuple[str, Any]],
        *,
        reason: str | None = None,
        force: bool = False,
        deletions: builtins.list[str] | None = None,
        add: bool = False,
    ) -> ConfigChange:
        """``add``: the keys may be new (otherwise a key the file does not have is refused with the
        closest ones it has: a typo must not add a key SGLang then ignores)."""
        if not assignments and not deletions:
            raise InputError("config set: nothing to set (give KEY=VALUE)")
        loc, acc, path = self._open(location)

        def make(current: bytes | None) -> bytes:
            assert current is not None  # _write refuses a missing file (no allow_missing here)
            try:
                text = current.decode("utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{path}: not UTF-8 text") from None
            # the file and the values first (a malformed file or value is the real problem), then the keys
            new = apply_edits(text, assignments, deletions or [], name=path, check_types=not force)
            if not (add or force):
                unknown_keys(text, [k for k, _ in assignments], path)
            return new.encode("utf-8")

        # Every check runs on the file as it is now before anything is stored: bad input leaves the
        # file and the journal as they were. _write repeats the edit on what it reads under CAS.
        current = acc.read_bytes(path)
        if current is not None:
            make(current)
        why = reason or "set " + ", ".join(
            [f"{k}={json.dumps(v)}" for k, v in assignments] + [f"delete {k}" for k in deletions or []]
        )
        return self._write(loc, make, why)

    def revert_plan_details(self, location: str, ref: int | str | None) -> tuple[ConfigVersion, str, bytes]:
        loc, acc, path = self._open(location)
        self.sync(loc)
        v = self.resolve(loc, ref)
        target = self.blob(v.sha256)
        current = acc.read_bytes(path) or b""
        return v, unified_diff(current, target, "current", f"v{v.number}"), target

    def revert(self, location: str, ref: int | str | None) -> ConfigChange:
        loc, _, _ = self._open(location)
        v = self.resolve(loc, ref)
        target = self.blob(v.sha256)
        return self._write(loc, lambda _current: target, f"revert to v{v.number}", allow_missing=True)

    def value(self, location: str, key: str, ref: int | str | None = None) -> Any:
        v = self.resolve(location, ref)
        try:
            data = json.loads(self.blob(v.sha256))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InputError(f"{location} v{v.number}: not valid JSON") from None
        return get_key(data, key)


def dotted_keys(obj: Any, prefix: str = "") -> list[str]:
    """Every key of a JSON object as a dotted path (``eagle_config.eagle_aux_hidden_state_layer_ids``)."""
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            full = f"{prefix}{k}"
            out.append(full)
            out += dotted_keys(v, full + ".")
    return out


def unknown_keys(text: str, keys: list[str], name: str) -> None:
    """Refuse a key the file does not have, naming the closest keys it has (did-you-mean).

    Only a missing object member is "unknown": an index into a list, or a path through a value that
    is not an object, is left to the edit itself, which names what is wrong with it."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return  # not (plain) JSON: the edit itself reports it
    have = None
    for key in keys:
        node, parts = doc, key.split(".")
        for depth, part in enumerate(parts):
            if isinstance(node, dict) and part in node:
                node = node[part]
                continue
            if isinstance(node, dict):
                if have is None:
                    have = dotted_keys(doc)
                close = difflib.get_close_matches(key, have, n=2, cutoff=0.6)
                hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
                missing = ".".join(parts[: depth + 1])
                where = f" ({missing!r} is not in the file)" if missing != key else ""
                raise InputError(f"{name}: no key {key!r}{where}: {hint}add it on purpose with --add")
            break  # a list index or a scalar: the edit checks it
