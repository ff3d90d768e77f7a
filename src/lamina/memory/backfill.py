"""Embeddings added after the memory: memories stored with ``background_embedding=True``
wait for theirs, which the embedding buffer (or ``embed_pending``) adds in batches."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property

from lamina.buffer import BackgroundBuffer
from lamina.memory.base import MemoryPart, MemoryShared
from lamina.memory.ports import MemoryPorts


class Backfill(MemoryPart):
    """``embed_pending``, ``flush_embeddings`` and the embedding buffer. Holds the
    embeddings port."""

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._embeddings = ports.embeddings

    @cached_property
    def embedding_buffer(self) -> BackgroundBuffer[str]:
        """Embeds memories added with background_embedding=True, per tenant."""
        return BackgroundBuffer(
            "embedding buffer", self._embed_in_background, queue_size=1024, workers=1
        )

    async def embed_pending(
        self,
        *,
        tenant_id: str | None = None,
        batch: int = 256,
        on_progress: Callable[[int, int | None], None] | None = None,
    ) -> int:
        """Embed every memory of the tenant still waiting for its embedding (the embedding
        buffer does this in the background); returns how many were embedded.
        ``on_progress(done, None)`` follows each batch (the total is not known ahead)."""
        tenant = self._tenant(tenant_id)
        await self._ready()
        done = 0
        while True:
            rows = await self._retry.run(
                "unembedded", lambda: self._embeddings.unembedded(tenant, batch)
            )
            if not rows:
                return done
            stored = await self._embed_batch(tenant, rows)
            done += stored
            if on_progress is not None:
                on_progress(done, None)
            if stored == 0:  # changed under us since the read: leave them for the next run
                return done

    async def _embed_batch(self, tenant: str, rows: list[tuple[str, str]]) -> int:
        texts = [content for _, content in rows]
        vectors = await self._retry.run(
            "embed", lambda: self._embeddings.generate_embedding(tenant, texts)
        )
        items = [(mid, content, vectors[i]) for i, (mid, content) in enumerate(rows)]
        stored: int = await self._retry.run(
            "set embeddings", lambda: self._embeddings.set_embeddings(tenant, items)
        )
        return stored

    async def _embed_in_background(self, tenant: str) -> None:
        await self.embed_pending(tenant_id=tenant)

    async def flush_embeddings(self) -> None:
        """Wait until the embedding buffer has embedded what was queued."""
        await self.embedding_buffer.drain()
