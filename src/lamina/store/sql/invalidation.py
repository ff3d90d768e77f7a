"""Invalidation, consolidation's one transaction and the expiry job of memories in SQL, for
both backends (lamina.memory.timing, lamina.memory.lifecycle): facts stop holding (kept,
with history), consolidation's changes commit all or none, expired memories are deleted."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from lamina.memory.models import MemoryEntry
from lamina.memory.ports import (
    Consolidated,
    Consolidation,
    Invalidation,
)
from lamina.store.sql.forgetting import SqlForgetting
from lamina.store.sql.memory_writes import SqlMemoryWrites
from lamina.store.sql.program import Program, count, every, row, rows
from lamina.store.sql.timing import HISTORY, conflict, missing


class SqlInvalidation(SqlMemoryWrites, SqlForgetting):
    """invalidate, consolidate, expired_tenants and purge_expired."""

    #: Tenants with expired memories: (at, limit) -> rows of one tenant id each.
    expired_tenants_sql: ClassVar[str] = (
        "SELECT DISTINCT tenant_id FROM (SELECT tenant_id FROM memories "
        "WHERE expires_at <= %s ORDER BY expires_at LIMIT %s) AS m"
    )

    # -- invalidation and consolidation -----------------------------------------------------

    async def invalidate(
        self, tenant_id: str, invalidations: Sequence[Invalidation], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        return await self._exec.write(
            tenant_id, "invalidate", self._invalidate(tenant_id, list(invalidations), actor)
        )

    def _invalidate(
        self, tenant_id: str, invalidations: list[Invalidation], actor: str | None
    ) -> Program[list[MemoryEntry]]:
        d = self._d
        out = []
        for inv in invalidations:
            found = yield row(
                f"SELECT {self._columns} FROM memories WHERE tenant_id = %s AND id = %s"  # noqa: S608
                f"{d.for_update}",
                tenant_id,
                inv.memory_id,
            )
            if found is None:
                raise missing(inv.memory_id)
            old = self._entry(found)
            if old.expires_at is not None and old.expires_at <= datetime.now(UTC):
                raise missing(inv.memory_id)
            if inv.seen is not None and old.updated_at != inv.seen:
                raise conflict(inv.memory_id)
            if old.valid_until is not None and old.valid_until <= inv.at:
                out.append(old)  # no longer valid by then already: nothing changes
                continue
            updated = max(datetime.now(UTC), old.updated_at + timedelta(microseconds=1))
            yield count(
                "UPDATE memories SET valid_until = %s, updated_at = %s "
                "WHERE tenant_id = %s AND id = %s",
                d.time(inv.at),
                d.time(updated),
                tenant_id,
                inv.memory_id,
            )
            metadata = d.json(old.metadata)
            yield count(
                HISTORY,
                *(tenant_id, old.id, "invalidate", old.layer.value, old.content, old.content),
                *(metadata, metadata, actor, d.time(updated)),
            )
            out.append(old.model_copy(update={"valid_until": inv.at, "updated_at": updated}))
        return out

    async def consolidate(self, change: Consolidation, *, actor: str | None = None) -> Consolidated:
        return await self._exec.write(
            change.tenant_id, "consolidate", self._consolidate(change, actor)
        )

    def _consolidate(self, change: Consolidation, actor: str | None) -> Program[Consolidated]:
        tenant = change.tenant_id
        messages = (
            (yield from self._add_messages(list(change.messages), actor))
            if (change.messages)
            else []
        )
        revised = []
        for r in change.revised:
            revised.append(
                (
                    yield from self._update(
                        tenant,
                        r.memory_id,
                        r.content,
                        r.embedding,
                        r.metadata_patch,
                        actor,
                        r.seen,
                        event_at=r.event_at,
                    )
                )
            )
        invalidated = yield from self._invalidate(tenant, list(change.invalidated), actor)
        added = (yield from self._insert(list(change.added), actor)) if change.added else []
        return Consolidated(messages, added, revised, invalidated)

    # -- expiry -----------------------------------------------------------------------------

    async def expired_tenants(self, at: datetime, limit: int) -> list[str]:
        read = every(lambda r: str(r[0]), self.expired_tenants_sql, self._d.time(at), limit)
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
            return (yield from self._delete(tenant_id, [str(r[0]) for r in found], actor))

        return await self._exec.write(tenant_id, "purge expired", purge())
