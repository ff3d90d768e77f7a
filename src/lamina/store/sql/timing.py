"""The time and dedup side of memories in SQL, for both backends (lamina.memory.timing):
the window a search or list sees, exact duplicates, invalidation, consolidation's one
transaction, and the expiry job's reads and deletes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.models import MemoryEntry
from lamina.memory.ports import (
    Consolidated,
    Consolidation,
    Invalidation,
    LayerSearch,
    NewMemory,
)
from lamina.memory.timing import TimeWindow, content_key
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.program import Executor, Lock, Program, count, row, rows

#: The lock space of exact-duplicate checks (sessions use 1, context items 0), and the
#: buckets of content keys per scope: a write takes at most this many locks per scope.
_DEDUP_LOCK = 2
_BUCKETS = 64
#: Keys per statement where a statement lists them.
_CHUNK = 500
HISTORY = (
    "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, old_content, "
    "new_content, old_metadata, new_metadata, actor, at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def window_sql(d: Dialect, window: TimeWindow) -> tuple[str, list[Any]]:
    """The SQL condition of a time window over ``memories`` columns, and its parameters
    (the same semantics as TimeWindow.admits)."""
    at = d.time(window.at)
    parts = ["(expires_at IS NULL OR expires_at > %s)"]
    params: list[Any] = [at]
    if not window.include_invalid:
        parts.append("(valid_from IS NULL OR valid_from <= %s)")
        parts.append("(valid_until IS NULL OR valid_until > %s)")
        params += [at, at]
    if window.since is not None:
        parts.append("event_at >= %s")
        params.append(d.time(window.since))
    if window.until is not None:
        parts.append("event_at < %s")
        params.append(d.time(window.until))
    return " AND ".join(parts), params


def conflict(memory_id: str) -> LaminaError:
    return LaminaError(
        ErrorCode.CONFLICT,
        f"memory {memory_id!r} changed while it was being consolidated: nothing was written",
        retryable=True,
        details={"id": memory_id},
    )


def missing(memory_id: str, why: str = "") -> LaminaError:
    return LaminaError(
        ErrorCode.MEMORY_NOT_FOUND,
        f"memory {memory_id!r} not found{why}",
        details={"id": memory_id},
    )


class SqlTiming(ABC):
    """Time windows, duplicates, invalidation, consolidation and expiry, for SqlMemories."""

    _exec: Executor
    _d: Dialect
    _columns: str
    #: Tenants with expired memories: (at, limit) -> rows of one tenant id each.
    expired_tenants_sql: ClassVar[str] = (
        "SELECT DISTINCT tenant_id FROM (SELECT tenant_id FROM memories "
        "WHERE expires_at <= %s ORDER BY expires_at LIMIT %s) AS m"
    )

    @abstractmethod
    def _entry(self, values: Sequence[Any]) -> MemoryEntry: ...

    @abstractmethod
    def _insert(self, memories: list[NewMemory], actor: str | None) -> Program[list[MemoryEntry]]:
        """Insert memories (deduplicating those that ask for it)."""

    @abstractmethod
    def _add_messages(
        self, memories: list[NewMemory], actor: str | None
    ) -> Program[list[MemoryEntry]]: ...

    @abstractmethod
    def _update(
        self,
        tenant_id: str,
        memory_id: str,
        content: str | None,
        embedding: Vector | None,
        patch: dict[str, Any] | None,
        actor: str | None,
        seen: datetime | None = None,
    ) -> Program[MemoryEntry]: ...

    @abstractmethod
    def _delete(self, tenant_id: str, memory_ids: list[str], actor: str | None) -> Program[int]: ...

    def _param(self, value: datetime | None) -> Any:
        return None if value is None else self._d.time(value)

    def _window(self, window: TimeWindow | None) -> tuple[str, list[Any]]:
        return window_sql(self._d, window or TimeWindow())

    def _candidates(self, req: LayerSearch) -> tuple[str, list[Any]]:
        """The condition a search's candidates meet besides the metadata filter: its time
        window, and not a conversation message when it wants facts only."""
        condition, params = self._window(req.window)
        if not req.messages:
            condition += " AND conversation_id IS NULL"
        return condition, params

    # -- duplicates -------------------------------------------------------------------------

    def _duplicates(
        self, memories: Sequence[NewMemory], now: datetime
    ) -> Program[dict[int, MemoryEntry | int]]:
        """For each memory asking for dedup that has an exact duplicate: the stored one (valid
        and not expired at ``now``), else the index of an earlier one of ``memories``. Each
        content key's lock bucket is taken first, in one order: concurrent writers of one
        content wait for each other, and the second finds the first's row."""
        keys = {
            i: (m.tenant_id, m.scope.layer.value, m.scope.key, content_key(m.content))
            for i, m in enumerate(memories)
            if m.dedup
        }
        if not keys:
            return {}
        for bucket in sorted({(*k[:3], int(k[3][:8], 16) % _BUCKETS) for k in keys.values()}):
            yield Lock("\n".join(map(str, bucket)), _DEDUP_LOCK)
        condition, params = window_sql(self._d, TimeWindow(now))
        by_scope: dict[tuple[str, str, str], list[str]] = {}
        for key in sorted(set(keys.values())):
            by_scope.setdefault(key[:3], []).append(key[3])
        stored: dict[tuple[str, str, str, str], MemoryEntry] = {}
        for scope, hashes in by_scope.items():
            for start in range(0, len(hashes), _CHUNK):
                chunk, values = self._d.any_of("content_key", hashes[start : start + _CHUNK])
                found = yield rows(
                    f"SELECT {self._columns}, content_key FROM memories WHERE tenant_id = %s "  # noqa: S608
                    f"AND layer = %s AND scope_key = %s AND {chunk} AND {condition} "
                    f"ORDER BY {self._d.seq}",
                    *scope,
                    *values,
                    *params,
                )
                for r in found:
                    entry = self._entry(r).model_copy(update={"deduplicated": True})
                    stored.setdefault((*scope, str(r[-1])), entry)
        out: dict[int, MemoryEntry | int] = {}
        first: dict[tuple[str, str, str, str], int] = {}
        for i, key in keys.items():
            if key in stored:
                out[i] = stored[key]
            elif key in first:
                out[i] = first[key]
            else:
                first[key] = i
        return out

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
                        tenant, r.memory_id, r.content, r.embedding, r.metadata_patch, actor, r.seen
                    )
                )
            )
        invalidated = yield from self._invalidate(tenant, list(change.invalidated), actor)
        added = (yield from self._insert(list(change.added), actor)) if change.added else []
        return Consolidated(messages, added, revised, invalidated)

    # -- expiry -----------------------------------------------------------------------------

    async def expired_tenants(self, at: datetime, limit: int) -> list[str]:
        def read() -> Program[list[str]]:
            found = yield rows(self.expired_tenants_sql, self._d.time(at), limit)
            return [str(r[0]) for r in found]

        return await self._exec.read(None, "expired tenants", read())

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
