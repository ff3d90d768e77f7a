"""The base of every settings section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A nested group of Settings (a TOML table): unknown keys are rejected, as at the top."""

    model_config = ConfigDict(extra="forbid")
