"""The base of the public shapes (pydantic models) that never change once built."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen", "jsonable"]


class Frozen(BaseModel):
    """A public shape that cannot be changed once built: ``model_copy(update=...)`` makes a
    changed copy."""

    model_config = ConfigDict(frozen=True)


def jsonable(value: Any) -> Any:
    """``value`` as JSON data: the shapes in it (in lists and dict values too) dumped as
    ``model_dump(mode="json")`` does; anything else as it is."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value
