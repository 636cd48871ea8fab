"""Tracked config files: content-addressed history, edits by dotted key, diff, revert."""

from workbench.configs.access import (
    ConflictError,
    FileAccess,
    LocalFiles,
    access_for,
    location_of,
    parse_location,
    register_host_access,
    sha256,
)
from workbench.configs.history import (
    ConfigChange,
    ConfigDiff,
    ConfigHistory,
    ConfigShow,
    ConfigStore,
    ConfigVersion,
    TrackedConfig,
    check_type,
    unified_diff,
)
from workbench.configs.jsonedit import delete_key, get_key, parse_assignment, set_key

__all__ = [
    "ConfigChange",
    "ConfigDiff",
    "ConfigHistory",
    "ConfigShow",
    "ConfigStore",
    "ConfigVersion",
    "ConflictError",
    "FileAccess",
    "LocalFiles",
    "TrackedConfig",
    "access_for",
    "check_type",
    "delete_key",
    "get_key",
    "location_of",
    "parse_assignment",
    "parse_location",
    "register_host_access",
    "set_key",
    "sha256",
    "unified_diff",
]
