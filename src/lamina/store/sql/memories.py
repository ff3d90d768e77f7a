"""Memories (lamina.memory.ports.MemoryStore) in SQL, for both backends: one class joining
the modules of each concept.

Writes (memory_writes.py), conversation neighbourhoods (conversations.py), deletes and
forgetting (forgetting.py), reads, history, listing and the hierarchy (memory_reads.py), the
embedding cache and pending embeddings (embedding_cache.py), time windows and dedup
(timing.py), invalidation, consolidation and expiry (invalidation.py) are shared, on the rows
of memory_rows.py; search and the per-layer counts are the backend's own (in-process indexes
on SQLite, pgvector and tsvector on PostgreSQL), and so is the metadata filter's SQL.
"""

from __future__ import annotations

from lamina.store.sql.invalidation import SqlInvalidation
from lamina.store.sql.memory_reads import SqlMemoryReads


class SqlMemories(SqlInvalidation, SqlMemoryReads):
    """The MemoryStore protocol but search and counts, which each backend adds."""
