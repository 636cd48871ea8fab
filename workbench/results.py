"""Core results are plain dataclasses; ``to_dict()`` gives their JSON form."""

from __future__ import annotations

import dataclasses
import enum
import math
from pathlib import PurePath
from typing import Any


def jsonable(value: Any) -> Any:
    """Convert dataclasses, enums, paths, tuples and numpy scalars/arrays to JSON-safe values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(value, "to_dict") and type(value).to_dict is not Result.to_dict:
            return value.to_dict()
        return fields_dict(value)
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy arrays and scalars, without importing numpy
        return jsonable(value.tolist())
    return value


def fields_dict(value: Any) -> dict[str, Any]:
    """A dataclass's fields as JSON-safe values (fields with metadata internal=True left out)."""
    return {
        f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value) if not f.metadata.get("internal")
    }


class Result:
    """Mixin for result dataclasses. Subclasses may override ``to_dict`` and call ``super()``."""

    def to_dict(self) -> dict[str, Any]:
        return fields_dict(self)
