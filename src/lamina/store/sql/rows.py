"""The shapes of the rows the SQL stores read, one named tuple per shape, for both
backends: a row is decoded by column name (``EntryRow(*values).content``), never by
position, and the column lists the statements name are these classes' fields."""

from __future__ import annotations

from typing import Any, NamedTuple


class EntryRow(NamedTuple):
    """A memory's row: its row sequence (``{seq}``), the columns of ``ENTRY``, and the one
    column a statement may read after them (``extra``: the context vector of an exact
    re-rank, the content key of a duplicate check)."""

    seq: Any
    id: Any
    tenant_id: Any
    layer: Any
    identifiers: Any
    content: Any
    metadata: Any
    embedding_model: Any
    created_at: Any
    updated_at: Any
    embedding: Any
    event_at: Any
    valid_from: Any
    valid_until: Any
    expires_at: Any
    extra: Any = None


class ScoringRow(NamedTuple):
    """A search candidate's row: its key, what ranking needs (``_scoring_columns``), and
    on PostgreSQL the bound of its cosines' float error (``bound``). ``own`` and
    ``around`` are the memory's vector and its neighbourhood's, or (PostgreSQL) their
    cosines with the query."""

    key: Any
    own: Any
    around: Any
    content: Any
    speaker: Any
    conversation: Any
    event_at: Any
    superseded: Any = None
    bound: Any = None


class HistoryRow(NamedTuple):
    """A row of ``memory_history`` (the columns of ``HISTORY_COLUMNS``)."""

    memory_id: Any
    operation: Any
    at: Any
    layer: Any
    old_content: Any
    new_content: Any
    old_metadata: Any
    new_metadata: Any
    actor: Any


class RecordRow(NamedTuple):
    """A context item's row: its row sequence (``{seq}``), the columns of ``RECORD``, its
    embedding, and the score a search may read after them (``score``)."""

    seq: Any
    id: Any
    tenant_id: Any
    kind: Any
    key: Any
    version: Any
    is_latest: Any
    category: Any
    content: Any
    data: Any
    tags: Any
    created_at: Any
    updated_at: Any
    embedding: Any
    score: Any = None


class NoteRow(NamedTuple):
    """A row of ``observations`` or ``reflections``: the fields of a Note, by their names
    (an observation's ``generation`` is read as 0)."""

    id: Any
    session_key: Any
    content: Any
    token_count: Any
    generation: Any
    source_start: Any
    source_end: Any
    created_at: Any


#: The columns of an entry, after the row sequence: the embedding is the tenth, the time
#: fields (lamina.memory.timing) come last.
ENTRY = ", ".join(EntryRow._fields[1:-1])
#: The columns of a history event.
HISTORY_COLUMNS = ", ".join(HistoryRow._fields)
#: The columns of a context record, after the row sequence and before the embedding.
RECORD = ", ".join(RecordRow._fields[1:-2])
#: The columns of a note, ``{generation}`` standing for its generation's (observations: 0).
NOTE = ", ".join(NoteRow._fields).replace("generation", "{generation}")
