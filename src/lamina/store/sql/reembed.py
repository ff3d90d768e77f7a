"""The embeddings repository of a SQL store (``Reembedding``): the embedding status, the
cache (embedding_cache.py) and pending vectors, and re-embedding a store with another
model (``reembed``), for both backends.

Resumable, batch by batch, tenant by tenant: a memory is done when its ``embedding_model``
is the target and its vector has the target's dimensions (OpenAI's ``dimensions`` changes
them under one model id); context items (their vectors cleared once, when a re-embedding to
a target starts) are done when they have a vector again. ``store_meta`` records the target while the
work is under way and the new model at the end, when nothing is left to do. What differs per
backend (listing every tenant, writing ``store_meta``, PostgreSQL's vector column types and
HNSW indexes) are the hooks at the bottom, which each backend's small subclass fills
(sqlite/reembed.py, postgres/vectors.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from lamina.embeddings.base import Vector
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.items import ContextRecord
from lamina.memory.ports import EmbeddingStatus, ItemText, ReembedProgress
from lamina.store.sql.context_items import SqlContextItems
from lamina.store.sql.conversations import ConversationScope
from lamina.store.sql.embedding_cache import drop_held
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.meta import REEMBED_ITEMS_CLEARED, REEMBED_TARGET
from lamina.store.sql.program import Program, count, every, row, rows
from lamina.store.sql.rows import RECORD, RecordRow

#: Context items without a vector of their own (the knowledge index's state row).
_UNEMBEDDED_KINDS = "('document_index')"
#: A memory whose vector is not of the target model and dimensions (params: model, dims).
_STALE_MEMORY = (
    "(embedding_model IS NULL OR embedding_model <> %s OR (embedding IS NOT NULL AND {dims} <> %s))"
)
_PENDING_ITEM = f"embedding IS NULL AND kind NOT IN {_UNEMBEDDED_KINDS}"
#: A context item holding a vector of other dimensions (param: dims).
_RESIZED_ITEM = "embedding IS NOT NULL AND {dims} <> %s"
#: Passes over every tenant before giving up on rows that keep changing under us.
_PASSES = 3


class Reembedding(ABC):
    """embedding_status, generate_embedding, unembedded, set_embeddings and reembed
    (lamina.memory.ports.MemoryEmbeddingStore), on a store whose memories and context
    items share one executor."""

    #: The dimensions of a row's ``embedding`` in SQL (SQLite: float32 blobs).
    _VECTOR_DIMS = "length(embedding) / 4"

    def __init__(self, parts: MemoryParts, context_items: SqlContextItems) -> None:
        self._exec = parts.rows.executor
        self._d = parts.rows.dialect
        self.embedder = parts.rows.embedder
        self.embedding = parts.rows.embedding
        self._cache = parts.cache
        self._conversations = parts.conversations
        self._context_items = context_items

    def embedding_status(self) -> EmbeddingStatus:
        return self.embedding.status

    async def generate_embedding(
        self, tenant_id: str, texts: Sequence[str], *, cache: bool = True
    ) -> Vector:
        return await self._cache.generate_embedding(tenant_id, texts, cache=cache)

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        return await self._cache.unembedded(tenant_id, limit)

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        return await self._cache.set_embeddings(tenant_id, items)

    def _item_record(self, values: Sequence[Any]) -> ContextRecord:
        """A context item's row (sequence, record columns, embedding) as a record."""
        return self._context_items.record_of_row(values)

    def _lacking_neighbourhoods(self, tenant: str) -> Program[list[ConversationScope]]:
        """Conversations (per scope) holding a message that has a vector but no
        neighbourhood vector while another of its turns has a vector: those whose vectors
        were re-embedded (the first turn included: its next turns make its neighbourhood)."""
        return (
            yield from every(
                lambda r: ConversationScope(tenant, r[0], r[1], r[2]),
                "SELECT DISTINCT m.conversation_id, m.layer, m.scope_key FROM memories m "
                "WHERE m.tenant_id = %s AND m.conversation_id IS NOT NULL "
                "AND m.context_embedding IS NULL AND m.embedding IS NOT NULL "
                "AND EXISTS (SELECT 1 FROM memories o WHERE o.tenant_id = m.tenant_id "
                "AND o.conversation_id = m.conversation_id AND o.layer = m.layer "
                "AND o.scope_key = m.scope_key AND o.id <> m.id AND o.embedding IS NOT NULL)",
                tenant,
            )
        )

    def _renew_conversation(self, thread: ConversationScope) -> Program[None]:
        yield from self._conversations.lock(thread.tenant_id, {thread.conversation_id})
        yield from self._conversations.renew(thread, -1, None)

    async def _renew_neighbourhoods(self, tenant: str) -> None:
        """Neighbourhood vectors again, from the re-embedded vectors: one transaction per
        conversation, so that writers wait for one conversation at most."""
        for thread in await self._exec.read(
            tenant, "reembed", self._lacking_neighbourhoods(tenant)
        ):
            await self._exec.write(tenant, "reembed", self._renew_conversation(thread))

    async def reembed(
        self, item_text: ItemText, *, batch_size: int, on_progress: ReembedProgress | None
    ) -> dict[str, Any]:
        status = self.embedding.status
        model, dims = status.model, status.dimensions
        report: dict[str, Any] = {
            "from_model": status.store_model,
            "from_dimensions": status.store_dimensions,
            "model": model,
            "dimensions": dims,
            "reembedded": False,
            "memories": 0,
            "context_items": 0,
            "tenants": 0,
        }
        if not status.reembed_needed:
            # The store is of the target already; another process that opened it before the
            # change may still have written rows of the old model since: convert those.
            tenants = await self._tenants()
            left = [
                await self._exec.read(t, "reembed", self._leftover(t, model, dims)) for t in tenants
            ]
            if not any(stale or resized for stale, resized in left):
                return report
            for tenant, (_, resized_items) in zip(tenants, left, strict=True):
                if resized_items:
                    await self._exec.write(tenant, "reembed", self._clear_resized(tenant, dims))
            resized = False
        else:
            target = f"{model}:{dims}"
            meta = await self._read_meta()
            if meta.get(REEMBED_TARGET) != target:
                await self._write_meta({REEMBED_TARGET: target}, [REEMBED_ITEMS_CLEARED])
                self.embedding.status = replace(status, in_progress=True)
            resized = int(meta["embedding_dimensions"]) != dims
            if resized:
                await self._prepare_vectors()
            tenants = await self._tenants()
            if meta.get(REEMBED_ITEMS_CLEARED) != target:
                for tenant in tenants:
                    await self._exec.write(tenant, "reembed", self._clear_items(tenant))
                await self._write_meta({REEMBED_ITEMS_CLEARED: target}, [])
        counts = {
            t: await self._exec.read(t, "reembed", self._left(t, model, dims)) for t in tenants
        }
        total = sum(m + i for m, i in counts.values())
        done = 0
        if on_progress is not None:
            on_progress(0, total)
        for _ in range(_PASSES):
            for tenant in tenants:
                for kind in ("memories", "context_items"):
                    after: Any = 0  # keyset: this pass goes on after the last row it saw
                    while True:
                        last, n = await self._batch(
                            tenant, kind, model, dims, item_text, batch_size, after
                        )
                        if last is None:
                            break
                        after = last
                        report[kind] += n
                        done += n
                        if on_progress is not None:
                            on_progress(min(done, total), total)
            for tenant in tenants:
                await self._renew_neighbourhoods(tenant)
            if await self._finish(model, dims, resized):
                self.embedding.status = replace(
                    status, store_model=model, store_dimensions=dims, in_progress=False
                )
                report.update(reembedded=True, tenants=len(tenants))
                return report
            tenants = await self._tenants()  # written to while we worked: go round again
        raise LaminaError(
            ErrorCode.CONFLICT,
            "memories kept changing while they were re-embedded; run `lamina memory reembed` "
            "again (it resumes where it stopped)",
            retryable=True,
        )

    async def _batch(
        self,
        tenant: str,
        kind: str,
        model: str,
        dims: int,
        item_text: ItemText,
        size: int,
        after: Any,
    ) -> tuple[Any, int]:
        """Re-embed up to ``size`` rows of ``kind`` after the row ``after`` (its sequence):
        the last row's sequence (None: no row left) and how many were stored."""
        if kind == "memories":
            found = await self._exec.read(
                tenant, "reembed", self._stale_memories(tenant, model, dims, size, after)
            )
            keys: list[Any] = [r[1] for r in found]
            contents = [str(r[2]) for r in found]
            texts = contents
        else:
            found = await self._exec.read(
                tenant, "reembed", self._pending_items(tenant, size, after)
            )
            keys = [r[0] for r in found]
            contents = [str(RecordRow(*r).content) for r in found]
            texts = [item_text(self._item_record(r)) for r in found]
        if not found:
            return None, 0
        vectors = await self.generate_embedding(tenant, texts)
        items = list(zip(keys, contents, vectors, strict=True))
        stored: int = await self._exec.write(
            tenant, "reembed", self._store_vectors(tenant, kind, model, items)
        )
        # Rows that changed under us were written with their vector pending: the next pass
        # picks them up.
        return found[-1][0], stored

    # -- programs ---------------------------------------------------------------------------

    def _clear_items(self, tenant: str) -> Program[int]:
        cleared: int = yield count(
            "UPDATE context_items SET embedding = NULL WHERE tenant_id = %s "
            "AND embedding IS NOT NULL",
            tenant,
        )
        return cleared

    def _stale(self) -> str:
        return _STALE_MEMORY.format(dims=self._VECTOR_DIMS)

    def _remaining_sql(self) -> str:
        """Across tenants, how many rows are not of the target yet (params: model, dims)."""
        return (
            f"SELECT (SELECT count(*) FROM memories WHERE {self._stale()}) "  # noqa: S608
            f"+ (SELECT count(*) FROM context_items WHERE {_PENDING_ITEM})"
        )

    def _resized(self) -> str:
        return _RESIZED_ITEM.format(dims=self._VECTOR_DIMS)

    def _clear_resized(self, tenant: str, dims: int) -> Program[int]:
        cleared: int = yield count(
            f"UPDATE context_items SET embedding = NULL WHERE tenant_id = %s "  # noqa: S608
            f"AND {self._resized()}",
            tenant,
            dims,
        )
        return cleared

    def _leftover(self, tenant: str, model: str, dims: int) -> Program[tuple[int, int]]:
        """Rows not of ``model`` (``dims``) in a store recorded as done: stale memories and
        context items without a vector, and context items with a vector of other dimensions."""
        memories, items = yield from self._left(tenant, model, dims)
        resized = yield row(
            f"SELECT count(*) FROM context_items WHERE tenant_id = %s AND {self._resized()}",  # noqa: S608
            tenant,
            dims,
        )
        return memories + items, int(resized[0])

    def _left(self, tenant: str, model: str, dims: int) -> Program[tuple[int, int]]:
        memories = yield row(
            f"SELECT count(*) FROM memories WHERE tenant_id = %s AND {self._stale()}",  # noqa: S608
            tenant,
            model,
            dims,
        )
        items = yield row(
            f"SELECT count(*) FROM context_items WHERE tenant_id = %s AND {_PENDING_ITEM}",  # noqa: S608
            tenant,
        )
        return int(memories[0]), int(items[0])

    def _stale_memories(
        self, tenant: str, model: str, dims: int, size: int, after: Any
    ) -> Program[list[Any]]:
        d = self._d
        select = f"SELECT {d.seq}, id, content FROM memories"  # noqa: S608
        where = f"tenant_id = %s AND {self._stale()}"
        found: list[Any] = yield rows(d.seq_page(select, where), tenant, model, dims, after, size)
        return found

    def _pending_items(self, tenant: str, size: int, after: Any) -> Program[list[Any]]:
        d = self._d
        select = f"SELECT {d.seq}, {RECORD}, embedding FROM context_items"  # noqa: S608
        where = f"tenant_id = %s AND {_PENDING_ITEM}"
        found: list[Any] = yield rows(d.seq_page(select, where), tenant, after, size)
        return found

    def _store_vectors(
        self, tenant: str, kind: str, model: str, items: list[tuple[Any, str, Vector]]
    ) -> Program[int]:
        stored = 0
        for key, content, vector in items:
            if kind == "memories":
                stored += yield count(
                    "UPDATE memories SET embedding = %s, embedding_model = %s, "
                    "context_embedding = NULL WHERE tenant_id = %s AND id = %s AND content = %s",
                    self._d.vector(vector),
                    model,
                    tenant,
                    key,
                    content,
                )
                yield from drop_held(self._d, tenant, model, [content])
            else:
                stored += yield count(
                    f"UPDATE context_items SET embedding = %s WHERE tenant_id = %s "  # noqa: S608
                    f"AND {self._d.seq} = %s AND content = %s AND embedding IS NULL",
                    self._d.vector(vector),
                    tenant,
                    key,
                    content,
                )
        return stored

    def _read_meta_program(self) -> Program[dict[str, str]]:
        found = yield rows("SELECT key, value FROM store_meta")
        return {str(k): str(v) for k, v in found}

    async def _read_meta(self) -> dict[str, str]:
        return await self._exec.read(None, "reembed", self._read_meta_program())

    # -- the backend's part -----------------------------------------------------------------

    @abstractmethod
    async def _tenants(self) -> list[str]:
        """Every tenant holding memories, context items or cached embeddings."""

    @abstractmethod
    async def _write_meta(self, values: dict[str, str], remove: Sequence[str]) -> None:
        """Set ``values`` and remove ``remove`` in ``store_meta``."""

    async def _prepare_vectors(self) -> None:
        """Before vectors of another dimension are written (PostgreSQL: column types)."""
        return

    @abstractmethod
    async def _finish(self, model: str, dims: int, resized: bool) -> bool:
        """In one transaction, unless a row is still stale (then False): record ``model`` as
        the store's, drop cached embeddings of other models or dimensions (PostgreSQL: type the
        columns and rebuild the indexes wherever they are not of ``dims``)."""
