"""SQL helpers of the PostgreSQL store: metadata filters as JSONB conditions (with
lamina.memory.filters semantics) and vectors to and from pgvector.

The reference semantics (``filters.matches``) are strict about types: booleans equal only
booleans, numbers compare with numbers and strings with strings (by code point), ``ne``
also matches a missing field. Every value travels as a bound parameter.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector_async
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types.json import Jsonb

from lamina.embeddings.base import Vector
from lamina.memory.filters import Condition, MetadataFilter


class _Sql:
    """Builds one condition left to right, so parameters follow their placeholders."""

    def __init__(self, column: str, path: tuple[str, ...], params: list[Any]) -> None:
        self.column, self.path, self.params = column, list(path), params

    def field(self) -> str:
        self.params.append(self.path)
        return f"({self.column} #> %s::text[])"

    def param(self, value: Any, cast: str = "") -> str:
        self.params.append(value)
        return f"%s{cast}"


def _condition(column: str, cond: Condition, params: list[Any]) -> str:
    op, value = cond.op, cond.value
    q = _Sql(column, cond.path, params)
    if op == "eq":
        return f"coalesce({q.field()} = {q.param(Jsonb(value))}, false)"
    if op == "ne":
        return f"NOT coalesce({q.field()} = {q.param(Jsonb(value))}, false)"
    if op == "in":
        values = [Jsonb(v) for v in value]
        return f"coalesce({q.field()} = ANY({q.param(values, '::jsonb[]')}), false)"
    if op == "contains":
        array_test = (
            f"(jsonb_typeof({q.field()}) = 'array' AND {q.field()} @> {q.param(Jsonb([value]))})"
        )
        if not isinstance(value, str):
            return f"coalesce({array_test}, false)"
        text_test = (
            f"(jsonb_typeof({q.field()}) = 'string' AND "
            f"strpos({q.field()} #>> '{{}}', {q.param(value)}) > 0)"
        )
        return f"coalesce({array_test} OR {text_test}, false)"
    sql_op = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op]
    if isinstance(value, str):
        return (
            f"coalesce(jsonb_typeof({q.field()}) = 'string' AND ({q.field()} #>> '{{}}') "
            f'COLLATE "C" {sql_op} {q.param(value)} COLLATE "C", false)'
        )
    return (
        f"coalesce(jsonb_typeof({q.field()}) = 'number' AND "
        f"({q.field()} #>> '{{}}')::numeric {sql_op} {q.param(value, '::numeric')}, false)"
    )


def filter_sql(flt: MetadataFilter, column: str = "metadata") -> tuple[str, list[Any]]:
    """A SQL condition (``TRUE`` for an empty filter) and its parameters."""
    parts: list[str] = []
    params: list[Any] = []
    if flt.tags:
        parts.append(f"(jsonb_typeof({column} -> 'tags') = 'array' AND ({column} -> 'tags') ?| %s)")
        params.append(list(flt.tags))
    for cond in flt.conditions:
        parts.append(_condition(column, cond, params))
    return (" AND ".join(parts) or "TRUE"), params


#: pgvector's binary form starts with the dimensions and an unused int16, big-endian.
_HEAD = struct.Struct(">HH")


class PgVector:
    """A vector as a pgvector parameter, already in pgvector's binary form (int16
    dimensions, int16 unused, big-endian float32s): an import sends 100k of them, and
    pgvector's own ``Vector`` took three copies and a byte swap in Python for each."""

    __slots__ = ("data",)

    def __init__(self, vector: Vector) -> None:
        values = np.asarray(vector, dtype=">f4")
        if values.ndim != 1:
            raise ValueError("a vector has one dimension")
        self.data = _HEAD.pack(len(values), 0) + values.tobytes()

    def text(self) -> bytes:
        values = np.frombuffer(self.data, dtype=">f4", offset=_HEAD.size)
        return ("[" + ",".join(str(float(v)) for v in values) + "]").encode("ascii")


def _as_pg_vector(obj: Any) -> PgVector:
    """``obj`` as a ``PgVector``: registered for the vector type's oid too, the dumpers
    below may be handed another vector (a NumPy array, pgvector's ``Vector``: COPY with
    ``set_types``, say)."""
    if isinstance(obj, PgVector):
        return obj
    return PgVector(obj.to_numpy() if hasattr(obj, "to_numpy") else obj)


class _PgVectorDumper(Dumper):
    format = Format.TEXT

    def dump(self, obj: Any) -> Buffer:
        return _as_pg_vector(obj).text()


class _PgVectorBinaryDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        return _as_pg_vector(obj).data


def to_pg_vector(vector: Vector) -> PgVector:
    """A NumPy vector as a pgvector parameter."""
    return PgVector(vector)


async def register_vectors(conn: psycopg.AsyncConnection[Any]) -> None:
    """The vector type on ``conn``: ``PgVector`` parameters, and vectors of binary results
    read as float32 NumPy arrays (``VectorBinaryLoader``; text results stay pgvector's
    ``Vector``: ``from_pg_vector`` reads both)."""
    await register_vector_async(conn)
    oid = conn.adapters.types["vector"].oid
    conn.adapters.register_loader(oid, VectorBinaryLoader)
    # The binary dumper last: it is the one a %s parameter takes.
    for base in (_PgVectorDumper, _PgVectorBinaryDumper):
        conn.adapters.register_dumper(PgVector, type(base.__name__, (base,), {"oid": oid}))


class VectorBinaryLoader(Loader):
    """pgvector's binary form (int16 dimensions, int16 unused, then big-endian float32s)
    straight into a float32 NumPy array, the same floats: a search decodes a few hundred
    vectors, and pgvector's own loader (a ``Vector`` through ``array``, then NumPy) took
    about 4 µs for each of them."""

    format = Format.BINARY

    def load(self, data: Buffer) -> Vector:
        out: Vector = np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32)
        return out


def from_pg_vector(value: Any) -> Vector | None:
    if value is None:
        return None
    if hasattr(value, "to_numpy"):  # pgvector.Vector
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


#: Query words used for keyword search on PostgreSQL (the first ones given).
MAX_KEYWORD_TERMS = 6
#: Rows ranked at most when a search falls back to "any one word" (see keyword_levels).
ANY_WORD_CAP = 2000


def keyword_levels(words: list[str]) -> list[str]:
    """tsquery texts for "at least k of the words", k = n down to 1.

    ts_rank has to read every row it ranks, and "any of the words" can match a large part
    of a table. Rows holding more of the query's words rank higher anyway, so a search
    ranks the rows of the strictest level that still yields enough of them (the last
    level, any one word, ranks at most ANY_WORD_CAP rows)."""
    terms = list(dict.fromkeys(words))[:MAX_KEYWORD_TERMS]
    return [
        " | ".join("(" + " & ".join(combo) + ")" for combo in itertools.combinations(terms, k))
        for k in range(len(terms), 0, -1)
    ]


async def choose_keyword_level(
    conn: Any,
    probe_sql: str,
    before: tuple[Any, ...],
    after: tuple[Any, ...],
    words: list[str],
    want: int,
) -> tuple[str, bool]:
    """(tsquery text, is the any-word level) of the strictest level with ``want`` rows.
    ``probe_sql`` takes ``before``, the tsquery text, ``after`` and a row limit."""
    levels = keyword_levels(words)
    for level in levels[:-1]:
        row = await (await conn.execute(probe_sql, (*before, level, *after, want))).fetchone()
        if row and int(row[0]) >= want:
            return level, False
    return levels[-1], True
