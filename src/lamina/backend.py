"""The backend: one database holding every domain's data, seen as the ports it implements.

A backend (lamina.store.sqlite.SQLiteStore, lamina.store.postgres.PostgresStore) hands out
each domain's repositories as properties (the memory repositories, one per memory port;
context items; sessions; threads); it also has a lifecycle (migrations on ``initialize``),
a health check and capabilities. Only the composition root (runtime.py) and the doors
(server/, cli/) see it whole: each service gets the repositories it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from lamina.context.ports import ContextItemStore
from lamina.memory.ports import MemoryPorts
from lamina.observational.ports import SessionStore
from lamina.threads.ports import ThreadStore


@dataclass(frozen=True)
class StoreCapabilities:
    vector_search: bool
    keyword_search: bool
    embedding_dimensions: int
    distance_metrics: tuple[str, ...]
    bulk_operations: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "vector_search": self.vector_search,
            "keyword_search": self.keyword_search,
            "embedding_dimensions": self.embedding_dimensions,
            "distance_metrics": list(self.distance_metrics),
            "bulk_operations": self.bulk_operations,
        }


@dataclass(frozen=True)
class HealthStatus:
    healthy: bool
    details: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """Every repository of one database, and its lifecycle."""

    #: The migration the database is at (0 until ``initialize``).
    schema_version: int

    @property
    def memories(self) -> MemoryPorts:
        """The memory repositories, one per concern (reads, writes, forgetting, transfer,
        embeddings, owners)."""
        ...

    @property
    def context_items(self) -> ContextItemStore:
        """The searchable context layers' items and the knowledge index."""
        ...

    @property
    def sessions(self) -> SessionStore:
        """Session messages and observational memory."""
        ...

    @property
    def threads(self) -> ThreadStore:
        """A2A threads and tasks."""
        ...

    async def initialize(self) -> None: ...

    async def shutdown(self) -> None: ...

    async def health_check(self) -> HealthStatus: ...

    def capabilities(self) -> StoreCapabilities: ...
