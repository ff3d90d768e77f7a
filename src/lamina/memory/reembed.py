"""Changing the embedding model of a store: ``reembed`` re-computes every vector with the
configured embedder; ``embedding_status`` says whether that is needed (docs/operations.md)."""

from __future__ import annotations

from typing import Any

from lamina.checks import check_int
from lamina.memory.base import MemoryPart, MemoryShared
from lamina.memory.items import ContextRecord
from lamina.memory.ports import EmbeddingStatus, ItemText, MemoryPorts, ReembedProgress


def content_text(record: ContextRecord) -> str:
    """What a context item's vector stands for, unless its domain says otherwise."""
    return record.content


class Reembed(MemoryPart):
    """``reembed`` and ``embedding_status``. Holds the embeddings port."""

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._embeddings = ports.embeddings
        #: The text each context item's vector stands for; the runtime sets it
        #: (``ms.memory.item_text``) so that the knowledge index's items are embedded as the
        #: knowledge service embeds them.
        self.item_text: ItemText = content_text

    async def embedding_status(self) -> EmbeddingStatus:
        """The model of the store's vectors against the configured embedder's;
        ``reembed_needed`` when they differ or a re-embedding is unfinished."""
        await self._ready()
        return self._embeddings.embedding_status()

    async def reembed(
        self, *, batch_size: int = 256, on_progress: ReembedProgress | None = None
    ) -> dict[str, Any]:
        """Re-embed the whole store (every tenant: the vectors of one store are of one model)
        with the configured embedder: memories, context items and the knowledge index, in
        batches, resuming where an interrupted run stopped; then record the model as the
        store's and drop other models' cached embeddings. A no-op (``reembedded`` false)
        when the store's vectors are already of this model. ``on_progress(done, total)``
        follows each batch."""
        size = check_int("batch_size", batch_size, minimum=1, maximum=10_000)

        async def run() -> dict[str, Any]:
            return await self._embeddings.reembed(
                self.item_text, batch_size=size, on_progress=on_progress
            )

        return await self._observe("reembed", run)
