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
    root: Path
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, root: str | os.PathLike | None = None, *, create: bool = True) -> "Workspace":
        path = Path(root).expanduser() if root is not None else default_root()
        if path.exists() and not path.is_dir():
            raise InputError(f"workspace {path}: not a directory")
        if create:
            (path / STATE_DIR).mkdir(parents=True, exist_ok=True)
        ws = cls(path.resolve() if path.exists() else path)
        ws.reload()
        return ws

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def journal_path(self) -> Path:
        return self.state_dir / "journal.sqlite3"

    def reload(self) -> None:
        self.settings = load_settings(self.config_path)

    def section(self, name: str) -> dict[str, Any]:
        return self.settings.get(name, {})


def load_settings(path: Path) -> dict[str, Any]:
    """Read workbench.toml; a missing file is an empty workspace."""
    if not path.exists():
        return {name: {} for name in SECTIONS}
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    for name in SECTIONS:
        value = data.setdefault(name, {})
        if not isinstance(value, dict):
            raise InputError(f"{path}: [{name}] must be a table, got {type(value).__name__}")
    return data
