"""The memory skill's tools for the hierarchy: ``hierarchy_register``, ``hierarchy_defaults``
and ``hierarchy_resolve`` (which team a project, which org a team, which company an org
belongs to)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from lamina.config import IdentifierFields
from lamina.runtime import AsyncLamina
from lamina.server.tools.args import Args
from lamina.server.tools.base import Tool

#: Tools whose identifiers are never filled from an adapter's defaults (defaults.py): a
#: registration names exactly the links it makes.
EXPLICIT_IDENTIFIERS = frozenset({"hierarchy_register", "hierarchy_defaults"})


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


async def hierarchy_register(ms: AsyncLamina, a: HierarchyRegister, t: str) -> Any:
    links = await ms.memory.register_hierarchy(
        tenant_id=t, **a.pick(*HierarchyRegister.model_fields)
    )
    return {"links": [link.model_dump(mode="json") for link in links]}


async def hierarchy_defaults(ms: AsyncLamina, a: HierarchyDefaults, t: str) -> Any:
    links = await ms.memory.set_hierarchy_defaults(
        tenant_id=t, **a.pick(*HierarchyDefaults.model_fields)
    )
    return {"links": [link.model_dump(mode="json") for link in links]}


async def hierarchy_resolve(ms: AsyncLamina, a: HierarchyResolve, t: str) -> Any:
    return await ms.memory.resolve_identifiers(
        tenant_id=t, **a.pick(*IdentifierFields.model_fields)
    )


HIERARCHY_TOOLS: tuple[Tool[Any], ...] = (
    Tool(
        "hierarchy_register",
        "memory",
        "Register which team a project, which org a team, which company an org belongs to.",
        HierarchyRegister,
        hierarchy_register,
        read_only=False,
    ),
    Tool(
        "hierarchy_defaults",
        "memory",
        "Set the tenant-wide parents of projects, teams and orgs that registered none.",
        HierarchyDefaults,
        hierarchy_defaults,
        read_only=False,
    ),
    Tool(
        "hierarchy_resolve",
        "memory",
        "The identifiers after hierarchy resolution, and the memory layers they reach.",
        HierarchyResolve,
        hierarchy_resolve,
        read_only=True,
    ),
)
