"""``ms.memory``: scoped memories. The service is put together from one part per concept:
the write path (``writes``, with the embedding backfill in ``backfill``), the read path and
its ranking (``reads``), and the hierarchy that resolves identifiers (``hierarchy``)."""

from __future__ import annotations

from lamina.memory.reads import MemoryReads
from lamina.memory.writes import MemoryInput, MemoryWrites, WriteGuard

__all__ = ["MemoryInput", "MemoryService", "WriteGuard"]


class MemoryService(MemoryWrites, MemoryReads):
    """``ms.memory``: add, search, get, update, delete, list, history and hierarchy."""
