"""The hierarchy project → team → org → company: registering its links, and resolving the
identifiers a call gives into the scopes it reaches (parents not given come from the
registered links, else from the tenant-wide defaults, else ``default``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypedDict, Unpack

from lamina.checks import invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.base import MemoryPart, MemoryShared, observed
from lamina.memory.layers import (
    IdentifierArgs,
    Identifiers,
    MemoryLayer,
    accessible_layers,
    identifier_args,
    parse_layers,
    scope_for,
    scope_key,
)
from lamina.memory.models import HierarchyLink
from lamina.memory.ports import MemoryPorts, Scope

#: The parent a project, team or org has when neither it nor the tenant registered one.
DEFAULT_PARENT = "default"


class HierarchyArgs(TypedDict, total=False):
    """The keyword arguments of both hierarchy calls: the parents (a project's team, a team's
    org, an org's company; None: not given) and the tenant."""

    team_id: str | None
    org_id: str | None
    company_id: str | None
    tenant_id: str | None


def _hierarchy_args(call: str, args: HierarchyArgs) -> tuple[str | None, dict[str, str | None]]:
    """(tenant_id, the parents given); an unknown name is the TypeError any unexpected keyword
    argument is."""
    given: dict[str, Any] = dict(args)
    for name in given:
        if name not in HierarchyArgs.__annotations__:
            raise TypeError(f"{call}() got an unexpected keyword argument {name!r}")
    return given.pop("tenant_id", None), given


class Hierarchy(MemoryPart):
    """``register_hierarchy``, ``set_hierarchy_defaults``, ``resolve_identifiers``, and the
    resolution the other parts use (``resolve``, ``scopes``). Holds the owners port (where
    the links are kept)."""

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._owners = ports.owners

    async def _parent(self, tenant: str, level: str, child: str) -> str:
        found = await self._retry.run(
            "hierarchy", lambda: self._owners.get_parent(tenant, level, child)
        )
        return found or DEFAULT_PARENT

    async def resolve(self, tenant: str, ids: Identifiers) -> Identifiers:
        """Fill team, org and company from the registered hierarchy where not given."""
        team, org, company = ids.team_id, ids.org_id, ids.company_id
        if team is None and ids.project_id is not None:
            team = await self._parent(tenant, "project", ids.project_id)
        if org is None and team is not None:
            org = await self._parent(tenant, "team", team)
        if company is None and org is not None:
            company = await self._parent(tenant, "org", org)
        return ids.with_parents(team, org, company)

    async def scopes(
        self, tenant: str, ids: Identifiers, layers: Sequence[str | MemoryLayer] | str | None
    ) -> list[Scope]:
        """The scopes a call reaches: ``layers``, else every layer the resolved identifiers
        reach (MISSING_IDENTIFIER when none)."""
        requested = parse_layers(layers)
        resolved = await self.resolve(tenant, ids)
        targets = requested if requested is not None else accessible_layers(resolved)
        if not targets:
            raise LaminaError(
                ErrorCode.MISSING_IDENTIFIER,
                "no memory layer is reachable: give user_id, project_id, team_id, org_id, "
                "company_id, or agent_id/session_id with user_id",
                details={"identifier": "user_id"},
            )
        scopes = []
        for layer in targets:
            scope = scope_for(layer, resolved)
            scopes.append(Scope(layer, scope, scope_key(layer, scope)))
        return scopes

    async def _link(self, tenant: str, link: HierarchyLink) -> None:
        await self._retry.run(
            "hierarchy",
            lambda: self._owners.set_parent(tenant, link.level, link.child_id, link.parent_id),
        )

    async def register_hierarchy(
        self, *, project_id: str | None = None, **args: Unpack[HierarchyArgs]
    ) -> list[HierarchyLink]:
        """Register the links given: project → team, team → org, org → company."""
        tenant_id, parents = _hierarchy_args("register_hierarchy", args)

        def links() -> list[HierarchyLink]:
            ids = Identifiers(project_id=project_id, **parents)
            chain = [
                ("project", ids.project_id),
                ("team", ids.team_id),
                ("org", ids.org_id),
                ("company", ids.company_id),
            ]
            return [
                HierarchyLink(level=level, child_id=child, parent_id=parent)
                for (level, child), (_, parent) in itertools.pairwise(chain)
                if child is not None and parent is not None
            ]

        return await self._register(
            "register_hierarchy",
            tenant_id,
            links,
            "give at least one adjacent pair: project_id+team_id, team_id+org_id or "
            "org_id+company_id",
        )

    async def set_hierarchy_defaults(self, **args: Unpack[HierarchyArgs]) -> list[HierarchyLink]:
        """Tenant-wide parents for projects, teams and orgs that registered none."""
        tenant_id, parents = _hierarchy_args("set_hierarchy_defaults", args)

        def links() -> list[HierarchyLink]:
            ids = Identifiers(**parents)
            return [
                HierarchyLink(level=child_level, child_id="*", parent_id=parent)
                for child_level, parent in (
                    ("project", ids.team_id),
                    ("team", ids.org_id),
                    ("org", ids.company_id),
                )
                if parent is not None
            ]

        return await self._register(
            "set_hierarchy_defaults", tenant_id, links, "give team_id, org_id and/or company_id"
        )

    async def _register(
        self,
        operation: str,
        tenant_id: str | None,
        links: Callable[[], list[HierarchyLink]],
        missing: str,
    ) -> list[HierarchyLink]:
        """Store the links (``missing``: the error when there are none)."""

        async def run() -> list[HierarchyLink]:
            tenant = self._tenant(tenant_id)
            found = links()
            if not found:
                raise invalid(missing)
            for link in found:
                await self._link(tenant, link)
            return found

        return await self._observe(operation, run)

    @observed("resolve_identifiers")
    async def resolve_identifiers(
        self,
        *,
        tenant_id: str | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> dict[str, Any]:
        """The identifiers after hierarchy resolution, and the layers they reach."""
        given = identifier_args(scope_ids)

        tenant = self._tenant(tenant_id)
        ids = Identifiers(**given)
        resolved = await self.resolve(tenant, ids)
        return {
            "identifiers": resolved.given(),
            "layers": [layer.value for layer in accessible_layers(resolved)],
        }
