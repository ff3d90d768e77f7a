"""The base of every tool's arguments: pydantic models whose JSON schemas the agent card and
MCP publish.

Every tool's arguments are strict: a value is taken only as the JSON type its schema names
(a boolean is ``true`` or ``false``, an integer a JSON integer, a string a JSON string), so
``{"include_sessions": "yes"}`` or ``{"limit": "5"}`` is INVALID_ARGUMENT naming the field,
never a guess. A number field takes a JSON integer too (``"threshold": 1``); NaN and
Infinity are refused."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from lamina.config import IdentifierFields


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    def pick(self, *names: str) -> dict[str, Any]:
        """The fields ``names``, as the keyword arguments of the tool's call."""
        return {n: getattr(self, n) for n in names}


class IdArgs(Args, IdentifierFields):
    def ids(self) -> dict[str, Any]:
        return self.pick(*IdentifierFields.model_fields)
