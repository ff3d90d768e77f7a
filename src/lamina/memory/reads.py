"""The read path: search (every reachable layer at once, merged by precedence and score,
near-duplicates dropped), get, list and history."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Unpack

import numpy as np
import numpy.typing as npt

from lamina.checks import check_flag, check_fraction, check_id, check_query, invalid
from lamina.embeddings.base import Vector
from lamina.embeddings.query_cache import QueryVectors
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.base import MemoryPart, MemoryShared, observed
from lamina.memory.filters import MetadataFilter, parse_filter
from lamina.memory.hierarchy import Hierarchy
from lamina.memory.layers import IdentifierArgs, Identifiers, MemoryLayer, identifier_args
from lamina.memory.models import (
    HistoryEvent,
    MemoryEntry,
    MemoryPage,
    SearchHit,
    SearchMode,
    SearchResults,
)
from lamina.memory.ports import LayerHits, LayerSearch, MemoryPorts, Scope, ScoredMemory
from lamina.memory.scoring import QuerySignals
from lamina.memory.timing import TimeWindow
from lamina.text import analyze

#: Counting memories per layer costs a scan on PostgreSQL: searches refresh the gauge at most
#: this often (seconds).
STORAGE_GAUGE_INTERVAL = 10.0


class MemoryReads(MemoryPart):
    """``search``, ``get``, ``list`` and ``history``. Holds the reads port, the embeddings
    port (what search may do while the vectors are of another model), the owners port (the
    storage gauge), the hierarchy (scopes) and the query vectors."""

    def __init__(
        self,
        shared: MemoryShared,
        ports: MemoryPorts,
        *,
        hierarchy: Hierarchy,
        queries: QueryVectors,
    ) -> None:
        super().__init__(shared)
        self._reads = ports.reads
        self._embeddings = ports.embeddings
        self._owners = ports.owners
        self._hierarchy = hierarchy
        self._queries = queries
        self._gauge_refreshed = -float("inf")

    @observed("search")
    async def search(
        self,
        query: str,
        *,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        mode: str | SearchMode = SearchMode.HYBRID,
        threshold: float | None = None,
        limit: int | None = None,
        tags: Sequence[str] | str | None = None,
        filters: Mapping[str, Any] | None = None,
        tenant_id: str | None = None,
        include_invalid: bool = False,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        collapse: bool = True,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> SearchResults:
        """Search every reachable layer (or ``layers``) at once, best first; see
        docs/search.md. The result is a list of hits; its ``below_threshold`` says how many
        candidates the threshold removed. Facts no longer valid are left out unless
        ``include_invalid``; ``since`` / ``until`` keep memories whose event time lies in
        [since, until); expired memories are never returned. ``collapse=False`` keeps
        near-duplicates (by default one that is as good as another kept is left out)."""
        given = identifier_args(scope_ids)

        tenant = self._tenant(tenant_id)
        window = TimeWindow.of(include_invalid=include_invalid, since=since, until=until)
        text = check_query(query, self._settings.max_query_length)
        collapsing = check_flag("collapse", collapse)
        try:
            search_mode = SearchMode(mode)
        except ValueError:
            raise invalid(
                f"invalid search mode {mode!r}; valid: semantic, keyword, hybrid"
            ) from None
        count = self._limit(limit, self._settings.search_limit)
        search_mode = self._embeddings.embedding_status().usable_mode(search_mode)
        min_score = (
            self._settings.search_threshold
            if threshold is None
            else check_fraction("threshold", threshold)
        )
        flt = parse_filter(tags, filters)
        ids = Identifiers(**given)
        scopes = await self._hierarchy.scopes(tenant, ids, layers)
        per_layer = await self._search_scopes(
            tenant,
            scopes,
            search_mode,
            text,
            threshold=min_score,
            limit=count,
            flt=flt,
            window=window,
        )
        found: list[ScoredMemory] = []
        below = 0
        for scope, results in zip(scopes, per_layer, strict=True):
            self._metrics.search_results.labels(scope.layer.value).observe(len(results.hits))
            found.extend(results.hits)
            below += results.below_threshold
        await self._refresh_storage_gauge()
        return SearchResults(self._merge(found, count, collapsing), below_threshold=below)

    async def _search_scopes(
        self,
        tenant: str,
        scopes: Sequence[Scope],
        mode: SearchMode,
        text: str,
        *,
        threshold: float,
        limit: int,
        flt: MetadataFilter,
        window: TimeWindow,
    ) -> list[LayerHits]:
        """Every scope searched at once (for twice ``limit`` candidates each, merged after);
        the query is embedded while the stores start on their keyword work."""
        terms = tuple(analyze(text)) if mode is not SearchMode.SEMANTIC else ()
        signals = QuerySignals.of(text, current=window.current)
        soon: asyncio.Future[Vector] | None = None
        try:
            if mode is not SearchMode.KEYWORD:
                soon = asyncio.ensure_future(self._embed_query(tenant, text))
            requests = [
                LayerSearch(
                    tenant,
                    scope,
                    mode,
                    text,
                    None,
                    terms,
                    threshold,
                    limit * 2,
                    flt,
                    self._settings.hybrid_semantic_weight,
                    signals,
                    window,
                    vector_soon=soon,
                )
                for scope in scopes
            ]
            return list(await asyncio.gather(*(self._search_layer(r) for r in requests)))
        except _EmbeddingFailed as failed:
            raise failed.error from None
        finally:
            _settle(soon)

    async def _embed_query(self, tenant: str, query: str) -> Vector:
        return await self._queries.get(tenant, query)

    async def _search_layer(self, request: LayerSearch) -> LayerHits:
        async def attempt() -> LayerHits:
            try:
                return await self._reads.search(request)
            except LaminaError:
                soon = request.vector_soon
                if soon is not None and soon.done() and not soon.cancelled():
                    error = soon.exception()
                    if error is not None:  # the embedder's own error, retried by it already
                        raise _EmbeddingFailed(error) from None
                raise

        return await self._retry.run("search", attempt)

    def _merge(
        self, found: list[ScoredMemory], limit: int, collapse: bool = True
    ) -> list[SearchHit]:
        """Precedence, then score; near-duplicates keep the most specific layer (all of
        them are kept unless ``collapse``)."""
        found.sort(key=lambda s: (s.entry.layer.precedence, -s.parts.raw))
        kept: list[ScoredMemory] = []
        # The vectors kept so far, row by row: one product per candidate, no restacking.
        # (Vectors of one search are all of one model: stale ones come as None.)
        kept_vectors: npt.NDArray[np.float32] | None = None
        held = 0
        threshold = self._settings.dedup_threshold
        for item in found:
            vector = item.vector
            if (
                collapse
                and vector is not None
                and kept_vectors is not None
                and float(np.max(kept_vectors[:held] @ vector)) >= threshold
            ):
                continue
            kept.append(item)
            if vector is not None:
                if kept_vectors is None:
                    kept_vectors = np.empty((limit, len(vector)), np.float32)
                kept_vectors[held] = vector
                held += 1
            if len(kept) == limit:
                break
        return [
            SearchHit(
                memory=s.entry,
                score=s.score,
                semantic_score=s.parts.semantic,
                keyword_score=s.parts.keyword,
                parts=s.parts,
            )
            for s in kept
        ]

    async def _refresh_storage_gauge(self) -> None:
        """memory_storage_size, counted at most every STORAGE_GAUGE_INTERVAL seconds."""
        now = time.monotonic()
        if now - self._gauge_refreshed < STORAGE_GAUGE_INTERVAL:
            return
        self._gauge_refreshed = now
        for layer_name, size in (await self._owners.count_by_layer(None)).items():
            self._metrics.storage_size.labels(layer_name).set(size)

    @observed("get")
    async def get(self, memory_id: str, *, tenant_id: str | None = None) -> MemoryEntry | None:
        """The memory, or None when no memory has this id."""
        tenant = self._tenant(tenant_id)
        mid = check_id(memory_id)
        return await self._retry.run("get", lambda: self._reads.get(tenant, mid))

    @observed("history")
    async def history(self, memory_id: str, *, tenant_id: str | None = None) -> list[HistoryEvent]:
        """Every add, update and delete of the memory, oldest first (also once deleted)."""
        tenant = self._tenant(tenant_id)
        mid = check_id(memory_id)
        events = await self._retry.run("history", lambda: self._reads.history(tenant, mid))
        if not events:
            raise LaminaError(
                ErrorCode.MEMORY_NOT_FOUND,
                f"memory {mid!r} has no history: it never existed",
                details={"id": mid},
            )
        return events

    @observed("list")
    async def list(
        self,
        *,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        tags: Sequence[str] | str | None = None,
        filters: Mapping[str, Any] | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        tenant_id: str | None = None,
        include_invalid: bool = False,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        count_limit: int | None = None,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> MemoryPage:
        """Newest first; ``next_cursor`` continues where the page ended, unaffected by
        inserts. ``include_invalid``, ``since`` and ``until`` as for ``search``.
        ``count_limit``: count the matches only up to this many (counting costs what it
        reads; ``total_exact`` says whether there were more)."""
        given = identifier_args(scope_ids)

        tenant = self._tenant(tenant_id)
        listing = self._shared.listing(
            limit, cursor, tags, filters, include_invalid, since, until, count_limit
        )
        listing["scopes"] = await self._hierarchy.scopes(tenant, Identifiers(**given), layers)
        return await self._retry.run("list", lambda: self._reads.list(tenant, **listing))


class _EmbeddingFailed(Exception):
    """The query's embedding failed inside a store's search: raised past the store retry."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _settle(soon: asyncio.Future[Vector] | None) -> None:
    """A query embedding no store awaited (a store failed first) is cancelled, or its error
    marked as seen."""
    if soon is None:
        return
    if not soon.done():
        soon.cancel()
    elif not soon.cancelled():
        soon.exception()
