"""The embedded store: one SQLite file (WAL) and in-process vector and BM25 indexes.

SQLite holds everything durably; each process keeps an exact vector index and a BM25 keyword
index per scope in memory (sqlite_indexes.py), loaded on first search and kept in step with
every committed write, its own or another process's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import Condition, MetadataFilter, matches
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import (
    HistoryEvent,
    HistoryOperation,
    MemoryEntry,
    MemoryPage,
    SearchMode,
)
from lamina.memory.scoring import rank_fused
from lamina.store.base import (
    HealthStatus,
    LayerSearch,
    NewMemory,
    Scope,
    ScoredMemory,
    StoreCapabilities,
    Vector,
    decode_cursor,
    encode_cursor,
    updated_entry,
)
from lamina.store.sqlite_context import SQLiteContextItems
from lamina.store.sqlite_db import Database, translate
from lamina.store.sqlite_indexes import (
    CONTEXT_ITEMS,
    MEMORIES,
    IndexedTable,
    SyncedIndexes,
)
from lamina.store.sqlite_sessions import SQLiteSessions
from lamina.store.sqlite_threads import SQLiteThreads
from lamina.text import analyze, encode_terms

log = logging.getLogger(__name__)
T = TypeVar("T")

_COLUMNS = (
    "pk, id, tenant_id, layer, identifiers, content, metadata, embedding_model, "
    "created_at, updated_at, embedding"
)
_LOG_KEEP = 10_000
_LOG_PRUNE_AT = 100_000
_CHUNK = 256


def _now() -> datetime:
    return datetime.now(UTC)


def _ts(value: datetime) -> str:
    return value.isoformat(timespec="microseconds")


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _filter_json(flt: MetadataFilter) -> str:
    return _dumps(
        {"tags": list(flt.tags), "c": [[list(c.path), c.op, c.value] for c in flt.conditions]}
    )


@lru_cache(maxsize=512)
def _filter_from_json(raw: str) -> MetadataFilter:
    data = json.loads(raw)
    conditions = tuple(
        Condition(tuple(path), op, tuple(value) if op == "in" else value)
        for path, op, value in data["c"]
    )
    return MetadataFilter(tuple(data["tags"]), conditions)


def _match_udf(metadata: str, flt: str) -> int:
    return 1 if matches(_filter_from_json(flt), json.loads(metadata)) else 0


def _entry(row: sqlite3.Row | tuple[Any, ...]) -> MemoryEntry:
    return MemoryEntry(
        id=row[1],
        tenant_id=row[2],
        layer=MemoryLayer(row[3]),
        identifiers=json.loads(row[4]),
        content=row[5],
        metadata=json.loads(row[6]),
        embedding_model=row[7],
        created_at=datetime.fromisoformat(row[8]),
        updated_at=datetime.fromisoformat(row[9]),
        embedding_generated=row[10] is not None,
    )


def _vector(blob: bytes | None) -> Vector | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)


def _prune_log(conn: sqlite3.Connection, source: IndexedTable) -> None:
    """Keep an index log short; processes that fell behind the cut reload their indexes."""
    lo, hi = conn.execute(f"SELECT min(seq), max(seq) FROM {source.log}").fetchone()  # noqa: S608
    if hi is not None and hi - lo > _LOG_PRUNE_AT:
        conn.execute(f"DELETE FROM {source.log} WHERE seq <= ?", (hi - _LOG_KEEP,))  # noqa: S608
        conn.execute(
            "INSERT OR REPLACE INTO store_meta VALUES (?, ?)",
            (source.pruned_key, str(hi - _LOG_KEEP)),
        )


class SQLiteStore:
    """The store protocol on one SQLite file. Safe for many threads and processes."""

    def __init__(
        self,
        path: Path | str,
        embedder: Embedder,
        *,
        busy_timeout: float = 30.0,
        schema_target: int | None = None,
    ) -> None:
        self.path = Path(path)
        self._schema_target = schema_target  # None: the newest schema (tests pin older ones)
        self.embedder = embedder
        self._db = Database(self.path, {"ms_match": (2, _match_udf)}, busy_timeout)
        self._indexes = SyncedIndexes(self._db, embedder.dimensions)
        self.context_items = SQLiteContextItems(
            self._db, SyncedIndexes(self._db, embedder.dimensions, CONTEXT_ITEMS), self._run
        )
        self.sessions = SQLiteSessions(self._db, self._run)
        self.threads = SQLiteThreads(self._db, self._run)
        self.schema_version = 0

    # -- plumbing ---------------------------------------------------------------------------

    async def _run(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(self._call, operation, fn, *args)

    def _call(self, operation: str, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except sqlite3.Error as exc:
            raise translate(exc, operation) from exc

    # -- lifecycle --------------------------------------------------------------------------

    async def initialize(self) -> None:
        await self._run("initialize", self._initialize)

    def _initialize(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"cannot create data directory {self.path.parent}: {exc}",
            ) from exc
        self.schema_version = self._db.migrate(self._schema_target)
        model, dims = self.embedder.model_id, self.embedder.dimensions
        with self._db.write() as conn:
            meta = dict(conn.execute("SELECT key, value FROM store_meta").fetchall())
            if "embedding_model" not in meta:
                conn.executemany(
                    "INSERT INTO store_meta VALUES (?, ?)",
                    [("embedding_model", model), ("embedding_dimensions", str(dims))],
                )
            elif meta["embedding_model"] != model or meta["embedding_dimensions"] != str(dims):
                raise LaminaError(
                    ErrorCode.CONFIGURATION_ERROR,
                    f"the store {self.path} was built with embedding model "
                    f"{meta['embedding_model']} ({meta['embedding_dimensions']}-d); the configured "
                    f"embedder is {model} ({dims}-d). Use the same model or a new data directory.",
                    details={
                        "store_model": meta["embedding_model"],
                        "store_dimensions": int(meta["embedding_dimensions"]),
                        "embedder_model": model,
                        "embedder_dimensions": dims,
                    },
                )
            for source in (MEMORIES, CONTEXT_ITEMS):
                if source.since <= self.schema_version:
                    _prune_log(conn, source)

    async def shutdown(self) -> None:
        self._db.close()

    async def health_check(self) -> HealthStatus:
        try:
            count = await self._run(
                "health_check",
                lambda: (
                    self._db.connection().execute("SELECT count(*) FROM memories").fetchone()[0]
                ),
            )
        except LaminaError as exc:
            return HealthStatus(
                False, {"store": "sqlite", "path": str(self.path), "error": exc.message}
            )
        return HealthStatus(
            True,
            {
                "store": "sqlite",
                "path": str(self.path),
                "memories": count,
                "schema_version": self.schema_version,
            },
        )

    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(
            vector_search=True,
            keyword_search=True,
            embedding_dimensions=self.embedder.dimensions,
            distance_metrics=("cosine",),
            bulk_operations=True,
        )

    # -- embeddings -------------------------------------------------------------------------

    def _hash(self, text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    async def generate_embedding(
        self, tenant_id: str, texts: Sequence[str], *, cache: bool = True
    ) -> Vector:
        if not cache:
            return await self.embedder.embed(list(texts))
        hashes = [self._hash(t) for t in texts]
        unique = dict(zip(hashes, texts, strict=True))
        cached = await self._run("embedding cache", self._cache_get, tenant_id, list(unique))
        missing = [h for h in unique if h not in cached]
        if missing:
            vectors = await self.embedder.embed([unique[h] for h in missing])
            fresh = dict(zip(missing, vectors, strict=True))
            await self._run("embedding cache", self._cache_put, tenant_id, fresh)
            cached.update(fresh)
        dim = self.embedder.dimensions
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = cached[h]
        return out

    def _cache_get(self, tenant_id: str, hashes: list[str]) -> dict[str, Vector]:
        conn = self._db.connection()
        found: dict[str, Vector] = {}
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                "SELECT content_hash, vector FROM embedding_cache WHERE tenant_id = ? AND "  # noqa: S608
                f"model = ? AND content_hash IN ({marks})",
                (tenant_id, self.embedder.model_id, *chunk),
            )
            for h, blob in rows:
                found[h] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _cache_put(self, tenant_id: str, vectors: dict[str, Vector]) -> None:
        now = _ts(_now())
        with self._db.write() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO embedding_cache VALUES (?, ?, ?, ?, ?)",
                [
                    (tenant_id, self.embedder.model_id, h, v.astype(np.float32).tobytes(), now)
                    for h, v in vectors.items()
                ],
            )

    # -- writes -----------------------------------------------------------------------------

    async def add(self, memory: NewMemory, *, actor: str | None = None) -> MemoryEntry:
        return (await self._run("add", self._insert, [memory], actor))[0]

    async def bulk_add(
        self, memories: Sequence[NewMemory], *, actor: str | None = None
    ) -> list[MemoryEntry]:
        return await self._run("bulk_add", self._insert, list(memories), actor)

    def _insert(self, memories: list[NewMemory], actor: str | None) -> list[MemoryEntry]:
        now = _ts(_now())
        model = self.embedder.model_id
        rows = []
        history = []
        for m in memories:
            meta = _dumps(m.metadata)
            rows.append(
                (
                    m.tenant_id,
                    m.id,
                    m.scope.layer.value,
                    m.scope.key,
                    _dumps(m.scope.identifiers),
                    m.content,
                    meta,
                    None if m.embedding is None else m.embedding.astype(np.float32).tobytes(),
                    encode_terms(analyze(m.content)),
                    None if m.embedding is None else model,
                    now,
                    now,
                )
            )
            history.append(
                (
                    m.tenant_id,
                    m.id,
                    "add",
                    m.scope.layer.value,
                    None,
                    m.content,
                    None,
                    meta,
                    actor,
                    now,
                )
            )
        try:
            with self._db.write() as conn:
                conn.executemany(
                    "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, content, "
                    "metadata, embedding, lexicon, embedding_model, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                conn.executemany(
                    "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                    "old_content, new_content, old_metadata, new_metadata, actor, at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    history,
                )
        except sqlite3.IntegrityError as exc:
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT, "a memory with this id already exists"
            ) from exc
        return [
            MemoryEntry(
                id=m.id,
                tenant_id=m.tenant_id,
                layer=m.scope.layer,
                identifiers=m.scope.identifiers,
                content=m.content,
                metadata=m.metadata,
                created_at=datetime.fromisoformat(now),
                updated_at=datetime.fromisoformat(now),
                embedding_generated=m.embedding is not None,
                embedding_model=None if m.embedding is None else model,
            )
            for m in memories
        ]

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        def read() -> list[tuple[str, str]]:
            rows = (
                self._db.connection()
                .execute(
                    "SELECT id, content FROM memories WHERE tenant_id = ? AND embedding IS NULL "
                    "ORDER BY pk LIMIT ?",
                    (tenant_id, limit),
                )
                .fetchall()
            )
            return [(str(i), str(c)) for i, c in rows]

        result: list[tuple[str, str]] = await self._run("unembedded", read)
        return result

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        model = self.embedder.model_id

        def write() -> int:
            with self._db.write() as conn:
                return sum(
                    conn.execute(
                        "UPDATE memories SET embedding = ?, embedding_model = ? WHERE "
                        "tenant_id = ? AND id = ? AND content = ? AND embedding IS NULL",
                        (np.asarray(v, dtype=np.float32).tobytes(), model, tenant_id, i, c),
                    ).rowcount
                    for i, c, v in items
                )

        result: int = await self._run("set embeddings", write)
        return result

    async def get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None:
        return await self._run("get", self._get, tenant_id, memory_id)

    def _get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None:
        row = (
            self._db.connection()
            .execute(
                f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = ? AND id = ?",  # noqa: S608
                (tenant_id, memory_id),
            )
            .fetchone()
        )
        return None if row is None else _entry(row)

    async def update(
        self,
        tenant_id: str,
        memory_id: str,
        *,
        content: str | None = None,
        embedding: Vector | None = None,
        metadata_patch: dict[str, Any] | None = None,
        actor: str | None = None,
    ) -> MemoryEntry:
        return await self._run(
            "update", self._update, tenant_id, memory_id, content, embedding, metadata_patch, actor
        )

    def _update(
        self,
        tenant_id: str,
        memory_id: str,
        content: str | None,
        embedding: Vector | None,
        patch: dict[str, Any] | None,
        actor: str | None,
    ) -> MemoryEntry:
        with self._db.write() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE tenant_id = ? AND id = ?",  # noqa: S608
                (tenant_id, memory_id),
            ).fetchone()
            if row is None:
                raise LaminaError(
                    ErrorCode.MEMORY_NOT_FOUND,
                    f"memory {memory_id!r} not found",
                    details={"id": memory_id},
                )
            old = _entry(row)
            new = updated_entry(
                old,
                content=content,
                metadata_patch=patch,
                embedding_model=None if embedding is None else self.embedder.model_id,
            )
            sets: dict[str, str | bytes] = {
                "metadata": _dumps(new.metadata),
                "updated_at": _ts(new.updated_at),
            }
            if content is not None:
                sets["content"] = content
                sets["lexicon"] = encode_terms(analyze(content))
            if embedding is not None:
                sets["embedding"] = embedding.astype(np.float32).tobytes()
                sets["embedding_model"] = self.embedder.model_id
            assignments = ", ".join(f"{col} = ?" for col in sets)
            conn.execute(
                f"UPDATE memories SET {assignments} WHERE pk = ?",  # noqa: S608
                (*sets.values(), row[0]),
            )
            conn.execute(
                "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, old_content, "
                "new_content, old_metadata, new_metadata, actor, at) "
                "VALUES (?, ?, 'update', ?, ?, ?, ?, ?, ?, ?)",
                (
                    tenant_id,
                    memory_id,
                    old.layer.value,
                    old.content,
                    new.content,
                    _dumps(old.metadata),
                    sets["metadata"],
                    actor,
                    sets["updated_at"],
                ),
            )
        return new

    async def delete(self, tenant_id: str, memory_id: str, *, actor: str | None = None) -> bool:
        return await self._run("delete", self._delete, tenant_id, [memory_id], actor) == 1

    async def bulk_delete(
        self, tenant_id: str, memory_ids: Sequence[str], *, actor: str | None = None
    ) -> int:
        return await self._run("bulk_delete", self._delete, tenant_id, list(memory_ids), actor)

    def _delete(self, tenant_id: str, memory_ids: list[str], actor: str | None) -> int:
        removed = 0
        now = _ts(_now())
        with self._db.write() as conn:
            for memory_id in dict.fromkeys(memory_ids):
                row = conn.execute(
                    "SELECT pk, layer, content, metadata FROM memories "
                    "WHERE tenant_id = ? AND id = ?",
                    (tenant_id, memory_id),
                ).fetchone()
                if row is None:
                    continue
                conn.execute("DELETE FROM memories WHERE pk = ?", (row[0],))
                conn.execute(
                    "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                    "old_content, new_content, old_metadata, new_metadata, actor, at) "
                    "VALUES (?, ?, 'delete', ?, ?, NULL, ?, NULL, ?, ?)",
                    (tenant_id, memory_id, row[1], row[2], row[3], actor, now),
                )
                removed += 1
        return removed

    # -- search -----------------------------------------------------------------------------

    async def search(self, request: LayerSearch) -> list[ScoredMemory]:
        return await self._run("search", self._search, request)

    def _rows(self, pks: Sequence[int], flt: MetadataFilter) -> dict[int, tuple[Any, ...]]:
        if not pks:
            return {}
        marks = ",".join("?" * len(pks))
        sql = f"SELECT {_COLUMNS} FROM memories WHERE pk IN ({marks})"  # noqa: S608
        params: list[Any] = list(pks)
        if not flt.empty:
            sql += " AND ms_match(metadata, ?)"
            params.append(_filter_json(flt))
        return {row[0]: row for row in self._db.connection().execute(sql, params)}

    def _filtered(
        self, hits: list[tuple[int, float]], flt: MetadataFilter, want: int
    ) -> list[tuple[tuple[Any, ...], float]]:
        """The first ``want`` hits (best first) whose rows pass the filter, with their rows."""
        out: list[tuple[tuple[Any, ...], float]] = []
        step = want if flt.empty else _CHUNK
        for start in range(0, len(hits), step):
            chunk = hits[start : start + step]
            rows = self._rows([pk for pk, _ in chunk], flt)
            out.extend((rows[pk], score) for pk, score in chunk if pk in rows)
            if len(out) >= want:
                break
        return out[:want]

    def _vector_hits(
        self, req: LayerSearch, min_score: float | None, want: int
    ) -> list[tuple[int, float]]:
        assert req.vector is not None
        key = (req.tenant_id, req.scope.layer.value, req.scope.key)
        return self._indexes.vector_hits(
            key, req.vector, min_score, want if req.filter.empty else None
        )

    def _keyword_hits(
        self, req: LayerSearch, min_score: float | None, want: int
    ) -> list[tuple[int, float]]:
        key = (req.tenant_id, req.scope.layer.value, req.scope.key)
        hits = self._indexes.keyword_hits(
            key, list(req.terms), want if req.filter.empty and min_score is None else None
        )
        return hits if min_score is None else [h for h in hits if h[1] >= min_score]

    def _search(self, req: LayerSearch) -> list[ScoredMemory]:
        self._indexes.sync()
        flt, limit = req.filter, req.limit
        if req.mode is SearchMode.SEMANTIC:
            found = self._filtered(self._vector_hits(req, req.threshold, limit), flt, limit)
            return [
                ScoredMemory(_entry(row), score, score, None, _vector(row[10]))
                for row, score in found
            ]
        if req.mode is SearchMode.KEYWORD:
            found = self._filtered(self._keyword_hits(req, req.threshold, limit), flt, limit)
            return [
                ScoredMemory(_entry(row), score, None, score, _vector(row[10]))
                for row, score in found
            ]
        assert req.vector is not None
        pool = max(limit * 5, 50)
        if flt.empty:
            return self._hybrid(req, pool)
        keyword = self._filtered(self._keyword_hits(req, None, pool), flt, pool)
        semantic = self._filtered(self._vector_hits(req, None, pool), flt, pool)
        rows = {row[0]: row for row, _ in keyword}
        rows.update((row[0], row) for row, _ in semantic)
        cosines = {}
        for pk, row in rows.items():
            vector = _vector(row[10])
            cosines[pk] = None if vector is None else float(vector @ req.vector)
        return self._fused(req, cosines, {row[0]: s for row, s in keyword}, rows)

    def _hybrid(self, req: LayerSearch, pool: int) -> list[ScoredMemory]:
        """Unfiltered hybrid search: fuse on the indexes, read rows for the winners only."""
        assert req.vector is not None
        keyword = dict(self._keyword_hits(req, None, pool))
        cosines: dict[int, float | None] = dict(self._vector_hits(req, None, pool))
        cosines.update(self._indexes.cosines(keyword.keys() - cosines.keys(), req.vector))
        return self._fused(req, cosines, keyword, None)

    def _fused(
        self,
        req: LayerSearch,
        cosines: dict[int, float | None],
        keyword: dict[int, float],
        rows: dict[int, tuple[Any, ...]] | None,
    ) -> list[ScoredMemory]:
        top = rank_fused(
            cosines,
            keyword,
            weight=req.semantic_weight,
            threshold=req.threshold,
            limit=req.limit,
        )
        if rows is None:
            rows = self._rows([pk for _, pk in top], MetadataFilter())
        return [
            ScoredMemory(
                _entry(rows[pk]), score, cosines[pk], keyword.get(pk), _vector(rows[pk][10])
            )
            for score, pk in top
            if pk in rows
        ]

    # -- list and history -------------------------------------------------------------------

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        return await self._run("history", self._history, tenant_id, memory_id)

    def _history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        rows = (
            self._db.connection()
            .execute(
                "SELECT memory_id, operation, at, layer, old_content, new_content, old_metadata, "
                "new_metadata, actor FROM memory_history WHERE tenant_id = ? AND memory_id = ? "
                "ORDER BY seq",
                (tenant_id, memory_id),
            )
            .fetchall()
        )
        return [
            HistoryEvent(
                memory_id=r[0],
                operation=HistoryOperation(r[1]),
                at=datetime.fromisoformat(r[2]),
                layer=MemoryLayer(r[3]),
                old_content=r[4],
                new_content=r[5],
                old_metadata=None if r[6] is None else json.loads(r[6]),
                new_metadata=None if r[7] is None else json.loads(r[7]),
                actor=r[8],
            )
            for r in rows
        ]

    # -- hierarchy and stats ----------------------------------------------------------------

    async def set_parent(self, tenant_id: str, level: str, child_id: str, parent_id: str) -> None:
        def run() -> None:
            with self._db.write() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO hierarchy VALUES (?, ?, ?, ?, ?)",
                    (tenant_id, level, child_id, parent_id, _ts(_now())),
                )

        await self._run("set_parent", run)

    async def get_parent(self, tenant_id: str, level: str, child_id: str) -> str | None:
        def run() -> str | None:
            row = (
                self._db.connection()
                .execute(
                    "SELECT parent_id FROM hierarchy WHERE tenant_id = ? AND level = ? "
                    "AND child_id IN (?, '*') ORDER BY child_id = '*' LIMIT 1",
                    (tenant_id, level, child_id),
                )
                .fetchone()
            )
            return None if row is None else str(row[0])

        return await self._run("get_parent", run)

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        def run() -> dict[str, int]:
            self._indexes.sync()
            return self._indexes.counts_by_layer(tenant_id)

        return await self._run("count_by_layer", run)

    async def list(
        self,
        tenant_id: str,
        scopes: Sequence[Scope],
        flt: MetadataFilter,
        *,
        limit: int,
        cursor: str | None,
    ) -> MemoryPage:
        after = decode_cursor(cursor) if cursor else None
        return await self._run("list", self._list, tenant_id, list(scopes), flt, limit, after)

    def _list(
        self,
        tenant_id: str,
        scopes: Sequence[Scope],
        flt: MetadataFilter,
        limit: int,
        before: int | None,
    ) -> MemoryPage:
        if not scopes:
            return MemoryPage(items=[], next_cursor=None, total_count=0)
        where = (
            "tenant_id = ? AND ("
            + " OR ".join(["(layer = ? AND scope_key = ?)"] * len(scopes))
            + ")"
        )
        params: list[Any] = [tenant_id]
        for scope in scopes:
            params += [scope.layer.value, scope.key]
        if not flt.empty:
            where += " AND ms_match(metadata, ?)"
            params.append(_filter_json(flt))
        with self._db.snapshot() as conn:
            total = conn.execute(
                f"SELECT count(*) FROM memories WHERE {where}",  # noqa: S608
                params,
            ).fetchone()[0]
            page_where, page_params = where, list(params)
            if before is not None:
                page_where += " AND pk < ?"
                page_params.append(before)
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {page_where} "  # noqa: S608
                "ORDER BY pk DESC LIMIT ?",
                (*page_params, limit + 1),
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        return MemoryPage(
            items=[_entry(r) for r in rows],
            next_cursor=encode_cursor(rows[-1][0]) if more else None,
            total_count=total,
        )
