"""The memory skill's tools for a memory's life and the hierarchy: ``memory_history``,
``memory_delete_all``, ``hierarchy_register``, ``hierarchy_defaults`` and
``hierarchy_resolve`` (tools.py gathers them with the others)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

from lamina.config import IdentifierFields
from lamina.runtime import AsyncLamina
from lamina.server.memory_args import Args, MemoryId

#: Tools whose identifiers are never filled from an adapter's defaults (defaults.py): a
#: registration names exactly the links it makes.
EXPLICIT_IDENTIFIERS = frozenset({"hierarchy_register", "hierarchy_defaults"})
#: A tool's handler: its checked arguments and the tenant it acts for.
Handler = Callable[[BaseModel, str], Awaitable[Any]]
#: (name, skill, description, argument model, handler, read only), as tools.py lists them.
Spec = tuple[str, str, str, type[BaseModel], Handler, bool]


class MemoryDeleteAll(Args, IdentifierFields):
    layers: list[str] | None = Field(
        default=None, description="Only these layers; default: every layer."
    )
    include_sessions: bool = Field(
        default=False,
        description="Also delete the observational memory (messages, observations, "
        "reflections, graph relations) of session_id and of the sessions the deleted "
        "memories name; the result counts each kind.",
    )


class HierarchyRegister(Args):
    project_id: str | None = Field(default=None, description="Registered under team_id.")
    team_id: str | None = Field(default=None, description="Registered under org_id.")
    org_id: str | None = Field(default=None, description="Registered under company_id.")
    company_id: str | None = None


class HierarchyDefaults(Args):
    team_id: str | None = Field(default=None, description="Team of projects that registered none.")
    org_id: str | None = Field(default=None, description="Org of teams that registered none.")
    company_id: str | None = Field(
        default=None, description="Company of orgs that registered none."
    )


class HierarchyResolve(Args, IdentifierFields):
    pass


def lifecycle_tools(ms: AsyncLamina) -> list[Spec]:
    """The tools' specs, bound to ``ms``."""
    mem = ms.memory

    async def memory_history(a: Any, t: str) -> Any:
        events = await mem.history(a.memory_id, tenant_id=t)
        return {"history": [e.model_dump(mode="json") for e in events]}

    async def memory_delete_all(a: Any, t: str) -> Any:
        ids = a.pick(*IdentifierFields.model_fields)
        if a.include_sessions:
            done = await mem.forget(layers=a.layers, tenant_id=t, **ids)
            return {"deleted": done.memories, **done.model_dump(exclude={"memories"})}
        return {"deleted": await mem.delete_all(layers=a.layers, tenant_id=t, **ids)}

    async def hierarchy_register(a: Any, t: str) -> Any:
        links = await mem.register_hierarchy(tenant_id=t, **a.pick(*HierarchyRegister.model_fields))
        return {"links": [link.model_dump(mode="json") for link in links]}

    async def hierarchy_defaults(a: Any, t: str) -> Any:
        links = await mem.set_hierarchy_defaults(
            tenant_id=t, **a.pick(*HierarchyDefaults.model_fields)
        )
        return {"links": [link.model_dump(mode="json") for link in links]}

    async def hierarchy_resolve(a: Any, t: str) -> Any:
        return await mem.resolve_identifiers(tenant_id=t, **a.pick(*IdentifierFields.model_fields))

    return [
        (
            "memory_history",
            "memory",
            "Every add, update and delete of a memory, oldest first (a deleted memory's events "
            "keep who and when, never its content).",
            MemoryId,
            memory_history,
            True,
        ),
        (
            "memory_delete_all",
            "memory",
            "Delete every memory whose identifiers include all those given (user_id: that "
            "user's user, agent and session memories); at least one identifier; the count. "
            "include_sessions: their sessions' messages, observations and reflections too.",
            MemoryDeleteAll,
            memory_delete_all,
            False,
        ),
        (
            "hierarchy_register",
            "memory",
            "Register which team a project, which org a team, which company an org belongs to.",
            HierarchyRegister,
            hierarchy_register,
            False,
        ),
        (
            "hierarchy_defaults",
            "memory",
            "Set the tenant-wide parents of projects, teams and orgs that registered none.",
            HierarchyDefaults,
            hierarchy_defaults,
            False,
        ),
        (
            "hierarchy_resolve",
            "memory",
            "The identifiers after hierarchy resolution, and the memory layers they reach.",
            HierarchyResolve,
            hierarchy_resolve,
            True,
        ),
    ]
