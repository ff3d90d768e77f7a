"""Context items (lamina.context.ports.ContextItemStore) in SQL, for both backends.

Writes, reads and listing are shared; search is the backend's own (in-process indexes on
SQLite, tsvector and HNSW on PostgreSQL), ranked the same way by ``rank``.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Unpack

from lamina.context.ports import DataChange
from lamina.memory.items import ContextRecord, ItemKind, ItemListing, ItemQuery, NewContextRecord
from lamina.memory.models import SearchMode
from lamina.memory.scoring import rank_fused, rank_single
from lamina.store.cursors import decode_cursor, encode_cursor
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.meta import EmbeddingState
from lamina.store.sql.program import Executor, Lock, Program, count, row, rows
from lamina.store.sql.rows import RECORD, RecordRow


def rank(
    q: ItemQuery, keyword: dict[int, float], cosines: dict[int, float | None], limit: int
) -> list[tuple[float, int]]:
    """(score, row) best first, by the query's mode (hybrid: fused like memory search)."""
    if q.mode is SearchMode.KEYWORD:
        return rank_single(keyword, normalise=True)
    if q.mode is SearchMode.SEMANTIC:
        return rank_single({k: s for k, s in cosines.items() if s is not None})
    return rank_fused(cosines, keyword, weight=q.semantic_weight, threshold=None, limit=limit)


class SqlContextItems(ABC):
    """The ContextItemStore protocol but ``search_items``, which each backend adds."""

    def __init__(self, executor: Executor, dialect: Dialect, embedding: EmbeddingState) -> None:
        self._exec = executor
        self._d = dialect
        #: Shared with the store's memories: whether the vectors are of another model.
        self.embedding = embedding
        #: Every column a query reads: the row sequence, the record, the embedding.
        self._columns = f"{dialect.seq}, {RECORD}, embedding"

    @abstractmethod
    async def search_items(self, query: ItemQuery) -> list[tuple[ContextRecord, float]]: ...

    def _searchable(self, query: ItemQuery) -> ItemQuery:
        """As for memories: while the vectors are of another model, semantic search is
        refused and hybrid search runs on keywords only."""
        mode = self.embedding.status.usable_mode(query.mode)
        if mode is query.mode:
            return query
        return replace(query, mode=mode, vector=None)

    def record_of_row(self, values: Sequence[Any]) -> ContextRecord:
        """A context item's row (sequence, then the record's columns in order) as a record."""
        d, r = self._d, RecordRow(*values)
        return ContextRecord(
            id=r.id,
            tenant_id=r.tenant_id,
            kind=ItemKind(r.kind),
            key=r.key,
            version=r.version,
            is_latest=bool(r.is_latest),
            category=r.category,
            content=r.content,
            data=dict(d.from_json(r.data)),
            tags=list(d.from_json(r.tags)),
            created_at=d.from_time(r.created_at),
            updated_at=d.from_time(r.updated_at),
        )

    # -- writes -----------------------------------------------------------------------------

    async def put_item(self, item: NewContextRecord, *, versioned: bool) -> ContextRecord:
        return await self._exec.write(item.tenant_id, "save", self._put(item, versioned))

    def _put(self, item: NewContextRecord, versioned: bool) -> Program[ContextRecord]:
        d, seq = self._d, self._d.seq
        now = d.time(datetime.now(UTC))
        # While the store needs re-embedding, new vectors wait (NULL) for ``reembed``.
        embedding = None if self.embedding.stale else item.embedding
        vector = None if embedding is None else d.vector(embedding)
        columns = {
            "category": item.category,
            "content": item.content,
            "data": d.json(item.data),
            "tags": d.json(item.tags),
            "embedding": vector,
            **d.index_columns(item.content),
            "updated_at": now,
        }
        # Serialise writers of one key: the row lock on the latest version, or (for a new
        # key) a lock on the key, so two first saves cannot both be version 1.
        yield Lock(f"{item.tenant_id}\n{item.kind.value}\n{item.key}", 0)
        # The newest version is the latest (the unique key index serves this lookup).
        latest = yield row(
            f"SELECT {seq}, version FROM context_items WHERE tenant_id = %s AND kind = %s "  # noqa: S608
            f"AND key = %s ORDER BY version DESC LIMIT 1{d.for_update}",
            item.tenant_id,
            item.kind.value,
            item.key,
        )
        if latest is not None and not versioned:
            sets = ", ".join(f"{name} = %s" for name in columns)
            found = yield rows(
                f"UPDATE context_items SET {sets}, version = version + 1 "  # noqa: S608
                f"WHERE tenant_id = %s AND {seq} = %s RETURNING {self._columns}",
                *columns.values(),
                item.tenant_id,
                latest[0],
            )
            return self.record_of_row(found[0])
        if latest is not None:
            yield count(
                f"UPDATE context_items SET is_latest = {d.false} "  # noqa: S608
                f"WHERE tenant_id = %s AND {seq} = %s",
                item.tenant_id,
                latest[0],
            )
        names = ", ".join(columns)
        marks = ", ".join(["%s"] * len(columns))
        found = yield rows(
            "INSERT INTO context_items (tenant_id, kind, id, key, version, is_latest, "  # noqa: S608
            f"{names}, created_at) VALUES (%s, %s, %s, %s, %s, {d.true}, {marks}, %s) "
            f"RETURNING {self._columns}",
            item.tenant_id,
            item.kind.value,
            str(uuid.uuid4()),
            item.key,
            1 if latest is None else latest[1] + 1,
            *columns.values(),
            now,
        )
        return self.record_of_row(found[0])

    async def delete_item(self, tenant_id: str, kind: ItemKind, key: str) -> int:
        def delete() -> Program[int]:
            resolved = yield from self._resolve(tenant_id, kind, key)
            if resolved is None:
                return 0
            deleted = yield count(
                "DELETE FROM context_items WHERE tenant_id = %s AND kind = %s AND key = %s",
                tenant_id,
                kind.value,
                resolved,
            )
            return int(deleted)

        return await self._exec.write(tenant_id, "delete", delete())

    async def modify_items(
        self, tenant_id: str, kind: ItemKind, keys: Sequence[str], change: DataChange
    ) -> list[ContextRecord]:
        return await self._exec.write(
            tenant_id, "update", self._modify(tenant_id, kind, keys, change)
        )

    def _modify(
        self, tenant_id: str, kind: ItemKind, keys: Sequence[str], change: DataChange
    ) -> Program[list[ContextRecord]]:
        d, seq = self._d, self._d.seq
        now = d.time(datetime.now(UTC))
        out = []
        for key in sorted(set(keys)):  # one lock order: no deadlock between writers
            latest = yield row(
                f"SELECT {seq}, data FROM context_items WHERE tenant_id = %s "  # noqa: S608
                f"AND kind = %s AND key = %s ORDER BY version DESC LIMIT 1{d.for_update}",
                tenant_id,
                kind.value,
                key,
            )
            if latest is None:
                continue
            data = change(key, dict(d.from_json(latest[1])))
            found = yield rows(
                "UPDATE context_items SET data = %s, updated_at = %s "  # noqa: S608
                f"WHERE tenant_id = %s AND {seq} = %s RETURNING {self._columns}",
                d.json(data),
                now,
                tenant_id,
                latest[0],
            )
            out.append(self.record_of_row(found[0]))
        return out

    # -- reads ------------------------------------------------------------------------------

    def _resolve(self, tenant_id: str, kind: ItemKind, key: str) -> Program[str | None]:
        """The key of an item given its key or the id of one of its versions."""
        for column in ("key", "id"):  # two lookups, each on its own unique index
            found = yield row(
                f"SELECT key FROM context_items WHERE tenant_id = %s AND kind = %s "  # noqa: S608
                f"AND {column} = %s LIMIT 1",
                tenant_id,
                kind.value,
                key,
            )
            if found is not None:
                return str(found[0])
        return None

    async def get_item(
        self, tenant_id: str, kind: ItemKind, key: str, *, all_versions: bool = False
    ) -> list[ContextRecord]:
        def get() -> Program[list[ContextRecord]]:
            resolved = yield from self._resolve(tenant_id, kind, key)
            if resolved is None:
                return []
            found = yield rows(
                f"SELECT {self._columns} FROM context_items WHERE tenant_id = %s "  # noqa: S608
                "AND kind = %s AND key = %s ORDER BY version DESC",
                tenant_id,
                kind.value,
                resolved,
            )
            records = [self.record_of_row(r) for r in found]
            return records if all_versions else records[:1]

        return await self._exec.read(tenant_id, "get", get(), snapshot=True)

    def latest_where(
        self, tenant_id: str, kind: ItemKind, category: str | None, tags: Sequence[str]
    ) -> tuple[str, list[Any]]:
        """The condition (and its parameters) selecting latest versions of ``kind`` with
        the category and any of the tags asked for."""
        where = f"tenant_id = %s AND kind = %s AND {self._d.is_true('is_latest')}"
        params: list[Any] = [tenant_id, kind.value]
        if category is not None:
            where += " AND category = %s"
            params.append(category)
        if tags:
            condition, values = self._d.tags_any("tags", tags)
            where += f" AND {condition}"
            params.extend(values)
        return where, params

    async def list_items(
        self, tenant_id: str, kind: ItemKind, **listing: Unpack[ItemListing]
    ) -> tuple[list[ContextRecord], str | None, int]:
        cursor, limit = listing["cursor"], listing["limit"]
        after = 0 if cursor is None else decode_cursor(cursor)
        where, params = self.latest_where(tenant_id, kind, listing["category"], listing["tags"])

        def page() -> Program[tuple[list[ContextRecord], str | None, int]]:
            total = yield row(f"SELECT count(*) FROM context_items WHERE {where}", *params)  # noqa: S608
            select = f"SELECT {self._columns} FROM context_items"  # noqa: S608
            found = yield rows(self._d.seq_page(select, where), *params, after, limit + 1)
            more = len(found) > limit
            found = found[:limit]
            next_cursor = encode_cursor(found[-1][0]) if more else None
            return (
                [self.record_of_row(r) for r in found],
                next_cursor,
                int(total[0] if total else 0),
            )

        return await self._exec.read(tenant_id, "list", page(), snapshot=True)
