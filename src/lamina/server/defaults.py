"""Default identifiers of an adapter (``lamina mcp --user-id alice``): filled into the
arguments of every tool that takes identifiers when the caller leaves them out, so a model
does not have to invent them on every call. An identifier the caller passes wins.

team_id, org_id and company_id are normally resolved from the registered hierarchy; a
default for one of them is not applied when the caller names a more specific level
(project_id, then team_id, then org_id), so an explicit project keeps its own parents.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.layers import IDENTIFIER_NAMES, Identifiers
from lamina.server.memory_tools import EXPLICIT_IDENTIFIERS
from lamina.server.tools import ServerTool

IDENTIFIERS: tuple[str, ...] = IDENTIFIER_NAMES
_CHAIN = ("project_id", "team_id", "org_id", "company_id")


class IdentifierDefaults:
    """Identifier values to use when a tool call omits them (or passes null)."""

    def __init__(self, values: Mapping[str, str | None] | None = None) -> None:
        given = {k: v for k, v in (values or {}).items() if v is not None}
        unknown = sorted(set(given) - set(IDENTIFIERS))
        if unknown:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"unknown default identifier(s): {', '.join(unknown)}",
                details={"identifiers": unknown},
            )
        try:
            Identifiers(**given)
        except LaminaError as exc:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"default identifier: {exc.message}",
                details=exc.details,
            ) from None
        self.values: dict[str, str] = {n: given[n] for n in IDENTIFIERS if n in given}

    def __bool__(self) -> bool:
        return bool(self.values)

    def describe(self) -> str:
        """``user_id='alice', project_id='atlas'``"""
        return ", ".join(f"{n}={v!r}" for n, v in self.values.items())

    def applies_to(self, tool: ServerTool) -> list[str]:
        """The defaulted identifiers ``tool`` takes (none for a hierarchy registration)."""
        if tool.name in EXPLICIT_IDENTIFIERS:
            return []
        return [n for n in self.values if n in tool.model.model_fields]

    def fill(self, tool: ServerTool, arguments: object) -> object:
        """``arguments`` with the defaults ``tool`` takes filled in where absent or null;
        anything that is not a JSON object is returned unchanged (``tool.parse`` rejects
        it)."""
        names = self.applies_to(tool)
        if not names or not isinstance(arguments, Mapping):
            return arguments
        filled = dict(arguments)
        explicit = {n for n in IDENTIFIERS if filled.get(n) is not None}
        for name in names:
            if name in explicit:
                continue
            if name in _CHAIN and explicit.intersection(_CHAIN[: _CHAIN.index(name)]):
                continue
            filled[name] = self.values[name]
        return filled

    def schema(self, tool: ServerTool) -> dict[str, Any]:
        """``tool``'s input schema, its defaulted identifiers showing their default."""
        schema = tool.input_schema
        names = self.applies_to(tool)
        if not names:
            return schema
        schema = copy.deepcopy(schema)
        properties = schema.setdefault("properties", {})
        for name in names:
            prop = properties.setdefault(name, {})
            prop["default"] = self.values[name]
            text = f"Optional: defaults to {self.values[name]!r} (configured on the server)"
            above = _CHAIN[: _CHAIN.index(name)] if name in _CHAIN else ()
            if above:
                text += f" unless {' or '.join(above)} is given"
            prop["description"] = text + "; pass a value to use another."
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r not in names]
        return schema
