"""The context layers' port: the searchable-item store (lamina.memory.items.ItemStore, shared
with the knowledge index) and what only the context layers do with it, changing the data of
items in place (usage counters, success rates). Both stores implement it
(lamina.store.sql.context_items); the runtime hands it to the context service."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lamina.memory.items import ContextRecord, ItemKind, ItemStore

# A change to one item's data (given its key and data), applied atomically to its latest
# version (counters, scores).
DataChange = Callable[[str, dict[str, Any]], dict[str, Any]]


class ContextItemStore(ItemStore, Protocol):
    """Every item operation of the context layers: ``ItemStore``'s, and ``modify_items``."""

    async def modify_items(
        self, tenant_id: str, kind: ItemKind, keys: Sequence[str], change: DataChange
    ) -> list[ContextRecord]:
        """Apply ``change`` to the data of the latest version of each key, in one
        transaction; returns the records changed (unknown keys are skipped)."""
        ...
