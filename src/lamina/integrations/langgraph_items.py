"""A LangGraph store item as lamina keeps it: one memory, whose metadata entry
(``langgraph``) holds the item's namespace, key and value; read from a memory entry or an
export record."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lamina.integrations.langgraph_namespaces import Scope
from lamina.memory.layers import MemoryLayer

__all__ = ["META", "Found", "found", "valid"]

#: The metadata key of a memory holding a store item.
META = "langgraph"


@dataclass
class Found:
    """A stored item: its metadata entry, times, and the scope its memory is in (the
    LangGraph item it is: lamina.integrations.langgraph)."""

    id: str
    meta: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    scope: Scope


def _scope_of(layer: str, identifiers: Mapping[str, str]) -> Scope:
    return layer, {n: identifiers[n] for n in MemoryLayer(layer).required_identifiers}


def valid(record: Mapping[str, Any], now: datetime) -> bool:
    """Whether an export record's memory is valid at ``now``."""
    since, until = record.get("valid_from"), record.get("valid_until")
    return (since is None or datetime.fromisoformat(since) <= now) and (
        until is None or datetime.fromisoformat(until) > now
    )


def found(entry: Any) -> Found:
    """A Found from a MemoryEntry or an export record (a dict)."""
    if isinstance(entry, Mapping):
        return Found(
            entry["id"],
            entry["metadata"][META],
            datetime.fromisoformat(entry["created_at"]),
            datetime.fromisoformat(entry["updated_at"]),
            _scope_of(entry["layer"], entry["identifiers"]),
        )
    return Found(
        entry.id,
        entry.metadata[META],
        entry.created_at,
        entry.updated_at,
        _scope_of(entry.layer.value, entry.identifiers),
    )
