"""The base of the public shapes (pydantic models) that never change once built."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Frozen"]


class Frozen(BaseModel):
    """A public shape that cannot be changed once built: ``model_copy(update=...)`` makes a
    changed copy."""

    model_config = ConfigDict(frozen=True)
