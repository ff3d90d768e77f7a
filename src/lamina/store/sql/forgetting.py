"""Forgetting memories in SQL, for both backends (``SqlMemoryForgetting``, the forgetting
repository): counting and deleting the memories a selection chooses, forgetting them with
the observational memory of their sessions, and the expiry job. Each memory goes as
``Deletion`` (deletion.py) deletes one."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Unpack

from lamina.memory.models import ForgetResult
from lamina.memory.ports import Forgetting, Selection
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.program import Lock, Program, count, every, row, rows
from lamina.store.sql.task_forgetting import forget_in_tasks

#: The tables holding a session's observational memory, by session key (what ``forget``
#: deletes beside the memories; graph entities no relation uses any more go with them).
SESSION_TABLES = ("session_messages", "observations", "reflections", "graph_relations")

#: Tenants with expired memories: (at, limit) -> rows of one tenant id each.
EXPIRED_TENANTS = (
    "SELECT DISTINCT tenant_id FROM (SELECT tenant_id FROM memories "
    "WHERE expires_at <= %s ORDER BY expires_at LIMIT %s) AS m"
)


class SqlMemoryForgetting:
    """count_where, delete_where, forget_where, expired_tenants and purge_expired
    (lamina.memory.ports.MemoryForgettingStore)."""

    def __init__(self, parts: MemoryParts, *, expired_tenants_sql: str = EXPIRED_TENANTS) -> None:
        self._rows = parts.rows
        self._exec = parts.rows.executor
        self._d = parts.rows.dialect
        self._deletion = parts.deletion
        #: Tenants with expired memories: (at, limit) -> rows of one tenant id each.
        self._expired_tenants_sql = expired_tenants_sql

    async def count_where(self, tenant_id: str, selection: Selection) -> int:
        # One count per layer, added: each uses the scope index, where one OR of them has
        # the planner scan the tenant.
        terms = self._rows.selected_terms(selection)
        if not terms:
            return 0
        counts = " + ".join(
            f"(SELECT count(*) FROM memories WHERE tenant_id = %s AND {term})"  # noqa: S608
            for term, _ in terms
        )
        params = [p for _, values in terms for p in (tenant_id, *values)]
        read = row(f"SELECT {counts}", *params)

        def counted() -> Program[int]:
            found = yield read
            return int(found[0])

        return await self._exec.read(tenant_id, "count_all", counted())

    async def delete_where(
        self, tenant_id: str, selection: Selection, *, actor: str | None = None
    ) -> int:
        def write() -> Program[int]:
            deleted, _ = yield from self._delete_selected(tenant_id, selection, actor)
            return deleted

        deleted = await self._exec.write(tenant_id, "delete_all", write())
        await self._deletion.settle(deleted)
        return deleted

    async def forget_where(
        self, tenant_id: str, selection: Selection, **forgetting: Unpack[Forgetting]
    ) -> ForgetResult:
        def write() -> Program[ForgetResult]:
            actor = forgetting.get("actor")
            deleted, identifiers = yield from self._delete_selected(tenant_id, selection, actor)
            keys = dict.fromkeys(forgetting.get("session_keys", ()))
            for stored in identifiers:
                session = self._d.from_json(stored).get("session_id")
                if isinstance(session, str):
                    keys.setdefault(session, None)
            counts = yield from self._forget_sessions(tenant_id, sorted(keys))
            return ForgetResult(memories=deleted, sessions=sorted(keys), **counts)

        done = await self._exec.write(tenant_id, "forget", write())
        await self._deletion.settle(
            done.memories + done.session_messages + done.observations + done.reflections
        )
        return done

    def _delete_selected(
        self, tenant_id: str, selection: Selection, actor: str | None
    ) -> Program[tuple[int, list[Any]]]:
        """Delete the memories ``selection`` chooses (each as ``delete`` forgets one): how
        many, and the identifiers of each as stored (``delete_all`` and ``forget``)."""
        where, params = self._rows.selected(selection, tenant_id)
        found = yield rows(
            f"SELECT id, identifiers FROM memories WHERE {where}",  # noqa: S608
            *params,
        )
        if not found:
            return 0, []
        deleted = yield from self._deletion.delete(tenant_id, [str(r[0]) for r in found], actor)
        return deleted, [r[1] for r in found]

    def _forget_sessions(self, tenant_id: str, keys: list[str]) -> Program[dict[str, int]]:
        """Delete the observational memory of the sessions ``keys`` (under each session's
        lock, as every session write takes it) and rewrite the A2A tasks naming them; the
        rows deleted per table."""
        counts = dict.fromkeys(SESSION_TABLES, 0)
        d = self._d
        for key in keys:
            yield Lock(f"{tenant_id}\n{key}", 1)
        for chunk, params in d.any_of_chunks("session_key", keys):
            for table in ("session_messages", "observations", "reflections"):
                counts[table] += yield count(
                    f"DELETE FROM {table} WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                    tenant_id,
                    *params,
                )
            for table in ("session_leases", "session_prompts"):
                yield count(
                    f"DELETE FROM {table} WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                    tenant_id,
                    *params,
                )
            ends = yield rows(
                f"DELETE FROM graph_relations WHERE tenant_id = %s AND {chunk} "  # noqa: S608
                f"RETURNING source_{d.graph_id}, target_{d.graph_id}",
                tenant_id,
                *params,
            )
            counts["graph_relations"] += len(ends)
            entities = sorted({e for r in ends for e in r})
            for ids, values in d.any_of_chunks(d.graph_id, entities):
                yield count(
                    f"DELETE FROM graph_entities WHERE tenant_id = %s AND {ids} AND NOT EXISTS "  # noqa: S608
                    "(SELECT 1 FROM graph_relations r WHERE r.tenant_id = graph_entities.tenant_id "
                    f"AND graph_entities.{d.graph_id} IN (r.source_{d.graph_id}, "
                    f"r.target_{d.graph_id}))",
                    tenant_id,
                    *values,
                )
        if keys:
            yield from forget_in_tasks(d, tenant_id, sessions=keys)
        return counts

    # -- expiry -----------------------------------------------------------------------------

    async def expired_tenants(self, at: datetime, limit: int) -> list[str]:
        read = every(lambda r: str(r[0]), self._expired_tenants_sql, self._d.time(at), limit)
        return await self._exec.read(None, "expired tenants", read)

    async def purge_expired(
        self, tenant_id: str, at: datetime, limit: int, *, actor: str | None = None
    ) -> int:
        def purge() -> Program[int]:
            found = yield rows(
                "SELECT id FROM memories WHERE tenant_id = %s AND expires_at <= %s "
                "ORDER BY expires_at LIMIT %s",
                tenant_id,
                self._d.time(at),
                limit,
            )
            if not found:
                return 0
            return (yield from self._deletion.delete(tenant_id, [str(r[0]) for r in found], actor))

        deleted = await self._exec.write(tenant_id, "purge expired", purge())
        await self._deletion.settle(deleted)
        return deleted
