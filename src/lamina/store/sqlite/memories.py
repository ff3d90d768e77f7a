"""Memories in the SQLite file: the shared SQL, searched through in-process indexes.

SQLite holds everything durably; each process keeps an exact vector index and a BM25 keyword
index per scope in memory (indexes.py), loaded on first search and kept in step with every
committed write, its own or another process's. Metadata filters run in SQL through the
``ms_match`` function (lamina.memory.filters semantics).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from lamina.embeddings.base import Embedder
from lamina.memory.filters import Condition, MetadataFilter, matches
from lamina.memory.models import SearchMode
from lamina.memory.ports import LayerSearch, ScoredMemory
from lamina.memory.scoring import rank_fused
from lamina.store.sql.memories import Row, SqlMemories
from lamina.store.sqlite.db import SQLITE, Database, dumps
from lamina.store.sqlite.indexes import SyncedIndexes

#: Rows read per round while filtering index hits.
_CHUNK = 256


def _filter_json(flt: MetadataFilter) -> str:
    return dumps(
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


def match_udf(metadata: str, flt: str) -> int:
    """``ms_match(metadata, filter)``: 1 when the metadata passes the filter."""
    return 1 if matches(_filter_from_json(flt), json.loads(metadata)) else 0


class SQLiteMemories(SqlMemories):
    def __init__(self, db: Database, indexes: SyncedIndexes, embedder: Embedder) -> None:
        super().__init__(db, SQLITE, embedder)
        self._db = db
        self._indexes = indexes

    def _filter(self, flt: MetadataFilter) -> tuple[str, list[Any]]:
        return "ms_match(metadata, %s)", [_filter_json(flt)]

    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        def run() -> dict[str, int]:
            self._indexes.sync()
            return self._indexes.counts_by_layer(tenant_id)

        return await self._db.call("count_by_layer", run)

    # -- search -----------------------------------------------------------------------------

    async def search(self, request: LayerSearch) -> list[ScoredMemory]:
        return await self._db.call("search", self._search, self._searchable(request))

    def _rows(self, pks: Sequence[int], flt: MetadataFilter) -> dict[int, Row]:
        if not pks:
            return {}
        marks = ",".join("?" * len(pks))
        sql = f"SELECT {self._columns} FROM memories WHERE pk IN ({marks})"  # noqa: S608
        params: list[Any] = list(pks)
        if not flt.empty:
            sql += " AND ms_match(metadata, ?)"
            params.append(_filter_json(flt))
        return {row[0]: row for row in self._db.connection().execute(sql, params)}

    def _filtered(
        self, hits: list[tuple[int, float]], flt: MetadataFilter, want: int
    ) -> list[tuple[Row, float]]:
        """The first ``want`` hits (best first) whose rows pass the filter, with their rows."""
        out: list[tuple[Row, float]] = []
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
            return [self._scored(row, score, score, None) for row, score in found]
        if req.mode is SearchMode.KEYWORD:
            found = self._filtered(self._keyword_hits(req, req.threshold, limit), flt, limit)
            return [self._scored(row, score, None, score) for row, score in found]
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
            vector = self._d.from_vector(row[10])
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
        rows: dict[int, Row] | None,
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
            self._scored(rows[pk], score, cosines[pk], keyword.get(pk))
            for score, pk in top
            if pk in rows
        ]
