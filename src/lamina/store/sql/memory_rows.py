"""The rows of memories in SQL, for both backends: their columns, the entry and history
event a row makes, and the base class every memory module (timing.py, memory_writes.py,
memory_reads.py, conversations.py, embedding_cache.py, forgetting.py, invalidation.py)
builds on."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lamina.embeddings.base import Embedder
from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer, scope_key
from lamina.memory.models import (
    HistoryEvent,
    HistoryOperation,
    MemoryEntry,
)
from lamina.memory.ports import (
    EmbeddingStatus,
    LayerHits,
    LayerSearch,
    Selection,
)
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.meta import EmbeddingState
from lamina.store.sql.program import Executor
from lamina.store.sql.rows import ENTRY, EntryRow, HistoryRow

#: A row as the driver returns it.
Row = tuple[Any, ...]


class SqlMemoryRows(ABC):
    """What every memory module stands on: the executor, the dialect, the embedder and its
    state, and the entry a row makes."""

    def __init__(self, executor: Executor, dialect: Dialect, embedder: Embedder) -> None:
        self._exec = executor
        self._d = dialect
        self.embedder = embedder
        #: The model of the stored vectors against the embedder's (set when the store opens).
        self.embedding = EmbeddingState(embedder)
        #: Every column a query reads: the row sequence, then ``ENTRY``.
        self._columns = f"{dialect.seq}, {ENTRY}"

    @abstractmethod
    async def search(self, request: LayerSearch) -> LayerHits: ...

    @abstractmethod
    async def count_by_layer(self, tenant_id: str | None = None) -> dict[str, int]: ...

    @abstractmethod
    def _filter(self, flt: MetadataFilter) -> tuple[str, list[Any]]:
        """The SQL condition of a non-empty metadata filter, and its parameters."""

    def _selected_terms(self, selection: Selection) -> list[tuple[str, list[Any]]]:
        """The conditions selecting memories (lamina.memory.ports.Selection), one per layer,
        with their parameters: per layer, its scope key when the identifiers name the whole
        scope, else each identifier's value; a layer the identifiers cannot scope selects
        nothing (and has no term)."""
        given = selection.identifiers
        terms: list[tuple[str, list[Any]]] = []
        for layer in selection.layers or tuple(MemoryLayer):
            required = layer.required_identifiers
            if not set(given) <= set(required):
                continue
            if not given:
                terms.append(("layer = %s", [layer.value]))
            elif set(given) == set(required):
                terms.append(
                    ("(layer = %s AND scope_key = %s)", [layer.value, scope_key(layer, given)])
                )
            else:
                names = sorted(given)
                parts = " AND ".join(f"{self._d.json_text('identifiers', n)} = %s" for n in names)
                terms.append(
                    (f"(layer = %s AND {parts})", [layer.value, *(given[n] for n in names)])
                )
        return terms

    def _selected(
        self, selection: Selection, tenant_id: str | None = None
    ) -> tuple[str, list[Any]]:
        """The condition selecting memories (``_selected_terms`` joined), and its parameters.
        Given ``tenant_id``, each term names the tenant (the condition then needs no other
        tenant check): SQLite looks each one up in its own index (a user's agent, user and
        session memories) instead of reading the tenant's rows."""
        terms = self._selected_terms(selection)
        if not terms:
            return self._d.false, []
        if tenant_id is None:
            params = [p for _, values in terms for p in values]
            return f"({' OR '.join(t for t, _ in terms)})", params
        params = [p for _, values in terms for p in (tenant_id, *values)]
        joined = " OR ".join(f"(tenant_id = %s AND {t})" for t, _ in terms)
        return f"({joined})", params

    def _entry(self, values: Sequence[Any]) -> MemoryEntry:
        d, r = self._d, EntryRow(*values)
        return MemoryEntry(
            id=r.id,
            tenant_id=r.tenant_id,
            layer=MemoryLayer(r.layer),
            identifiers=d.from_json(r.identifiers),
            content=r.content,
            metadata=d.from_json(r.metadata),
            embedding_model=r.embedding_model,
            created_at=d.from_time(r.created_at),
            updated_at=d.from_time(r.updated_at),
            embedding_generated=r.embedding is not None,
            event_at=d.from_time(r.event_at or r.created_at),
            valid_from=self._time(r.valid_from),
            valid_until=self._time(r.valid_until),
            expires_at=self._time(r.expires_at),
        )

    def _time(self, value: Any) -> datetime | None:
        return None if value is None else self._d.from_time(value)

    def _event(self, values: Sequence[Any]) -> HistoryEvent:
        """A history event of its row (``HISTORY_COLUMNS``)."""
        d, r = self._d, HistoryRow(*values)
        return HistoryEvent(
            memory_id=r.memory_id,
            operation=HistoryOperation(r.operation),
            at=d.from_time(r.at),
            layer=MemoryLayer(r.layer),
            old_content=r.old_content,
            new_content=r.new_content,
            old_metadata=None if r.old_metadata is None else d.from_json(r.old_metadata),
            new_metadata=None if r.new_metadata is None else d.from_json(r.new_metadata),
            actor=r.actor,
        )

    def embedding_status(self) -> EmbeddingStatus:
        return self.embedding.status
