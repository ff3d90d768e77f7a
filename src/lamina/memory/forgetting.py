"""Forgetting in bulk: ``delete_all`` (forget every memory of a user, agent, session,
project …), ``count_all`` (how many it would) and ``forget`` (``delete_all`` and the
observational memory of the sessions concerned)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from lamina.checks import check_actor
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.base import MemoryPart, MemoryShared, observed
from lamina.memory.layers import (
    IdentifierArgs,
    Identifiers,
    MemoryLayer,
    identifier_args,
    parse_layers,
)
from lamina.memory.models import ForgetResult
from lamina.memory.ports import MemoryPorts, Selection


def selection_of(
    ids: dict[str, str | None],
    layers: Sequence[str | MemoryLayer] | str | None,
) -> Selection:
    """The memories whose identifiers include all of ``ids`` given, in ``layers`` (None:
    any)."""
    given = Identifiers(**ids).given()
    chosen = parse_layers([layers] if isinstance(layers, str) else layers) or []
    return Selection(tuple(chosen), given)


class MemoryForgetting(MemoryPart):
    """``count_all``, ``delete_all`` and ``forget``. Holds the forgetting port."""

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._forgetting = ports.forgetting

    def _checked_selection(
        self,
        call: str,
        scope_ids: IdentifierArgs,
        layers: Sequence[str | MemoryLayer] | str | None,
        what: str = "deletes",
    ) -> Selection:
        """The selection of ``delete_all`` / ``forget`` / ``count_all`` (their identifier
        keywords and ``layers``): at least one identifier (a whole tenant is never deleted,
        nor counted as if it could be)."""
        selection = selection_of(identifier_args(scope_ids), layers)
        if not selection.identifiers:
            raise LaminaError(
                ErrorCode.MISSING_IDENTIFIER,
                f"{call} needs at least one identifier (user_id, agent_id, session_id, "
                f"project_id, team_id, org_id or company_id): it never {what} a whole tenant",
                details={"identifier": "user_id"},
            )
        return selection

    @observed("count_all")
    async def count_all(
        self,
        *,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        tenant_id: str | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> int:
        """How many memories ``delete_all`` with the same arguments would delete now (say
        so before asking someone to confirm it). At least one identifier is required."""
        tenant = self._tenant(tenant_id)
        selection = self._checked_selection("count_all", scope_ids, layers, "counts")
        return await self._retry.run(
            "count_all", lambda: self._forgetting.count_where(tenant, selection)
        )

    @observed("delete_all")
    async def delete_all(
        self,
        *,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> int:
        """Delete, in one transaction, every memory whose identifiers include all those
        given (``user_id="u"``: u's user memories, and u's agent and session memories; not
        the project's), optionally only in ``layers``; returns how many. Each is forgotten
        as ``delete`` forgets one. At least one identifier is required: deleting a whole
        tenant is not a memory call."""
        tenant = self._tenant(tenant_id)
        selection = self._checked_selection("delete_all", scope_ids, layers)
        who = check_actor(actor)
        return await self._retry.run(
            "delete_all", lambda: self._forgetting.delete_where(tenant, selection, actor=who)
        )

    @observed("forget")
    async def forget(
        self,
        *,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> ForgetResult:
        """``delete_all`` (the same arguments and memories), and in the same transaction the
        observational memory of the sessions concerned: every session named by the
        ``session_id`` of a memory deleted, and ``session_id`` when given. Their session
        messages, observations, reflections and graph relations (and graph entities no
        relation uses any more) are deleted; the result counts each kind. Sessions are
        keyed by their session id only (``ms.sessions``): a user's session that no session
        memory of theirs names is not found, so name it with ``session_id`` (one call per
        session) or delete it with the session calls."""
        session_id = scope_ids.get("session_id")
        tenant = self._tenant(tenant_id)
        selection = self._checked_selection("forget", scope_ids, layers)
        who = check_actor(actor)
        keys = [session_id] if session_id is not None else []
        return await self._retry.run(
            "forget",
            lambda: self._forgetting.forget_where(tenant, selection, session_keys=keys, actor=who),
        )
