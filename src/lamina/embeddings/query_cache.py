"""Query vectors, embedded once: an in-process LRU in front of the store's embedder.

Queries are not written to the persistent embedding cache (they are many and rarely stored);
repeated queries in one process are served from memory.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

from lamina.embeddings.base import Vector
from lamina.retry import RetryPolicy

#: The store's generate_embedding with cache=False: (tenant, texts) -> one row per text.
Embed = Callable[[str, Sequence[str]], Awaitable[Vector]]


class QueryVectors:
    def __init__(self, embed: Embed, retry: RetryPolicy, size: int = 1024) -> None:
        self._embed = embed
        self._retry = retry
        self._size = size
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[Vector]] = {}

    async def get(self, tenant_id: str, query: str) -> Vector:
        """The query's vector; concurrent callers asking for the same query share one
        embedding call."""
        cached = self._cache.get(query)
        if cached is not None:
            self._cache.move_to_end(query)
            return cached
        pending = self._inflight.get(query)
        if pending is not None:
            return await asyncio.shield(pending)
        task = asyncio.ensure_future(self._compute(tenant_id, query))
        self._inflight[query] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done():
                self._inflight.pop(query, None)
            else:
                task.add_done_callback(lambda _t: self._inflight.pop(query, None))

    async def _compute(self, tenant_id: str, query: str) -> Vector:
        vectors = await self._retry.run("embed query", lambda: self._embed(tenant_id, [query]))
        vector: Vector = vectors[0]
        self._cache[query] = vector
        if len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return vector
