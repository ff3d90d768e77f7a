"""Default identifiers of an adapter (``lamina mcp --user-id alice``): filled into the
arguments of every tool that takes identifiers when the caller leaves them out, so a model
does not have to invent them on every call. An identifier the caller passes wins, and an
explicit null means "none": the default is not applied.

team_id, org_id and company_id are normally resolved from the registered hierarchy; a
default for one of them is not applied when the caller names a more specific level
(project_id, then team_id, then org_id), so an explicit project keeps its own parents.

``memory_delete_all`` deletes every memory whose identifiers include all those given, so
each default would narrow what it deletes (user + agent: that agent's memories only) or
reach a shared layer. It takes the user_id default alone, and only when the call names no
identifier or only agent_id / session_id (the layers a user owns): ``{}`` forgets the
default user's memories in every layer the user owns; a project's memories are deleted only
when the call names the project. The hierarchy registrations take no defaults.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.layers import IDENTIFIER_NAMES, Identifiers

if TYPE_CHECKING:  # the tools import the runtime: `lamina mcp` answers initialize first
    from lamina.server.tools import ServerTool

IDENTIFIERS: tuple[str, ...] = IDENTIFIER_NAMES
_CHAIN = ("project_id", "team_id", "org_id", "company_id")
#: Tools taking only the owner's default (user_id), as the module docstring says.
OWNER_ONLY = frozenset({"memory_delete_all"})
#: The identifiers of the layers a user owns besides the user layer.
_OWNED = frozenset({"agent_id", "session_id"})


def _option(name: str) -> str:
    """The ``lamina mcp`` option setting the default ``name`` (``--user-id``)."""
    return "--" + name.replace("_", "-")


class IdentifierDefaults:
    """Identifier values to use when a tool call omits them."""

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
        """The defaulted identifiers ``tool`` takes (none for a hierarchy registration;
        only user_id for memory_delete_all)."""
        from lamina.server.tools.hierarchy import EXPLICIT_IDENTIFIERS

        if tool.name in EXPLICIT_IDENTIFIERS:
            return []
        names = [n for n in self.values if n in tool.model.model_fields]
        if tool.name in OWNER_ONLY:
            return [n for n in names if n == "user_id"]
        return names

    def _unless(self, tool: ServerTool, name: str) -> str:
        """When the default ``name`` of ``tool`` is not applied, in words ("" always)."""
        if tool.name in OWNER_ONLY:
            return "unless an identifier other than agent_id or session_id is given"
        above = _CHAIN[: _CHAIN.index(name)] if name in _CHAIN else ()
        return f"unless {' or '.join(above)} is given" if above else ""

    def fill(self, tool: ServerTool, arguments: object) -> object:
        """``arguments`` with the defaults ``tool`` takes filled in where absent (an
        explicit null stays: none); anything that is not a JSON object is returned
        unchanged (``tool.parse`` rejects it)."""
        names = self.applies_to(tool)
        if not names or not isinstance(arguments, Mapping):
            return arguments
        filled = dict(arguments)
        named = {n for n in IDENTIFIERS if filled.get(n) is not None}
        if tool.name in OWNER_ONLY and named - _OWNED:
            return filled
        for name in names:
            if name in filled:
                continue
            if name in _CHAIN and named.intersection(_CHAIN[: _CHAIN.index(name)]):
                continue
            filled[name] = self.values[name]
        return filled

    def description(self, tool: ServerTool) -> str:
        """``tool``'s description, followed by the defaults it applies on this server."""
        names = self.applies_to(tool)
        if not names:
            return tool.description
        parts = []
        for name in names:
            text = f"{name} defaults to {self.values[name]!r} (server {_option(name)})"
            unless = self._unless(tool, name)
            parts.append(f"{text} {unless}" if unless else text)
        text = f"{tool.description} On this server {'; '.join(parts)}"
        skipped = [n for n in self.values if n in tool.model.model_fields and n not in names]
        if skipped:
            text += f"; the server's defaults for {', '.join(skipped)} are not applied here"
        return text + ". A value passed wins; null means none."

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
            unless = self._unless(tool, name)
            if unless:
                text += f" {unless}"
            prop["description"] = text + "; pass a value to use another, null for none."
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r not in names]
        return schema


def instructions(defaults: IdentifierDefaults) -> str:
    """The MCP server's instructions to the model: what it serves, and its defaults."""
    text = (
        "Layered long-term memory, knowledge and governance. "
        "Identifiers (user_id, project_id, ...) scope memory tools."
    )
    if defaults:
        text += (
            f" This server fills in {defaults.describe()} when a memory tool call omits "
            "them (memory_delete_all: user_id only; each tool's description says which): "
            "leave them out unless you mean someone or something else, pass null for none."
        )
    return text
