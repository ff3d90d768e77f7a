"""What a tool is, and the one way every door runs one.

A ``Tool`` is a declaration: a name, its skill, a description, the pydantic model of its
arguments, a module-level handler ``(runtime, arguments, tenant)`` and whether it only reads.
The table of every tool is ``lamina.server.tools.TOOLS``. A server binds each to its runtime
(``Tool.bind``): a ``ServerTool``, whose handler takes the checked arguments and the tenant
(a tool registered at run time, ``LaminaServer.register_tool``, comes bound already).

``ServerTool.run`` is how every door (A2A, MCP) runs a tool: check the arguments, let the door
admit the call, run the handler. A missing required argument raises ``MissingArguments``
(INVALID_ARGUMENT with ``details["missing"]``: an adapter asks for it, input-required); any
other bad argument raises INVALID_ARGUMENT naming the field (rejected). The tools' models are
strict (args.py): a value of another JSON type is never converted, and its error says the
type it got (``details["got"]``), never the value. Nothing here knows about A2A or MCP.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from lamina.errors import ErrorCode, LaminaError
from lamina.runtime import AsyncLamina

A = TypeVar("A", bound=BaseModel)

#: A bound tool's handler: its checked arguments and the tenant it acts for.
Handler = Callable[[Any, str], Awaitable[Any]]


def json_kind(value: object) -> str:
    """What ``value`` is in JSON words (``a string``), for an error message that names the
    type a caller sent without echoing the value (it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return type(value).__name__


class MissingArguments(LaminaError):
    """INVALID_ARGUMENT: required arguments are missing, and nothing else is wrong
    (``details["missing"]`` names them); a door may ask the caller for them."""

    def __init__(self, tool: str, missing: list[str]) -> None:
        super().__init__(
            ErrorCode.INVALID_ARGUMENT,
            f"{tool}: missing argument(s): {', '.join(missing)}",
            details={"tool": tool, "missing": missing},
        )


@dataclass(frozen=True)
class ServerTool:
    """A tool bound to one runtime, as a server's registry holds it."""

    name: str
    skill: str
    description: str
    model: type[BaseModel]
    handler: Handler
    read_only: bool

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        return schema

    def parse(self, arguments: object) -> BaseModel:
        """The arguments checked against the tool's model."""
        if not isinstance(arguments, Mapping):
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                f"{self.name}: arguments must be a JSON object",
                details={"tool": self.name},
            )
        try:
            return self.model.model_validate(dict(arguments))
        except ValidationError as exc:
            errors = exc.errors()
            missing = [".".join(str(p) for p in e["loc"]) for e in errors if e["type"] == "missing"]
            if missing and len(missing) == len(errors):
                raise MissingArguments(self.name, missing) from None
            first = next(e for e in errors if e["type"] != "missing")
            where = ".".join(str(p) for p in first["loc"])
            details: dict[str, Any] = {"tool": self.name, "field": where}
            message = f"{self.name}: argument {where}: {first['msg']}"
            if first["type"].endswith("_type"):  # a value of another JSON type
                details["got"] = json_kind(first["input"])
                message += f" (got {details['got']})"
            raise LaminaError(ErrorCode.INVALID_ARGUMENT, message, details=details) from None

    async def run(
        self,
        arguments: object,
        tenant: str,
        *,
        admit: Callable[[BaseModel], None] | None = None,
    ) -> Any:
        """Check ``arguments``, let the door ``admit`` the call (it raises to refuse it: the
        handler has not run), then run the handler for ``tenant``."""
        parsed = self.parse(arguments)
        if admit is not None:
            admit(parsed)
        return await self.handler(parsed, tenant)


@dataclass(frozen=True)
class Tool(Generic[A]):
    """One tool, declared: its handler takes the runtime, its checked arguments and the
    tenant, and returns the tool's JSON answer."""

    name: str
    skill: str
    description: str
    args: type[A]
    handler: Callable[[AsyncLamina, A, str], Awaitable[Any]]
    read_only: bool

    def bind(self, ms: AsyncLamina) -> ServerTool:
        """The tool as a server over ``ms`` offers it."""
        return ServerTool(
            self.name,
            self.skill,
            self.description,
            self.args,
            partial(self.handler, ms),
            self.read_only,
        )
