"""Reads of memories in SQL, for both backends (``SqlMemoryReads``, the reads repository):
get, history, listing by page, and the ranking of search candidates both backends'
searches share; each backend adds its search (sqlite/memories.py, postgres/memories.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence, Sized
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar, Unpack

import numpy as np

from lamina.embeddings.base import Vector
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
    MemoryListing,
    ScoredMemory,
)
from lamina.memory.scoring import SUPERSEDED_KEY, Candidate, Ranked, rank
from lamina.store.cursors import decode_cursor, encode_cursor
from lamina.store.sql.memory_rows import MemoryRows, Row
from lamina.store.sql.program import Program, every, first, row, rows
from lamina.store.sql.rows import HISTORY_COLUMNS, EntryRow, ScoringRow

#: Matches of a listing past which its page walks the scope in order (``window_sql``).
_WALK_FROM = 2_000

K = TypeVar("K")


def ranked_chunks(
    ranking: Callable[[int | None], Sequence[K]],
    want: int,
    filtered: bool,
    out: Sized,
    chunk: int,
) -> Iterator[list[K]]:
    """The chunks of a ranking (best first) to read when only the first ``want`` that pass
    the filter and the time window are needed: the caller reads each chunk's rows and keeps
    those that pass in ``out``, in ranking order, until it holds ``want``. ``ranking(cap)``
    gives the ``cap`` best (None: all; the whole ranking at once when a metadata filter is
    ``filtered``, else ``want`` first and 8 times as many each round that is short): the
    first ``want`` are read, and more (``chunk`` at a time) only when some did not pass."""
    cap: int | None = None if filtered else want
    done = 0
    while True:
        ranked = ranking(cap)
        step = max(want - len(out), chunk if done else want)
        for start in range(done, len(ranked), step):
            part = list(ranked[start : start + step])
            yield part
            done = start + len(part)
            if len(out) >= want:
                return
        if cap is None or len(ranked) < cap:
            return  # every candidate was read
        cap *= 8


class SqlMemoryReads(ABC):
    """get, history, list and search (lamina.memory.ports.MemoryReadStore); search is the
    backend's, on the ranking shared here.

    A search reads its candidates in two steps: what ranking needs (``_scoring_columns``:
    vectors, content, speaker, conversation, event time, superseded), for every candidate;
    then whole rows (``_hit_rows``) for the few that rank among the hits."""

    def __init__(self, rows: MemoryRows) -> None:
        self._rows = rows
        self._exec = rows.executor
        self._d = rows.dialect
        self.embedding = rows.embedding

    @abstractmethod
    async def search(self, request: LayerSearch) -> LayerHits: ...

    def _scoring_columns(self, table: str = "", vectors: str | None = None) -> str:
        """The columns of a candidate row after its key (``{seq}``), ``table``-qualified:
        the two vectors (or ``vectors``, columns standing for them), then what the other
        parts of a score need."""
        t = f"{table}." if table else ""
        d = self._d
        return (
            f"{vectors or f'{t}embedding, {t}context_embedding'}, {t}content, "
            f"{d.json_string(f'{t}metadata', 'conversation', 'speaker')}, "
            f"{d.json_string(f'{t}metadata', 'conversation', 'id')}, "
            f"COALESCE({t}event_at, {t}created_at), "
            f"{d.json_string(f'{t}metadata', SUPERSEDED_KEY, 'at')}"
        )

    def _hit_rows(
        self, req: LayerSearch, keys: Sequence[Any], extra: str = ""
    ) -> tuple[str, list[Any]]:
        """The statement reading the whole rows (``{seq}, ENTRY``, then the columns
        ``extra`` names) of ``keys`` that still pass the search's filter and time window (a
        hit changed or deleted since the candidates were read is left out, never returned
        against the window)."""
        condition, params = self._d.any_of(self._d.seq, keys)
        # By key, never through an index on the tenant (SQLite would walk its every row).
        tenant = self._d.unindexed("tenant_id")
        timing, times = self._rows.candidates(req)
        sql = (
            f"SELECT {self._rows.columns}{extra} FROM memories "  # noqa: S608
            f"WHERE {condition} AND {tenant} = %s AND {timing}"
        )
        params += [req.tenant_id, *times]
        if not req.filter.empty:
            matching, values = self._rows.filter(req.filter)
            sql += f" AND {matching}"
            params += values
        return sql, params

    def _scored(self, values: Sequence[Any], parts: ScoreParts) -> ScoredMemory:
        # Vectors of two models must never meet (near-duplicate checks compare them).
        vector = None if self.embedding.stale else self._d.from_vector(EntryRow(*values).embedding)
        return ScoredMemory(self._rows.entry(values), parts, vector)

    def _rank(self, req: LayerSearch, found: dict[Any, Row], keyword: dict[Any, float]) -> Ranked:
        """Score the candidate rows ``found`` (by key; each row is the key, then
        ``_scoring_columns``) with lamina.memory.scoring. Both stores read the same stored
        floats and compute the same way: the same scores."""
        d = self._d
        keys = list(found)
        query = req.vector if req.mode is not SearchMode.KEYWORD else None
        if self.embedding.stale:
            query = None
        rows = [ScoringRow(*found[k]) for k in keys]
        own = cosines(query, [d.from_vector(r.own) for r in rows])
        around = cosines(query, [d.from_vector(r.around) for r in rows])
        candidates = [
            self._candidate(r, own[i], around[i], keyword.get(r.key, 0.0))
            for i, r in enumerate(rows)
        ]
        return self._ranked(req, candidates)

    def _ranked(self, req: LayerSearch, candidates: list[Candidate]) -> Ranked:
        """``candidates`` ranked with the search's signals, mode, weight, threshold, limit."""
        return rank(
            candidates,
            req.signals,
            mode=req.mode,
            weight=req.semantic_weight,
            threshold=req.threshold,
            limit=req.limit,
        )

    def _candidate(
        self,
        row: ScoringRow,
        cosine: float | None,
        context_cosine: float | None,
        keyword: float,
    ) -> Candidate:
        """The ranking's view of a candidate row."""
        return Candidate(
            row.key,
            cosine,
            None if cosine is None else context_cosine,
            keyword,
            row.content,
            row.speaker,
            row.conversation,
            self._d.from_time(row.event_at),
            row.superseded is not None,
        )

    def _hits(self, ranked: Ranked, rows: dict[Any, Row]) -> LayerHits:
        """The hits of ``ranked`` from their whole rows (a memory deleted between the two
        reads is left out)."""
        return LayerHits(
            [self._scored(rows[key], parts) for parts, key in ranked.hits if key in rows],
            ranked.below_threshold,
        )

    def _searchable(self, request: LayerSearch) -> LayerSearch:
        """While the vectors are of another model: semantic search is refused, hybrid search
        runs on keywords only (the service already asks for that; this keeps the port safe)."""
        mode = self.embedding.status.usable_mode(request.mode)
        if mode is request.mode:
            return request
        return replace(request, mode=mode, vector=None, vector_soon=None)

    async def get(self, tenant_id: str, memory_id: str) -> MemoryEntry | None:
        """The memory (also once invalidated), None when absent or expired."""
        get = first(
            self._rows.entry,
            f"SELECT {self._rows.columns} FROM memories WHERE tenant_id = %s AND id = %s "  # noqa: S608
            "AND (expires_at IS NULL OR expires_at > %s)",
            tenant_id,
            memory_id,
            self._d.time(datetime.now(UTC)),
        )
        return await self._exec.read(tenant_id, "get", get)

    async def history(self, tenant_id: str, memory_id: str) -> list[HistoryEvent]:
        read = every(
            self._rows.event,
            f"SELECT {HISTORY_COLUMNS} FROM memory_history WHERE tenant_id = %s "  # noqa: S608
            "AND memory_id = %s ORDER BY seq",
            tenant_id,
            memory_id,
        )
        return await self._exec.read(tenant_id, "history", read)

    async def list(self, tenant_id: str, **listing: Unpack[MemoryListing]) -> MemoryPage:
        scopes, flt = listing["scopes"], listing["flt"]
        cursor, limit, window = listing["cursor"], listing["limit"], listing.get("window")
        count_limit = listing.get("count_limit")
        before = decode_cursor(cursor) if cursor else None
        selection = listing.get("selection")
        params: list[Any] = [tenant_id]
        if selection is not None:  # each term names the tenant
            where, params = self._rows.selected(selection, tenant_id)
        elif not scopes:
            return MemoryPage(items=[], next_cursor=None, total_count=0)
        else:
            pairs = " OR ".join(["(layer = %s AND scope_key = %s)"] * len(scopes))
            where = f"tenant_id = %s AND ({pairs})"
            for scope in scopes:
                params += [scope.layer.value, scope.key]
        if not flt.empty:
            condition, values = self._rows.filter(flt)
            where += f" AND {condition}"
            params += values
        timing, values = self._rows.window(window)
        walking, _ = self._rows.window(window, walk=True)
        walk_where = f"{where} AND {walking}"
        where += f" AND {timing}"
        params += values
        seq = self._d.seq

        if count_limit is None:
            counting = row(f"SELECT count(*) FROM memories WHERE {where}", *params)  # noqa: S608
        else:  # stop counting past the limit: the count costs what it reads
            counting = row(
                "SELECT count(*) FROM (SELECT 1 FROM memories "  # noqa: S608
                f"WHERE {where} LIMIT %s) AS capped",
                *params,
                count_limit + 1,
            )

        ranged = window is not None and (window.since is not None or window.until is not None)

        def page() -> Program[MemoryPage]:
            # A time range is counted first: with many matches, walking the scope newest
            # first meets a page of them soon; with few, the event-time index finds them and
            # sorting them is cheap.
            total = (yield counting) if ranged else None
            chosen = walk_where if total is not None and total[0] > _WALK_FROM else where
            page_where = chosen + ("" if before is None else f" AND {seq} < %s")
            page_params = params + ([] if before is None else [before])
            found = yield rows(
                f"SELECT {self._rows.columns} FROM memories WHERE {page_where} "  # noqa: S608
                f"ORDER BY {seq} DESC LIMIT %s",
                *page_params,
                limit + 1,
            )
            if total is None:
                # A first page that is not full holds every match: no second scan to count.
                whole = before is None and len(found) <= limit
                total = (len(found),) if whole else (yield counting)
            more = len(found) > limit
            found = found[:limit]
            return MemoryPage(
                items=[self._rows.entry(r) for r in found],
                next_cursor=encode_cursor(found[-1][0]) if more else None,
                total_count=total[0] if count_limit is None else min(total[0], count_limit),
                total_exact=count_limit is None or total[0] <= count_limit,
            )

        return await self._exec.read(tenant_id, "list", page(), snapshot=True)


def cosines(query: Vector | None, vectors: Sequence[Vector | None]) -> list[float | None]:
    """The cosine of ``query`` with each vector (unit vectors: their dot product), None for
    a missing vector or one of another length; one vectorised product for all."""
    if query is None:
        return [None] * len(vectors)
    usable = {i: v for i, v in enumerate(vectors) if v is not None and len(v) == len(query)}
    out: list[float | None] = [None] * len(vectors)
    if usable:
        matrix = np.stack(list(usable.values()))
        for i, value in zip(usable, np.vecdot(matrix, query).tolist(), strict=True):
            out[i] = value
    return out
