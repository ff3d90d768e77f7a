"""``ms.memory``: scoped memories. The service is put together from one part per concept:
the write path (``writes``, with the embedding backfill in ``backfill``), conversations in
(``messages``), memories in bulk (``transfer``: delete_all, export, import), the read path
and its ranking (``reads``), memories by who holds them (``owners``), and the hierarchy
that resolves identifiers (``hierarchy``)."""

from __future__ import annotations

from lamina.memory.consolidation import Consolidating
from lamina.memory.lifecycle import Lifecycle
from lamina.memory.messages import ConversationInput
from lamina.memory.owners import MemoryOwners
from lamina.memory.reads import MemoryReads
from lamina.memory.reembed import Reembed
from lamina.memory.transfer import MemoryTransfer
from lamina.memory.writes import MemoryInput, WriteGuard

__all__ = ["ConversationInput", "MemoryInput", "MemoryService", "WriteGuard"]


class MemoryService(Consolidating, MemoryTransfer, Lifecycle, MemoryReads, MemoryOwners, Reembed):
    """``ms.memory``: add, add_messages, search, get, update, delete, delete_all, list,
    history, export, import_ and hierarchy; invalidate and purge_expired; who holds memories
    (``count_by_layer``, ``owners``, ``list_all``); reembed after a change of embedding
    model (``reembed``)."""
