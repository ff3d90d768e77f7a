"""What differs between SQLite and PostgreSQL, for SQL written once (lamina.store.sql).

Each backend subclasses ``Dialect`` once (sqlite/db.py, postgres/db.py). Statements use
``%s`` placeholders on both; names and literals come from the attributes below, values
pass through the adapters (JSON as text or JSONB, timestamps as ISO text or timestamptz,
vectors as float32 blobs or pgvector).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, ClassVar

from lamina.embeddings.base import Vector
from lamina.memory.scoring import CONTEXT_TERM_WEIGHT
from lamina.store.sql.program import Step, many
from lamina.text import encode_terms, weighted_terms

#: Keys per statement where a statement lists them (SQLite allows 32,766 parameters).
CHUNK = 500


class Dialect(ABC):
    #: The column ordering a table's rows by insertion (SQLite ``pk``, PostgreSQL ``seq``).
    seq: ClassVar[str]
    #: The key of the graph tables: entities' ``<id>``, relations' ``source_<id>`` and
    #: ``target_<id>`` (SQLite ``pk``, PostgreSQL ``id``).
    graph_id: ClassVar[str]
    #: Boolean literals.
    true: ClassVar[str]
    false: ClassVar[str]
    #: The scalar maximum of two values (SQLite ``max``, PostgreSQL ``greatest``).
    greatest: ClassVar[str]
    #: The position of a substring: ``<strpos>(text, part)`` (``instr``, ``strpos``).
    strpos: ClassVar[str]
    #: Ends a SELECT of rows the transaction goes on to change (PostgreSQL locks them;
    #: SQLite's write transactions hold the whole file).
    for_update: ClassVar[str]
    #: The LIMIT that means "all rows".
    no_limit: ClassVar[int | None]

    def insert(self, table: str, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> Step:
        """One step inserting ``rows`` (their values in the order of ``names``, none empty)
        into ``table``: SQLite runs one prepared INSERT per row (executemany, in C)."""
        marks = ", ".join(["%s"] * len(names))
        return many(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})", rows)  # noqa: S608

    def update(
        self,
        table: str,
        names: Sequence[str],
        keys: Sequence[str],
        rows: Sequence[Sequence[Any]],
    ) -> Step:
        """One step setting the columns ``names`` of the rows of ``table`` that ``keys``
        find (each of ``rows``: the new values in the order of ``names``, then the keys';
        no two rows with the same keys): SQLite runs one prepared UPDATE per row
        (executemany, in C)."""
        sets = ", ".join(f"{name} = %s" for name in names)
        where = " AND ".join(f"{key} = %s" for key in keys)
        return many(f"UPDATE {table} SET {sets} WHERE {where}", rows)  # noqa: S608

    @abstractmethod
    def is_true(self, column: str) -> str:
        """A condition that a boolean column is true (written so partial indexes apply)."""

    #: ``tenant_id`` where a statement must walk the rows in ``seq`` order rather than
    #: through an index on the tenant (SQLite's unary ``+`` keeps the term off the index:
    #: else it sorts every matching row for each page of an export).
    tenant_in_seq_order: ClassVar[str] = "tenant_id"

    def bytewise(self, column: str) -> str:
        """``column`` compared and ordered by its bytes (code points), whatever the database's
        collation: pages in key order are the same on every store (SQLite: its default)."""
        return column

    def unindexed(self, column: str) -> str:
        """``column`` in a condition the planner should check row by row rather than walk
        an index for (SQLite: unary ``+``; PostgreSQL's planner weighs it itself)."""
        return column

    def seq_page(self, select: str, where: str) -> str:
        """One page of a walk in insertion order: ``select`` (``SELECT … FROM table``) of the
        rows ``where`` holds, after a ``seq`` and up to a limit (the last two parameters)."""
        return f"{select} WHERE {where} AND {self.seq} > %s ORDER BY {self.seq} LIMIT %s"

    @abstractmethod
    def json(self, value: Any) -> Any:
        """A JSON value as a parameter."""

    @abstractmethod
    def from_json(self, value: Any) -> Any:
        """A JSON column's value as Python data."""

    @abstractmethod
    def time(self, value: datetime) -> Any:
        """A timestamp as a parameter."""

    @abstractmethod
    def from_time(self, value: Any) -> datetime:
        """A timestamp column's value."""

    @abstractmethod
    def vector(self, value: Vector) -> Any:
        """An embedding as a parameter."""

    @abstractmethod
    def from_vector(self, value: Any) -> Vector | None:
        """An embedding column's value (None when NULL)."""

    @abstractmethod
    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """A condition that ``column`` is one of ``values`` (not empty), and its parameters."""

    def any_of_chunks(
        self, column: str, values: Sequence[Any], size: int = CHUNK
    ) -> Iterator[tuple[str, list[Any]]]:
        """``any_of`` for each run of ``size`` of ``values`` in turn: one statement a run
        where a statement lists them (SQLite allows 32,766 parameters)."""
        for start in range(0, len(values), size):
            yield self.any_of(column, values[start : start + size])

    @abstractmethod
    def json_text(self, column: str, key: str) -> str:
        """The text at top-level ``key`` of the JSON object ``column`` (``key`` is a name the
        code chooses, never input)."""

    @abstractmethod
    def json_string(self, column: str, *path: str) -> str:
        """The string at ``path`` in the JSON object ``column``, NULL when absent or not a
        string (``path`` holds names the code chooses, never input)."""

    @abstractmethod
    def tags_any(self, column: str, tags: Sequence[str]) -> tuple[str, list[Any]]:
        """A condition that the JSON array ``column`` holds one of ``tags``."""

    def index_columns(self, content: str) -> dict[str, Any]:
        """Columns a context item stores beside ``content`` for the keyword index (none:
        PostgreSQL derives its tsvector in the table)."""
        return {}

    #: Whether ``memories`` stores its length in terms (PostgreSQL: BM25 in SQL).
    memory_term_count: ClassVar[bool] = False

    def memory_terms(self, content: str, context: str | None = None) -> dict[str, Any]:
        """A memory's keyword-index columns: its terms (lamina.text.analyze) and its
        neighbourhood's at CONTEXT_TERM_WEIGHT, as "term:count …" (and their total)."""
        terms = weighted_terms(content, context, CONTEXT_TERM_WEIGHT)
        columns: dict[str, Any] = {"lexicon": encode_terms(terms)}
        if self.memory_term_count:
            columns["term_count"] = float(sum(terms.values()))
        return columns
