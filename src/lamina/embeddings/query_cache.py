"""Query vectors, embedded once: an in-process LRU in front of the store's embedder.

Queries are not written to the persistent embedding cache (they are many and rarely stored);
repeated queries in one process are served from memory, by tenant (a tenant never gets a
vector another one's query put there). With ``shared`` (``lamina serve --workers``: a table
every server process maps, ``shared_queries``), a query another process embedded is not
embedded again.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

from lamina.embeddings.base import Vector
from lamina.embeddings.shared_queries import SharedQueryVectors
from lamina.retry import RetryPolicy

#: The store's generate_embedding with cache=False: (tenant, texts) -> one row per text.
Embed = Callable[[str, Sequence[str]], Awaitable[Vector]]


class QueryVectors:
    def __init__(self, embed: Embed, retry: RetryPolicy, size: int = 1024) -> None:
        self._embed = embed
        self._retry = retry
        self._size = size
        self._cache: OrderedDict[tuple[str, str], Vector] = OrderedDict()
        self._inflight: dict[tuple[str, str], asyncio.Future[Vector]] = {}
        #: The table the processes of one server share (``lamina serve --workers``).
        self.shared: SharedQueryVectors | None = None

    async def get(self, tenant_id: str, query: str) -> Vector:
        """The query's vector; concurrent callers asking for the same query share one
        embedding call."""
        key = (tenant_id, query)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        if self.shared is not None:
            cached = self.shared.get(tenant_id, query)
            if cached is not None:
                self._keep(key, cached)
                return cached
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        task = asyncio.ensure_future(self._compute(tenant_id, query))
        self._inflight[key] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._inflight.pop(key, None)
            else:
                task.add_done_callback(lambda _t: self._inflight.pop(key, None))

    async def _compute(self, tenant_id: str, query: str) -> Vector:
        vectors = await self._retry.run("embed query", lambda: self._embed(tenant_id, [query]))
        vector: Vector = vectors[0]
        self._keep((tenant_id, query), vector)
        if self.shared is not None:
            self.shared.put(tenant_id, query, vector)
        return vector

    def _keep(self, key: tuple[str, str], vector: Vector) -> None:
        self._cache[key] = vector
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
