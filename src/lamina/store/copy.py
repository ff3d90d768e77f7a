"""``lamina db copy``: move an embedded SQLite store into PostgreSQL, verified by counts.

Memories keep their ids, timestamps and embeddings (nothing is re-embedded); history, the
embedding cache and the hierarchy come along. Each tenant is copied in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from lamina.embeddings.base import Vectors
from lamina.errors import ErrorCode, LaminaError
from lamina.store.postgres import TENANT_TABLES, PostgresStore
from lamina.store.sql.meta import pending_migrations

TABLES = TENANT_TABLES


class StoredModel:
    """The embedding model a store was built with; copying never embeds anything."""

    def __init__(self, model_id: str, dimensions: int) -> None:
        self.model_id = model_id
        self.dimensions = dimensions

    async def embed(self, texts: Sequence[str]) -> Vectors:
        raise LaminaError(ErrorCode.INTERNAL_ERROR, "copying stores never embeds text")

    async def aclose(self) -> None:
        return None


def _open_source(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise LaminaError(ErrorCode.CONFIGURATION_ERROR, f"no SQLite store at {path}")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.execute("SELECT 1 FROM memories LIMIT 1")
        done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
    except sqlite3.Error as exc:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR, f"{path} is not a lamina SQLite store: {exc}"
        ) from None
    if pending_migrations("lamina.store.sqlite.migrations", done, None):
        conn.close()
        # The copy reads the source read-only: an older schema is upgraded by lamina itself.
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"{path} has an older schema: upgrade it first with "
            f"`lamina --database-url sqlite:///{path} db upgrade`",
            details={"path": str(path)},
        )
    return conn


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _ts_or_none(value: str | None) -> datetime | None:
    return None if value is None else _ts(value)


def _json_or_none(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def _vector_or_none(value: bytes | None) -> Any:
    return None if value is None else np.frombuffer(value, dtype=np.float32)


#: How a column's SQLite value becomes what ``import_tenant`` takes (by column name; the
#: columns not named here pass as stored).
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "identifiers": json.loads,
    "metadata": json.loads,
    "data": json.loads,
    "tags": json.loads,
    "tool_calls": json.loads,
    "old_metadata": _json_or_none,
    "new_metadata": _json_or_none,
    "embedding": _vector_or_none,
    "context_embedding": _vector_or_none,
    "vector": bytes,
    "is_latest": bool,
    "created_at": _ts,
    "updated_at": _ts,
    "at": _ts,
    "event_at": _ts,
    "valid_from": _ts_or_none,
    "valid_until": _ts_or_none,
    "expires_at": _ts_or_none,
}

#: What is read of each table: its columns in the order ``import_tenant`` takes them, and
#: the column that keeps the rows in insertion order ("" for none).
_SOURCE: dict[str, tuple[str, str]] = {
    "session_messages": (
        "session_key, idx, role, content, tool_calls, token_count, created_at",
        "pk",
    ),
    "observations": (
        "id, session_key, content, token_count, source_start, source_end, created_at",
        "pk",
    ),
    "reflections": (
        "id, session_key, content, token_count, generation, source_start, source_end, created_at",
        "pk",
    ),
    "session_prompts": ("session_key, content, updated_at", ""),
    "memories": (
        "id, layer, scope_key, identifiers, content, metadata, embedding, embedding_model, "
        "created_at, updated_at, conversation_id, conversation_position, context, "
        "context_embedding, lexicon, event_at, valid_from, valid_until, expires_at, content_key",
        "pk",
    ),
    "memory_history": (
        "memory_id, operation, layer, old_content, new_content, old_metadata, new_metadata, "
        "actor, at",
        "seq",
    ),
    "embedding_cache": ("model, content_hash, vector, created_at", ""),
    "hierarchy": ("level, child_id, parent_id, updated_at", ""),
    "conversations": ("conversation_id, next_position", ""),
    "context_items": (
        "kind, id, key, version, is_latest, category, content, data, tags, embedding, "
        "created_at, updated_at",
        "pk",
    ),
}


def _read_tenant(src: sqlite3.Connection, tenant: str) -> dict[str, list[tuple[Any, ...]]]:
    return {
        table: _read_table(src, table, columns, order, tenant)
        for table, (columns, order) in _SOURCE.items()
    }


def _read_table(
    src: sqlite3.Connection, table: str, columns: str, order: str, tenant: str
) -> list[tuple[Any, ...]]:
    """The tenant's rows of ``table``, each value converted by its column's name."""
    convert = [_CONVERT.get(column) for column in columns.split(", ")]
    sql = f"SELECT {columns} FROM {table} WHERE tenant_id = ?"  # noqa: S608
    if order:
        sql += f" ORDER BY {order}"
    return [
        tuple(value if f is None else f(value) for f, value in zip(convert, row, strict=True))
        for row in src.execute(sql, (tenant,))
    ]


async def copy_sqlite_to_postgres(
    sqlite_path: Path,
    postgres_url: str,
    *,
    on_progress: Callable[[int, int | None], None] | None = None,
) -> dict[str, Any]:
    """Copy every tenant; returns the counts per table, checked equal on both sides.
    ``on_progress(rows copied, rows in all)`` follows each tenant."""
    src = _open_source(sqlite_path)
    try:
        meta = dict(src.execute("SELECT key, value FROM store_meta").fetchall())
        model = StoredModel(meta["embedding_model"], int(meta["embedding_dimensions"]))
        tenants = sorted(
            {
                r[0]
                for table in TABLES
                for r in src.execute(f"SELECT DISTINCT tenant_id FROM {table}")  # noqa: S608
            }
        )
        dst = PostgresStore(postgres_url, model)
        await dst.initialize()
        try:
            _check_model(dst)
            report: dict[str, dict[str, int]] = {}
            async with dst.bulk.bulk_loading():
                await _copy_tenants(src, dst, tenants, report, on_progress)
        finally:
            await dst.shutdown()
    finally:
        src.close()
    return {"tenants": report, "embedding_model": model.model_id}


def _check_model(dst: PostgresStore) -> None:
    """CONFIGURATION_ERROR, before anything is copied, unless the destination's vectors are
    of the source's model (a database first opened with another model records that one)."""
    status = dst.embedding.status
    if status.reembed_needed:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"the destination database was built with embedding model {status.store_model} "
            f"({status.store_dimensions}-d); the source's vectors are of {status.model} "
            f"({status.dimensions}-d). Copy into a new database.",
            details={
                "store_model": status.store_model,
                "store_dimensions": status.store_dimensions,
                "source_model": status.model,
                "source_dimensions": status.dimensions,
                "reembed_in_progress": status.in_progress,
            },
        )


async def _copy_tenants(
    src: sqlite3.Connection,
    dst: PostgresStore,
    tenants: list[str],
    report: dict[str, Any],
    on_progress: Callable[[int, int | None], None] | None = None,
) -> None:
    total = sum(src.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES)  # noqa: S608
    done = 0
    for tenant in tenants:
        existing = await dst.bulk.table_counts(tenant)
        if any(existing.values()):
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"the destination already holds data of tenant {tenant!r}; copy into "
                "an empty database",
                details={"tenant": tenant, "counts": existing},
            )
        rows = _read_tenant(src, tenant)
        await dst.bulk.import_tenant(tenant, rows)
        expected = {table: len(rows[table]) for table in TABLES}
        copied = await dst.bulk.table_counts(tenant)
        if copied != expected:
            raise LaminaError(
                ErrorCode.INTERNAL_ERROR,
                f"copy of tenant {tenant!r} does not verify: {copied} != {expected}",
            )
        report[tenant] = copied
        done += sum(copied.values())
        if on_progress is not None:
            on_progress(done, total)
