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
    except sqlite3.Error as exc:
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR, f"{path} is not a lamina SQLite store: {exc}"
        ) from None
    return conn


def _ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _read_tenant(src: sqlite3.Connection, tenant: str) -> dict[str, list[tuple[Any, ...]]]:
    memories = [
        (
            r[0],
            r[1],
            r[2],
            json.loads(r[3]),
            r[4],
            json.loads(r[5]),
            None if r[6] is None else np.frombuffer(r[6], dtype=np.float32),
            r[7],
            _ts(r[8]),
            _ts(r[9]),
        )
        for r in src.execute(
            "SELECT id, layer, scope_key, identifiers, content, metadata, embedding, "
            "embedding_model, created_at, updated_at FROM memories WHERE tenant_id = ? "
            "ORDER BY pk",
            (tenant,),
        )
    ]
    history = [
        (
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            None if r[5] is None else json.loads(r[5]),
            None if r[6] is None else json.loads(r[6]),
            r[7],
            _ts(r[8]),
        )
        for r in src.execute(
            "SELECT memory_id, operation, layer, old_content, new_content, old_metadata, "
            "new_metadata, actor, at FROM memory_history WHERE tenant_id = ? ORDER BY seq",
            (tenant,),
        )
    ]
    cache = [
        (r[0], r[1], bytes(r[2]), _ts(r[3]))
        for r in src.execute(
            "SELECT model, content_hash, vector, created_at FROM embedding_cache "
            "WHERE tenant_id = ?",
            (tenant,),
        )
    ]
    hierarchy = [
        (r[0], r[1], r[2], _ts(r[3]))
        for r in src.execute(
            "SELECT level, child_id, parent_id, updated_at FROM hierarchy WHERE tenant_id = ?",
            (tenant,),
        )
    ]
    items = [
        (
            r[0],
            r[1],
            r[2],
            r[3],
            bool(r[4]),
            r[5],
            r[6],
            json.loads(r[7]),
            json.loads(r[8]),
            None if r[9] is None else np.frombuffer(r[9], dtype=np.float32),
            _ts(r[10]),
            _ts(r[11]),
        )
        for r in src.execute(
            "SELECT kind, id, key, version, is_latest, category, content, data, tags, "
            "embedding, created_at, updated_at FROM context_items WHERE tenant_id = ? "
            "ORDER BY pk",
            (tenant,),
        )
    ]
    messages = [
        (r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], _ts(r[6]))
        for r in src.execute(
            "SELECT session_key, idx, role, content, tool_calls, token_count, created_at "
            "FROM session_messages WHERE tenant_id = ? ORDER BY pk",
            (tenant,),
        )
    ]
    observations = [
        (r[0], r[1], r[2], r[3], r[4], r[5], _ts(r[6]))
        for r in src.execute(
            "SELECT id, session_key, content, token_count, source_start, source_end, "
            "created_at FROM observations WHERE tenant_id = ? ORDER BY pk",
            (tenant,),
        )
    ]
    reflections = [
        (r[0], r[1], r[2], r[3], r[4], r[5], r[6], _ts(r[7]))
        for r in src.execute(
            "SELECT id, session_key, content, token_count, generation, source_start, "
            "source_end, created_at FROM reflections WHERE tenant_id = ? ORDER BY pk",
            (tenant,),
        )
    ]
    return {
        "session_messages": messages,
        "observations": observations,
        "reflections": reflections,
        "memories": memories,
        "memory_history": history,
        "embedding_cache": cache,
        "hierarchy": hierarchy,
        "context_items": items,
    }


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
            report: dict[str, dict[str, int]] = {}
            async with dst.bulk_loading():
                await _copy_tenants(src, dst, tenants, report, on_progress)
        finally:
            await dst.shutdown()
    finally:
        src.close()
    return {"tenants": report, "embedding_model": model.model_id}


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
        existing = await dst.table_counts(tenant)
        if any(existing.values()):
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"the destination already holds data of tenant {tenant!r}; copy into "
                "an empty database",
                details={"tenant": tenant, "counts": existing},
            )
        rows = _read_tenant(src, tenant)
        await dst.import_tenant(tenant, rows)
        expected = {table: len(rows[table]) for table in TABLES}
        copied = await dst.table_counts(tenant)
        if copied != expected:
            raise LaminaError(
                ErrorCode.INTERNAL_ERROR,
                f"copy of tenant {tenant!r} does not verify: {copied} != {expected}",
            )
        report[tenant] = copied
        done += sum(copied.values())
        if on_progress is not None:
            on_progress(done, total)
