"""The workspace: a folder with ``workbench.toml`` (hosts, profiles, configs) and ``.workbench/``.

Default: ``$EAGLE_WORKBENCH_HOME`` or ``~/.eagle-workbench``; ``--workspace DIR`` overrides.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG_NAME = "workbench.toml"
STATE_DIR = ".workbench"
SECTIONS = ("hosts", "profiles", "configs")


def default_root() -> Path:
    env = os.environ.get("EAGLE_WORKBENCH_HOME")
    return Path(env).expanduser() if env else Path.home() / ".eagle-workbench"


@dataclass
class Workspace:
    """``settings`` are read from ``workbench.toml`` when a section is first asked for, and again
    whenever the file changes; a broken file fails only what needs a section (``section`` raises
    its one-line error; ``settings_error`` says it without raising), so work that needs no hosts or
    profiles (a prediction, a doctor run on files) goes on."""

    root: Path
    settings: dict[str, Any] = field(default_factory=dict)
    _stamp: tuple[int, int] | None = field(default=None, repr=False)  # (mtime_ns, size) read, (0, 0): absent
    _error: InputError | None = field(default=None, repr=False)

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None, *, create: bool = True) -> Workspace:
        path = Path(root).expanduser() if root is not None else default_root()
        if path.exists() and not path.is_dir():
            raise InputError(f"workspace {path}: not a directory")
        if create:
            (path / STATE_DIR).mkdir(parents=True, exist_ok=True)
        return cls(path.resolve() if path.exists() else path)

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def journal_path(self) -> Path:
        return self.state_dir / "journal.sqlite3"

    def config_stamp(self) -> tuple[int, int]:
        """(mtime_ns, size) of ``workbench.toml``; (0, 0) when there is none."""
        try:
            st = self.config_path.stat()
        except OSError:
            return (0, 0)
        return (st.st_mtime_ns, st.st_size)

    def reload(self) -> None:
        """Read ``workbench.toml`` again (a bad file leaves no settings and its error for ``section``)."""
        self._stamp = self.config_stamp()
        try:
            self.settings, self._error = load_settings(self.config_path), None
        except InputError as exc:
            self.settings, self._error = {}, exc

    def _current(self) -> None:
        if self._stamp is None or self.config_stamp() != self._stamp:
            self.reload()

    @property
    def settings_error(self) -> str | None:
        """What is wrong with ``workbench.toml`` (one line), None when it reads."""
        self._current()
        return str(self._error) if self._error is not None else None

    def section(self, name: str) -> dict[str, Any]:
        self._current()
        if self._error is not None:
            raise InputError(str(self._error))
        table: dict[str, Any] = self.settings.get(name, {})  # load_settings made each section a table
        return table


def load_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a dict; one ``InputError`` naming the file (and the key) for anything wrong:
    invalid TOML, bytes that are not UTF-8, nesting too deep, NaN/inf or 5000-digit numbers."""
    from workbench import strictjson

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}, line {line})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise InputError(f"{path}: invalid TOML: nested deeper than {strictjson.MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise InputError(f"{path}: invalid TOML: {' '.join(str(exc).split())[:120]}") from None
    strictjson.check(data, str(path))  # no NaN/inf anywhere, bounded nesting and integers
    return data


def load_settings(path: Path) -> dict[str, Any]:
    """Read workbench.toml; a missing file is an empty workspace."""
    if not path.exists():
        return {name: {} for name in SECTIONS}
    data = load_toml(path)
    for name in SECTIONS:
        value = data.setdefault(name, {})
        if not isinstance(value, dict):
            raise InputError(f"{path}: [{name}] must be a table, got {type(value).__name__}")
    return data


def load_keymap(path: Path) -> dict[str, str]:
    """``keymap.toml``: binding id -> key, both strings; one ``InputError`` naming the entry otherwise."""
    data = load_toml(path)
    out: dict[str, str] = {}
    for k, v in data.items():
        if not isinstance(v, str) or not v.strip() or len(v) > 64:
            raise InputError(f'{path}: {k}: expected a key name like "ctrl+d", got {type(v).__name__} {str(v)[:40]!r}')
        out[k] = v
    return out
