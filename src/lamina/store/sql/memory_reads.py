"""Reads of memories in SQL, for both backends: get, history, listing by page, the
hierarchy of scopes, and the ranking of search candidates both backends' searches share."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import numpy as np

from lamina.embeddings.base import Vector
from lamina.memory.filters import MetadataFilter
from lamina.memory.models import (
    HistoryEvent,
    MemoryEntry,
    MemoryPage,
    ScoreParts,
    SearchMode,
)
from lamina.memory.ports import (
    LayerHits,
    LayerSearch,
    Scope,
    ScoredMemory,
)
from lamina.memory.scoring import CONVERSATION_KEY, Candidate, rank
from lamina.memory.timing import TimeWindow
from lamina.store.cursors import decode_cursor, encode_cursor
from lamina.store.sql.memory_rows import HISTORY_COLUMNS, Row
from lamina.store.sql.program import Program, count, first, row, rows
from lamina.store.sql.timing import SqlTiming

#: Where a search row's neighbourhood vector is (after ``{seq}, ENTRY``).
_AROUND = 15


def _cosines(query: Vector, vectors: list[Vector | None], into: list[float | None]) -> None:
    """``into[i]``: the cosine of ``query`` with ``vectors[i]`` (left alone where it is None or
    of another size), all in one product. Each row's product is the one ``vector @ query``
    gives (the same dot kernel), so scores do not depend on how many were computed at once."""
    at = [(i, v) for i, v in enumerate(vectors) if v is not None and len(v) == len(query)]
    if not at:
        return
    found = np.vecdot(np.stack([v for _, v in at]), query).tolist()
    for (i, _), cosine in zip(at, found, strict=True):
        into[i] = float(cosine)


def _ranking_metadata(load: Callable[[Any], Any], stored: Any) -> Any:
    """A candidate's metadata as ranking reads it: ranking reads only the conversation
    key, so metadata stored as JSON text that cannot hold that key is not parsed (our own
    writer never escapes a plain ASCII key)."""
    if isinstance(stored, str) and f'"{CONVERSATION_KEY}"' not in stored:
        return _NO_METADATA
    return load(stored)


_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


class SqlMemoryReads(SqlTiming):
    """get, history, list, the hierarchy, and search's shared ranking."""

    def _scored(self, values: Sequence[Any], parts: ScoreParts) -> ScoredMemory:
        # Vectors of two models must never meet (near-duplicate checks compare them).
        vector = None if self.embedding.stale else self._d.from_vector(values[10])
        return ScoredMemory(self._entry(values), parts, vector)

    def _ranked(
        self, req: LayerSearch, found: dict[Any, Row], keyword: dict[Any, float]
    ) -> LayerHits:
        """Score the candidate rows ``found`` (by row key; each row is ``ENTRY`` then the
        neighbourhood vector and words) with lamina.memory.scoring. Both stores read the
        same stored floats and compute the same way: the same scores."""
        d = self._d
        query = req.vector if req.mode is not SearchMode.KEYWORD else None
        keys = list(found)
        cosines: list[float | None] = [None] * len(keys)
        contexts: list[float | None] = [None] * len(keys)
        if query is not None and not self.embedding.stale:
            _cosines(query, [d.from_vector(found[k][10]) for k in keys], cosines)
            blobs = [found[k][_AROUND] for k in keys]
            arounds = [None if b is None else np.frombuffer(b, np.float32) for b in blobs]
            _cosines(
                query,
                [a if c is not None else None for a, c in zip(arounds, cosines, strict=True)],
                contexts,
            )
        candidates = [
            Candidate(
                key,
                cosine,
                context,
                keyword.get(key, 0.0),
                values[5],
                _ranking_metadata(d.from_json, values[6]),
                d.from_time(values[8]),
            )
            for key, values, cosine, context in zip(
                keys, (found[k] for k in keys), cosines, contexts, strict=True
            )
        ]
        ranked = rank(
            candidates,
            req.signals,
            mode=req.mode,
            weight=req.semantic_weight,
            threshold=req.threshold,
            limit=req.limit,
        )
        return LayerHits(
            [self._scored(found[key], parts) for parts, key in ranked.hits],
            ranked.below_threshold,
        )

    def _searchable(self, request: LayerSearch) -> LayerSearch:
        """While the vectors are of another model: semantic search is refused, hybrid search
        runs on keywords only (the service already asks for that; this keeps the port safe)."""
        if not self.embedding.stale or request.mode is SearchMode.KEYWORD:
            return request
        if request.mode is SearchMode.SEMANTIC:
            raise self.embedding.refuse("semantic search")
        return replace(request, mode=SearchMode.KEYWORD, vector=None)

    async def get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None:
        """The memory (also once invalidated), None when absent or expired."""
        get = first(
            self._entry,
            f"SELECT {self._columns} FROM memories WHERE tenant_id = %s AND id = %s "  # noqa: S608
            "AND (expires_at IS NULL OR expires_at > %s)",
            tenant_id,
            memory_id,
            self._d.time(datetime.now(UTC)),
        )
        return await self._exec.read(tenant_id, "get", get)

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        def read() -> Program[list[HistoryEvent]]:
            found = yield rows(
                f"SELECT {HISTORY_COLUMNS} FROM memory_history WHERE tenant_id = %s "  # noqa: S608
                "AND memory_id = %s ORDER BY seq",
                tenant_id,
                memory_id,
            )
            return [self._event(r) for r in found]

        return await self._exec.read(tenant_id, "history", read())

    async def list(
        self,
        tenant_id: str,
        scopes: Sequence[Scope],
        flt: MetadataFilter,
        *,
        limit: int,
        cursor: str | None,
        window: TimeWindow | None = None,
    ) -> MemoryPage:
        before = decode_cursor(cursor) if cursor else None
        if not scopes:
            return MemoryPage(items=[], next_cursor=None, total_count=0)
        pairs = " OR ".join(["(layer = %s AND scope_key = %s)"] * len(scopes))
        where = f"tenant_id = %s AND ({pairs})"
        params: list[Any] = [tenant_id]
        for scope in scopes:
            params += [scope.layer.value, scope.key]
        if not flt.empty:
            condition, values = self._filter(flt)
            where += f" AND {condition}"
            params += values
        timing, values = self._window(window)
        where += f" AND {timing}"
        params += values
        seq = self._d.seq

        def page() -> Program[MemoryPage]:
            total = yield row(f"SELECT count(*) FROM memories WHERE {where}", *params)  # noqa: S608
            page_where = where + ("" if before is None else f" AND {seq} < %s")
            page_params = params + ([] if before is None else [before])
            found = yield rows(
                f"SELECT {self._columns} FROM memories WHERE {page_where} "  # noqa: S608
                f"ORDER BY {seq} DESC LIMIT %s",
                *page_params,
                limit + 1,
            )
            more = len(found) > limit
            found = found[:limit]
            return MemoryPage(
                items=[self._entry(r) for r in found],
                next_cursor=encode_cursor(found[-1][0]) if more else None,
                total_count=total[0],
            )

        return await self._exec.read(tenant_id, "list", page(), snapshot=True)

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
