"""Memories (lamina.memory.ports.MemoryStore) in SQL, for both backends: one class joining
the modules of each concept.

Writes (memory_writes.py), conversation neighbourhoods (conversations.py), deletes and
forgetting (forgetting.py), reads, history, listing and the hierarchy (memory_reads.py), the
embedding cache and pending embeddings (embedding_cache.py), time and dedup (timing.py) are
shared, on the rows of memory_rows.py; search and the per-layer counts are the backend's own
(in-process indexes on SQLite, pgvector and tsvector on PostgreSQL), and so is the metadata
filter's SQL.
"""

from __future__ import annotations

from lamina.store.sql.forgetting import SqlForgetting
from lamina.store.sql.memory_reads import SqlMemoryReads
from lamina.store.sql.memory_writes import SqlMemoryWrites


class SqlMemories(SqlMemoryWrites, SqlForgetting, SqlMemoryReads):
    """The MemoryStore protocol but search and counts, which each backend adds."""
