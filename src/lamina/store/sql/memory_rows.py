"""The rows of memories in SQL, for both backends: the part every memory repository holds
(``MemoryRows``): the executor, the dialect, the embedder and its state, the backend's
metadata filter, and what a row means (the entry and history event it makes, the
conditions selecting rows by scope and by time)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from lamina.embeddings.base import Embedder
from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer, scope_key
from lamina.memory.models import (
    HistoryEvent,
    HistoryOperation,
    MemoryEntry,
)
from lamina.memory.ports import LayerSearch, Selection
from lamina.memory.timing import TimeWindow
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.meta import EmbeddingState
from lamina.store.sql.program import Executor
from lamina.store.sql.rows import ENTRY, EntryRow, HistoryRow
from lamina.store.sql.timing import window_sql

#: A row as the driver returns it.
Row = tuple[Any, ...]

#: The backend's SQL of a non-empty metadata filter: its condition and parameters
#: (SQLite: ``ms_match``, PostgreSQL: JSONB operators).
FilterSql = Callable[[MetadataFilter], tuple[str, list[Any]]]


@dataclass(frozen=True, eq=False)
class MemoryRows:
    """What every memory repository stands on: the executor, the dialect, the embedder
    and its state (shared with the store's context items), the backend's metadata filter,
    and the rows' meaning."""

    executor: Executor
    dialect: Dialect
    embedder: Embedder
    #: The model of the stored vectors against the embedder's (set when the store opens).
    embedding: EmbeddingState
    #: The SQL condition of a non-empty metadata filter, and its parameters.
    filter: FilterSql

    @cached_property
    def columns(self) -> str:
        """Every column a query reads: the row sequence, then ``ENTRY``."""
        return f"{self.dialect.seq}, {ENTRY}"

    def selected_terms(self, selection: Selection) -> list[tuple[str, list[Any]]]:
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
                parts = " AND ".join(
                    f"{self.dialect.json_text('identifiers', n)} = %s" for n in names
                )
                terms.append(
                    (f"(layer = %s AND {parts})", [layer.value, *(given[n] for n in names)])
                )
        return terms

    def selected(self, selection: Selection, tenant_id: str | None = None) -> tuple[str, list[Any]]:
        """The condition selecting memories (``selected_terms`` joined), and its parameters.
        Given ``tenant_id``, each term names the tenant (the condition then needs no other
        tenant check): SQLite looks each one up in its own index (a user's agent, user and
        session memories) instead of reading the tenant's rows."""
        terms = self.selected_terms(selection)
        if not terms:
            return self.dialect.false, []
        if tenant_id is None:
            params = [p for _, values in terms for p in values]
            return f"({' OR '.join(t for t, _ in terms)})", params
        params = [p for _, values in terms for p in (tenant_id, *values)]
        joined = " OR ".join(f"(tenant_id = %s AND {t})" for t, _ in terms)
        return f"({joined})", params

    def entry(self, values: Sequence[Any]) -> MemoryEntry:
        d, r = self.dialect, EntryRow(*values)
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
            valid_from=self.time(r.valid_from),
            valid_until=self.time(r.valid_until),
            expires_at=self.time(r.expires_at),
        )

    def time(self, value: Any) -> datetime | None:
        """A stored time, or None."""
        return None if value is None else self.dialect.from_time(value)

    def param(self, value: datetime | None) -> Any:
        """A time as a statement's parameter, or None."""
        return None if value is None else self.dialect.time(value)

    def event(self, values: Sequence[Any]) -> HistoryEvent:
        """A history event of its row (``HISTORY_COLUMNS``)."""
        d, r = self.dialect, HistoryRow(*values)
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

    def window(self, window: TimeWindow | None, *, walk: bool = False) -> tuple[str, list[Any]]:
        """The condition of a time window (None: now, valid only) and its parameters."""
        return window_sql(self.dialect, window or TimeWindow(), walk=walk)

    def candidates(self, req: LayerSearch) -> tuple[str, list[Any]]:
        """The condition a search's candidates meet besides the metadata filter: its time
        window, and when it wants facts only, not a conversation message nor a keyed item
        (neither has a content key)."""
        condition, params = self.window(req.window)
        if not req.messages:
            condition += " AND conversation_id IS NULL AND content_key IS NOT NULL"
        return condition, params
