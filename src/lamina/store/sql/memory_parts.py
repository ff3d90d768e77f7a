"""The parts every memory repository of a SQL store is built from, for both backends.

A store makes them once (``MemoryParts.build``) and hands them to its repositories, one
per memory port (lamina.memory.ports.MemoryPorts): reads (memory_reads.py, searched by the
backend), writes (memory_writes.py), forgetting (forgetting.py), transfer (transfer.py),
embeddings (reembed.py) and owners (owners.py). The parts are held, never inherited: the
rows and what they mean (memory_rows.py, timing.py), conversation neighbourhoods
(conversations.py), the embedding cache (embedding_cache.py), new rows (memory_inserts.py)
and the delete of memories by id (deletion.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from lamina.embeddings.base import Embedder
from lamina.store.sql.conversations import Conversations
from lamina.store.sql.deletion import Deletion, Settle
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.embedding_cache import EmbeddingCache
from lamina.store.sql.memory_inserts import MemoryInserts
from lamina.store.sql.memory_rows import FilterSql, MemoryRows
from lamina.store.sql.meta import EmbeddingState
from lamina.store.sql.program import Executor


@dataclass(frozen=True)
class MemoryParts:
    """The shared parts of a store's memory repositories."""

    rows: MemoryRows
    conversations: Conversations
    cache: EmbeddingCache
    inserts: MemoryInserts
    deletion: Deletion

    @classmethod
    def build(
        cls,
        executor: Executor,
        dialect: Dialect,
        embedder: Embedder,
        embedding: EmbeddingState,
        *,
        metadata_filter: FilterSql,
        settle: Settle,
    ) -> MemoryParts:
        """The parts over one executor; ``embedding``: the store's state of its vectors
        (shared with its context items); ``metadata_filter``: the backend's SQL of a
        metadata filter; ``settle``: what the backend does after a delete."""
        rows = MemoryRows(executor, dialect, embedder, embedding, metadata_filter)
        conversations = Conversations(rows)
        cache = EmbeddingCache(rows)
        return cls(
            rows,
            conversations,
            cache,
            MemoryInserts(rows, conversations),
            Deletion(rows, conversations, cache, settle),
        )
