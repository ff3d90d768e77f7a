"""A tenant's memories by who holds them: how many each layer holds (``count_by_layer``),
who holds them in a layer, with how many each (``owners``: users, agents, sessions,
projects …), and every memory an owner holds across its layers (``list_all``: the memories
``count_all`` counts and ``delete_all`` deletes, a page at a time)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Unpack

from lamina.checks import invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.base import MemoryPart, MemoryShared, observed
from lamina.memory.layers import (
    IdentifierArgs,
    Identifiers,
    MemoryLayer,
    identifier_args,
    parse_layer,
    parse_layers,
)
from lamina.memory.models import MemoryPage, Owner, OwnerPage
from lamina.memory.ports import MemoryPorts, ScopeCount, Selection


def _cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii")


def _after(cursor: str | None) -> str | None:
    if cursor is None or cursor == "":
        return None
    if not isinstance(cursor, str):
        raise invalid("cursor must be a string", "cursor")
    try:
        key = base64.b64decode(cursor.encode("ascii"), altchars=b"-_", validate=True)
        return key.decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise invalid("cursor is not one that owners returned", "cursor") from None


class MemoryOwners(MemoryPart):
    """``count_by_layer``, ``owners`` and ``list_all``. Holds the owners port and the reads
    port (``list_all`` lists)."""

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._owners = ports.owners
        self._reads = ports.reads

    @observed("count_by_layer")
    async def count_by_layer(self, *, tenant_id: str | None = None) -> dict[str, int]:
        """How many memories the tenant holds in each layer (every layer named, most
        specific first; every stored memory counted, valid or not)."""
        tenant = self._tenant(tenant_id)
        found = await self._retry.run("count_by_layer", lambda: self._owners.count_by_layer(tenant))
        return {layer.value: found.get(layer.value, 0) for layer in MemoryLayer}

    @observed("owners")
    async def owners(
        self,
        layer: str | MemoryLayer,
        *,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> OwnerPage:
        """Who holds memories in ``layer`` (each scope's identifiers: a user's ``user_id``,
        an agent's ``agent_id`` and ``user_id`` …) and how many each holds, in identifier
        order, a page at a time. Identifiers given narrow it to the scopes holding them
        (``owners("agent", user_id="u")``: u's agents); they must be the layer's own."""
        given = identifier_args(scope_ids)

        tenant = self._tenant(tenant_id)
        chosen = parse_layer(layer)
        ids = Identifiers(**given).given()
        for name in ids:
            if name not in chosen.required_identifiers:
                own = " and ".join(chosen.required_identifiers)
                raise invalid(
                    f"{chosen.value} memories are held by {own}: {name} does not narrow them",
                    name,
                )
        count = self._limit(limit, self._settings.list_limit)
        after = _after(cursor)
        query = ScopeCount(tenant, chosen, count + 1, ids, after)
        found = await self._retry.run("owners", lambda: self._owners.count_scopes(query))
        names = chosen.required_identifiers
        items = [
            Owner(
                layer=chosen,
                identifiers=dict(zip(names, key.split("\x1f"), strict=True)),
                count=n,
            )
            for key, n in found[:count]
        ]
        more = len(found) > count
        return OwnerPage(items=items, next_cursor=_cursor(found[count - 1][0]) if more else None)

    @observed("list_all")
    async def list_all(
        self,
        *,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        tags: Sequence[str] | str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
        include_invalid: bool = False,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        count_limit: int | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> MemoryPage:
        """Every memory whose identifiers include all those given, in every layer that holds
        them (``user_id="u"``: u's user memories, and u's agent and session memories), or
        only in ``layers``: the memories ``count_all`` counts and ``delete_all`` deletes,
        newest first, a page at a time. The other arguments as for ``list``: facts no longer
        valid only with ``include_invalid`` and expired memories never (``count_all`` counts
        both until they are purged). At least one identifier is required."""
        given = identifier_args(scope_ids)

        tenant = self._tenant(tenant_id)
        listing = self._shared.listing(
            limit, cursor, tags, filters, include_invalid, since, until, count_limit
        )
        ids = Identifiers(**given).given()
        if not ids:
            raise LaminaError(
                ErrorCode.MISSING_IDENTIFIER,
                "list_all needs at least one identifier (user_id, agent_id, session_id, "
                "project_id, team_id, org_id or company_id): use list_all per owner "
                "(owners names them)",
                details={"identifier": "user_id"},
            )
        chosen = parse_layers([layers] if isinstance(layers, str) else layers) or []
        listing["selection"] = Selection(tuple(chosen), ids)
        return await self._retry.run("list_all", lambda: self._reads.list(tenant, **listing))
