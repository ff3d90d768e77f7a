"""The context items (store/context_base.py) in the SQLite file, searched through the same
in-process vector and BM25 indexes as memories (partition: tenant, kind)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import numpy as np

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
from lamina.store.sqlite_db import Database
from lamina.store.sqlite_indexes import SyncedIndexes
from lamina.text import analyze, encode_terms

T = TypeVar("T")
Runner = Callable[..., Awaitable[Any]]

_COLUMNS = (
    "pk, id, tenant_id, kind, key, version, is_latest, category, content, data, tags, "
    "created_at, updated_at, embedding"
)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _record(row: tuple[Any, ...]) -> ContextRecord:
    return ContextRecord(
        id=row[1],
        tenant_id=row[2],
        kind=ItemKind(row[3]),
        key=row[4],
        version=row[5],
        is_latest=bool(row[6]),
        category=row[7],
        content=row[8],
        data=json.loads(row[9]),
        tags=json.loads(row[10]),
        created_at=datetime.fromisoformat(row[11]),
        updated_at=datetime.fromisoformat(row[12]),
    )


def _blob(vector: Any) -> bytes | None:
    return None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()


def _tag_match(tags: Sequence[str], wanted: Sequence[str]) -> bool:
    return not wanted or bool(set(tags) & set(wanted))


class SQLiteContextItems:
    """The ContextItemStore protocol on the embedded store's file."""

    def __init__(self, db: Database, indexes: SyncedIndexes, run: Runner) -> None:
        self._db = db
        self._indexes = indexes
        self._run = run

    # -- writes -----------------------------------------------------------------------------

    async def put_item(self, item: NewContextRecord, *, versioned: bool) -> ContextRecord:
        result: ContextRecord = await self._run("save", self._put, item, versioned)
        return result

    def _put(self, item: NewContextRecord, versioned: bool) -> ContextRecord:
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        lexicon = encode_terms(analyze(item.content))
        with self._db.write() as conn:
            # The newest version is the latest (the unique key index serves this lookup).
            latest = conn.execute(
                "SELECT pk, version FROM context_items WHERE tenant_id = ? "
                "AND kind = ? AND key = ? ORDER BY version DESC LIMIT 1",
                (item.tenant_id, item.kind.value, item.key),
            ).fetchone()
            values = (
                item.category,
                item.content,
                _dumps(item.data),
                _dumps(item.tags),
                _blob(item.embedding),
                lexicon,
                now,
            )
            if latest is not None and not versioned:
                conn.execute(
                    "UPDATE context_items SET category = ?, content = ?, data = ?, tags = ?, "
                    "embedding = ?, lexicon = ?, updated_at = ?, version = version + 1 "
                    "WHERE pk = ?",
                    (*values, latest[0]),
                )
                pk = latest[0]
            else:
                if latest is not None:
                    conn.execute(
                        "UPDATE context_items SET is_latest = 0 WHERE pk = ?", (latest[0],)
                    )
                pk = conn.execute(
                    "INSERT INTO context_items (id, tenant_id, kind, key, version, is_latest, "
                    "category, content, data, tags, embedding, lexicon, updated_at, created_at) "
                    "VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        str(uuid.uuid4()),
                        item.tenant_id,
                        item.kind.value,
                        item.key,
                        1 if latest is None else latest[1] + 1,
                        *values,
                        now,
                    ),
                ).lastrowid
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM context_items WHERE pk = ?",  # noqa: S608
                (pk,),
            ).fetchone()
        return _record(row)

    async def delete_item(self, tenant_id: str, kind: ItemKind, key: str) -> int:
        count: int = await self._run("delete", self._delete, tenant_id, kind, key)
        return count

    def _delete(self, tenant_id: str, kind: ItemKind, key: str) -> int:
        with self._db.write() as conn:
            row = self._resolve(conn, tenant_id, kind, key)
            if row is None:
                return 0
            return conn.execute(
                "DELETE FROM context_items WHERE tenant_id = ? AND kind = ? AND key = ?",
                (tenant_id, kind.value, row),
            ).rowcount

    async def modify_items(
        self, tenant_id: str, kind: ItemKind, keys: Sequence[str], change: DataChange
    ) -> list[ContextRecord]:
        result: list[ContextRecord] = await self._run(
            "update", self._modify, tenant_id, kind, list(dict.fromkeys(keys)), change
        )
        return result

    def _modify(
        self, tenant_id: str, kind: ItemKind, keys: list[str], change: DataChange
    ) -> list[ContextRecord]:
        now = datetime.now(UTC).isoformat(timespec="microseconds")
        out = []
        with self._db.write() as conn:
            for key in keys:
                row = conn.execute(
                    f"SELECT {_COLUMNS} FROM context_items WHERE tenant_id = ? "  # noqa: S608
                    "AND kind = ? AND key = ? ORDER BY version DESC LIMIT 1",
                    (tenant_id, kind.value, key),
                ).fetchone()
                if row is None:
                    continue
                data = change(key, json.loads(row[9]))
                conn.execute(
                    "UPDATE context_items SET data = ?, updated_at = ? WHERE pk = ?",
                    (_dumps(data), now, row[0]),
                )
                out.append(_record((*row[:9], _dumps(data), row[10], row[11], now, row[13])))
        return out

    # -- reads ------------------------------------------------------------------------------

    @staticmethod
    def _resolve(conn: sqlite3.Connection, tenant_id: str, kind: ItemKind, key: str) -> str | None:
        """The key of an item given its key or the id of one of its versions."""
        for column in ("key", "id"):  # two lookups, each on its own unique index
            row = conn.execute(
                f"SELECT key FROM context_items WHERE tenant_id = ? AND kind = ? "  # noqa: S608
                f"AND {column} = ? LIMIT 1",
                (tenant_id, kind.value, key),
            ).fetchone()
            if row is not None:
                return str(row[0])
        return None

    async def get_item(
        self, tenant_id: str, kind: ItemKind, key: str, *, all_versions: bool = False
    ) -> list[ContextRecord]:
        result: list[ContextRecord] = await self._run(
            "get", self._get, tenant_id, kind, key, all_versions
        )
        return result

    def _get(
        self, tenant_id: str, kind: ItemKind, key: str, all_versions: bool
    ) -> list[ContextRecord]:
        with self._db.snapshot() as conn:
            resolved = self._resolve(conn, tenant_id, kind, key)
            if resolved is None:
                return []
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM context_items WHERE tenant_id = ? "  # noqa: S608
                "AND kind = ? AND key = ? ORDER BY version DESC",
                (tenant_id, kind.value, resolved),
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
        result: tuple[list[ContextRecord], str | None, int] = await self._run(
            "list", self._list, tenant_id, kind, category, list(tags), limit, after
        )
        return result

    def _list(
        self,
        tenant_id: str,
        kind: ItemKind,
        category: str | None,
        tags: list[str],
        limit: int,
        after: int,
    ) -> tuple[list[ContextRecord], str | None, int]:
        where = "tenant_id = ? AND kind = ? AND is_latest = 1"
        params: list[Any] = [tenant_id, kind.value]
        if category is not None:
            where += " AND category = ?"
            params.append(category)
        if tags:
            marks = ", ".join("?" * len(tags))
            where += f" AND EXISTS (SELECT 1 FROM json_each(tags) WHERE value IN ({marks}))"  # noqa: S608
            params.extend(tags)
        with self._db.snapshot() as conn:
            total = conn.execute(
                f"SELECT count(*) FROM context_items WHERE {where}",  # noqa: S608
                params,
            ).fetchone()[0]
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM context_items WHERE {where} AND pk > ? "  # noqa: S608
                "ORDER BY pk LIMIT ?",
                (*params, after, limit + 1),
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return [_record(r) for r in rows], encode_cursor(rows[-1][0]) if more else None, total

    # -- search -----------------------------------------------------------------------------

    async def search_items(self, query: ItemQuery) -> list[tuple[ContextRecord, float]]:
        result: list[tuple[ContextRecord, float]] = await self._run("search", self._search, query)
        return result

    def _search(self, q: ItemQuery) -> list[tuple[ContextRecord, float]]:
        self._indexes.sync()
        part = (q.tenant_id, q.kind.value, "")
        filtered = q.category is not None or bool(q.tags)
        # With filters, rank a wider pool from the indexes and filter the rows read.
        pool = q.limit * 10 if filtered else q.limit
        keyword: dict[int, float] = {}
        cosines: dict[int, float | None] = {}
        if q.mode is not SearchMode.SEMANTIC and q.terms:
            keyword = dict(self._indexes.keyword_hits(part, list(q.terms), max(pool, 50)))
        if q.mode is not SearchMode.KEYWORD and q.vector is not None:
            cosines = dict(self._indexes.vector_hits(part, q.vector, None, max(pool, 50)))
        if q.mode is SearchMode.KEYWORD:
            ranked = rank_single(keyword, normalise=True)
        elif q.mode is SearchMode.SEMANTIC:
            ranked = rank_single({k: s for k, s in cosines.items() if s is not None})
        else:
            assert q.vector is not None
            cosines.update(self._indexes.cosines(keyword.keys() - cosines.keys(), q.vector))
            ranked = rank_fused(
                cosines, keyword, weight=q.semantic_weight, threshold=None, limit=max(pool, 50)
            )
        # Without filters the first ``limit`` are the answer: read only their rows.
        ranked = ranked[: max(pool, 50) if filtered else q.limit]
        if not ranked:
            return []
        pks = [pk for _, pk in ranked]
        with self._db.snapshot() as conn:
            rows = {
                r[0]: r
                for lo in range(0, len(pks), 500)
                for r in conn.execute(
                    f"SELECT {_COLUMNS} FROM context_items WHERE pk IN "  # noqa: S608
                    f"({', '.join('?' * len(pks[lo : lo + 500]))}) AND is_latest = 1",
                    pks[lo : lo + 500],
                )
            }
        out = []
        for score, pk in ranked:
            row = rows.get(pk)
            if row is None:
                continue
            record = _record(row)
            if q.category is not None and record.category != q.category:
                continue
            if not _tag_match(record.tags, q.tags):
                continue
            out.append((record, max(0.0, min(1.0, float(score)))))
            if len(out) == q.limit:
                break
        return out
