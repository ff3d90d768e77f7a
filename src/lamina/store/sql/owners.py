"""The owners of memories in SQL, for both backends (``SqlMemoryOwners``, the owners
repository): the hierarchy of identifiers (parents) and the counts of memories by scope;
the counts by layer are the backend's (SQLite: its in-process indexes)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import UTC, datetime

from lamina.memory.ports import ScopeCount, Selection
from lamina.store.sql.memory_rows import MemoryRows
from lamina.store.sql.program import Program, count, first, rows


class SqlMemoryOwners(ABC):
    """set_parent, get_parent, count_by_layer and count_scopes
    (lamina.memory.ports.MemoryOwnerStore); count_by_layer is the backend's."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows
        self._exec = rows.executor
        self._d = rows.dialect

    @abstractmethod
    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]: ...

    async def set_parent(self, tenant_id: str, level: str, child_id: str, parent_id: str) -> None:
        def write() -> Program[None]:
            yield count(
                "INSERT INTO hierarchy VALUES (%s, %s, %s, %s, %s) ON CONFLICT "
                "(tenant_id, level, child_id) DO UPDATE SET parent_id = excluded.parent_id, "
                "updated_at = excluded.updated_at",
                tenant_id,
                level,
                child_id,
                parent_id,
                self._d.time(datetime.now(UTC)),
            )

        await self._exec.write(tenant_id, "set_parent", write())

    async def get_parent(self, tenant_id: str, level: str, child_id: str) -> str | None:
        read = first(
            lambda found: str(found[0]),
            "SELECT parent_id FROM hierarchy WHERE tenant_id = %s AND level = %s "
            "AND child_id IN (%s, '*') ORDER BY child_id = '*' LIMIT 1",
            tenant_id,
            level,
            child_id,
        )
        return await self._exec.read(tenant_id, "get_parent", read)

    async def count_scopes(self, query: ScopeCount) -> list[tuple[str, int]]:
        tenant_id, after = query.tenant_id, query.after
        terms = self._rows.selected_terms(Selection((query.layer,), query.identifiers))
        if not terms:
            return []
        ((term, params),) = terms
        later = "" if after is None else " AND scope_key > %s"
        read = rows(
            f"SELECT scope_key, count(*) FROM memories WHERE tenant_id = %s AND {term}{later} "  # noqa: S608
            "GROUP BY scope_key ORDER BY scope_key LIMIT %s",
            tenant_id,
            *params,
            *([] if after is None else [after]),
            query.limit,
        )

        def counted() -> Program[list[tuple[str, int]]]:
            found = yield read
            return [(str(r[0]), int(r[1])) for r in found]

        return await self._exec.read(tenant_id, "owners", counted())
