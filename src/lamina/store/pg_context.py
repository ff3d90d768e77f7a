"""The context items (store/context_base.py) in PostgreSQL: HNSW and tsvector + GIN over the
latest versions (partial indexes), row-level security on tenant_id as for memories."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from lamina.memory.models import SearchMode
from lamina.memory.scoring import rank_fused, rank_single
from lamina.store.base import decode_cursor, encode_cursor
from lamina.store.context_base import (
    ContextRecord,
    DataChange,
    ItemKind,
    ItemQuery,
    NewContextRecord,
)
from lamina.store.pg_filters import (
    ANY_WORD_CAP,
    choose_keyword_level,
    from_pg_vector,
    to_pg_vector,
)
from lamina.text import keyword_terms

Transaction = Callable[[str | None, str], AbstractAsyncContextManager[Any]]

_COLUMNS = (
    "seq, id, tenant_id, kind, key, version, is_latest, category, content, data, tags, "
    "created_at, updated_at, embedding"
)


def _record(row: Sequence[Any]) -> ContextRecord:
    return ContextRecord(
        id=row[1],
        tenant_id=row[2],
        kind=ItemKind(row[3]),
        key=row[4],
        version=row[5],
        is_latest=bool(row[6]),
        category=row[7],
        content=row[8],
        data=dict(row[9]),
        tags=list(row[10]),
        created_at=row[11],
        updated_at=row[12],
    )


class PostgresContextItems:
    """The ContextItemStore protocol on the PostgreSQL store's pool and transactions."""

    def __init__(self, tx: Transaction, ef_search: int) -> None:
        self._tx = tx
        self._ef_search = ef_search

    async def put_item(self, item: NewContextRecord, *, versioned: bool) -> ContextRecord:
        now = datetime.now(UTC)
        vector = None if item.embedding is None else to_pg_vector(item.embedding)
        values = (item.category, item.content, Jsonb(item.data), Jsonb(item.tags), vector, now)
        async with self._tx(item.tenant_id, "save") as conn:
            # Serialise writers of one key: the row lock on the latest version, or (for a new
            # key) an advisory lock on the key, so two first saves cannot both be version 1.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{item.tenant_id}\n{item.kind.value}\n{item.key}",),
            )
            latest = await (
                await conn.execute(
                    # The newest version is the latest; the unique key index finds it.
                    "SELECT seq, version FROM context_items WHERE tenant_id = %s AND kind = %s "
                    "AND key = %s ORDER BY version DESC LIMIT 1 FOR UPDATE",
                    (item.tenant_id, item.kind.value, item.key),
                )
            ).fetchone()
            if latest is not None and not versioned:
                row = await (
                    await conn.execute(
                        "UPDATE context_items SET category = %s, content = %s, data = %s, "  # noqa: S608
                        "tags = %s, embedding = %s, updated_at = %s, version = version + 1 "
                        f"WHERE tenant_id = %s AND seq = %s RETURNING {_COLUMNS}",
                        (*values, item.tenant_id, latest[0]),
                    )
                ).fetchone()
            else:
                if latest is not None:
                    await conn.execute(
                        "UPDATE context_items SET is_latest = false "
                        "WHERE tenant_id = %s AND seq = %s",
                        (item.tenant_id, latest[0]),
                    )
                row = await (
                    await conn.execute(
                        "INSERT INTO context_items (tenant_id, kind, id, key, version, "  # noqa: S608
                        "is_latest, category, content, data, tags, embedding, updated_at, "
                        "created_at) VALUES (%s, %s, %s, %s, %s, true, %s, %s, %s, %s, %s, %s, "
                        f"%s) RETURNING {_COLUMNS}",
                        (
                            item.tenant_id,
                            item.kind.value,
                            str(uuid.uuid4()),
                            item.key,
                            1 if latest is None else latest[1] + 1,
                            *values,
                            now,
                        ),
                    )
                ).fetchone()
        return _record(row)

    @staticmethod
    async def _resolve(conn: Any, tenant_id: str, kind: ItemKind, key: str) -> str | None:
        row = await (
            await conn.execute(
                "SELECT key FROM context_items WHERE tenant_id = %s AND kind = %s "
                "AND (key = %s OR id = %s) ORDER BY key = %s DESC LIMIT 1",
                (tenant_id, kind.value, key, key, key),
            )
        ).fetchone()
        return None if row is None else str(row[0])

    async def get_item(
        self, tenant_id: str, kind: ItemKind, key: str, *, all_versions: bool = False
    ) -> list[ContextRecord]:
        async with self._tx(tenant_id, "get") as conn:
            resolved = await self._resolve(conn, tenant_id, kind, key)
            if resolved is None:
                return []
            rows = await (
                await conn.execute(
                    f"SELECT {_COLUMNS} FROM context_items WHERE tenant_id = %s "  # noqa: S608
                    "AND kind = %s AND key = %s ORDER BY version DESC",
                    (tenant_id, kind.value, resolved),
                )
            ).fetchall()
        records = [_record(r) for r in rows]
        return records if all_versions else records[:1]

    async def list_items(
        self,
        tenant_id: str,
        kind: ItemKind,
        *,
        category: str | None,
        tags: Sequence[str],
        limit: int,
        cursor: str | None,
    ) -> tuple[list[ContextRecord], str | None, int]:
        after = 0 if cursor is None else decode_cursor(cursor)
        where = "tenant_id = %s AND kind = %s AND is_latest"
        params: list[Any] = [tenant_id, kind.value]
        if category is not None:
            where += " AND category = %s"
            params.append(category)
        if tags:
            where += " AND tags ?| %s"
            params.append(list(tags))
        async with self._tx(tenant_id, "list") as conn:
            count = await (
                await conn.execute(
                    f"SELECT count(*) FROM context_items WHERE {where}",  # noqa: S608
                    params,
                )
            ).fetchone()
            rows = await (
                await conn.execute(
                    f"SELECT {_COLUMNS} FROM context_items WHERE {where} "  # noqa: S608
                    "AND seq > %s ORDER BY seq LIMIT %s",
                    (*params, after, limit + 1),
                )
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        next_cursor = encode_cursor(rows[-1][0]) if more else None
        return [_record(r) for r in rows], next_cursor, int(count[0] if count else 0)

    async def delete_item(self, tenant_id: str, kind: ItemKind, key: str) -> int:
        async with self._tx(tenant_id, "delete") as conn:
            resolved = await self._resolve(conn, tenant_id, kind, key)
            if resolved is None:
                return 0
            cur = await conn.execute(
                "DELETE FROM context_items WHERE tenant_id = %s AND kind = %s AND key = %s",
                (tenant_id, kind.value, resolved),
            )
            return int(cur.rowcount)

    async def modify_items(
        self, tenant_id: str, kind: ItemKind, keys: Sequence[str], change: DataChange
    ) -> list[ContextRecord]:
        now = datetime.now(UTC)
        out = []
        async with self._tx(tenant_id, "update") as conn:
            for key in sorted(set(keys)):  # one lock order: no deadlock between writers
                row = await (
                    await conn.execute(
                        "SELECT seq, data FROM context_items WHERE tenant_id = %s "
                        "AND kind = %s AND key = %s ORDER BY version DESC LIMIT 1 FOR UPDATE",
                        (tenant_id, kind.value, key),
                    )
                ).fetchone()
                if row is None:
                    continue
                updated = await (
                    await conn.execute(
                        "UPDATE context_items SET data = %s, updated_at = %s "  # noqa: S608
                        f"WHERE tenant_id = %s AND seq = %s RETURNING {_COLUMNS}",
                        (Jsonb(change(key, dict(row[1]))), now, tenant_id, row[0]),
                    )
                ).fetchone()
                out.append(_record(updated))
        return out

    async def search_items(self, query: ItemQuery) -> list[tuple[ContextRecord, float]]:
        q = query
        filtered = q.category is not None or bool(q.tags)
        pool = max(q.limit * (10 if filtered else 1), 50)
        where = "tenant_id = %s AND kind = %s AND is_latest"
        params: list[Any] = [q.tenant_id, q.kind.value]
        if q.category is not None:
            where += " AND category = %s"
            params.append(q.category)
        if q.tags:
            where += " AND tags ?| %s"
            params.append(list(q.tags))
        rows: dict[int, Any] = {}
        keyword: dict[int, float] = {}
        cosines: dict[int, float | None] = {}
        async with self._tx(q.tenant_id, "search") as conn:
            words = keyword_terms(q.text)
            if q.mode is not SearchMode.SEMANTIC and words:
                level, any_word = await choose_keyword_level(
                    conn,
                    f"SELECT count(*) FROM (SELECT 1 FROM context_items WHERE {where} "  # noqa: S608
                    "AND tsv @@ to_tsquery('english', %s) LIMIT %s) s",
                    tuple(params),
                    (),
                    words,
                    pool,
                )
                cap = f" LIMIT {ANY_WORD_CAP}" if any_word else ""
                for r in await (
                    await conn.execute(
                        f"SELECT {_COLUMNS}, ts_rank(tsv, to_tsquery('english', %s), 1) "  # noqa: S608
                        f"FROM (SELECT * FROM context_items WHERE {where} "
                        f"AND tsv @@ to_tsquery('english', %s){cap}) c "
                        "ORDER BY 15 DESC, seq LIMIT %s",
                        (" | ".join(words), *params, level, pool),
                    )
                ).fetchall():
                    rows[r[0]] = r
                    keyword[r[0]] = float(r[14])
            if q.mode is not SearchMode.KEYWORD and q.vector is not None:
                vector = to_pg_vector(q.vector)
                await conn.execute(f"SET LOCAL hnsw.ef_search = {max(self._ef_search, pool)}")
                for r in await (
                    await conn.execute(
                        f"SELECT {_COLUMNS}, 1 - (embedding <=> %s) FROM context_items "  # noqa: S608
                        f"WHERE {where} AND embedding IS NOT NULL "
                        "ORDER BY embedding <=> %s LIMIT %s",
                        (vector, *params, vector, pool),
                    )
                ).fetchall():
                    rows[r[0]] = r
                    cosines[r[0]] = float(r[14])
        if q.mode is SearchMode.KEYWORD:
            ranked = rank_single(keyword, normalise=True)
        elif q.mode is SearchMode.SEMANTIC:
            ranked = rank_single({k: s for k, s in cosines.items() if s is not None})
        else:
            assert q.vector is not None
            for seq in keyword.keys() - cosines.keys():
                vector_value = from_pg_vector(rows[seq][13])
                cosines[seq] = None if vector_value is None else float(vector_value @ q.vector)
            ranked = rank_fused(
                cosines, keyword, weight=q.semantic_weight, threshold=None, limit=q.limit
            )
        return [
            (_record(rows[seq]), max(0.0, min(1.0, float(score))))
            for score, seq in ranked[: q.limit]
        ]
