"""SQLite's part of re-embedding (lamina.store.sql.reembed): every tenant listed and
``store_meta`` written on the store's file, and the final check and record in one write
transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from lamina.store.sql.context_items import SqlContextItems
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.meta import REEMBED_ITEMS_CLEARED, REEMBED_TARGET
from lamina.store.sql.program import Program, rows
from lamina.store.sql.reembed import Reembedding
from lamina.store.sqlite.db import Database


class SQLiteReembedding(Reembedding):
    """The embeddings repository of the SQLite store."""

    def __init__(self, parts: MemoryParts, context_items: SqlContextItems, db: Database) -> None:
        super().__init__(parts, context_items)
        self._db = db

    async def _tenants(self) -> list[str]:
        def read() -> Program[list[str]]:
            found = yield rows(
                "SELECT tenant_id FROM memories UNION SELECT tenant_id FROM context_items "
                "UNION SELECT tenant_id FROM embedding_cache ORDER BY 1"
            )
            return [str(r[0]) for r in found]

        return await self._db.read(None, "reembed", read())

    async def _write_meta(self, values: dict[str, str], remove: Sequence[str]) -> None:
        def write() -> None:
            with self._db.write_transaction() as conn:
                _set_meta(conn, values, remove)

        await self._db.call("reembed", write)

    async def _finish(self, model: str, dims: int, resized: bool) -> bool:
        def finish() -> bool:
            with self._db.write_transaction() as conn:
                left = conn.execute(
                    self._remaining_sql().replace("%s", "?"), (model, dims)
                ).fetchone()[0]
                if left:
                    return False
                conn.execute(
                    "DELETE FROM embedding_cache WHERE model <> ? OR length(vector) <> ?",
                    (model, 4 * dims),
                )
                _set_meta(
                    conn,
                    {"embedding_model": model, "embedding_dimensions": str(dims)},
                    (REEMBED_TARGET, REEMBED_ITEMS_CLEARED),
                )
                return True

        return await self._db.call("reembed", finish)


def _set_meta(conn: sqlite3.Connection, values: dict[str, str], remove: Sequence[str]) -> None:
    conn.executemany("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", list(values.items()))
    conn.executemany("DELETE FROM store_meta WHERE key = ?", [(k,) for k in remove])
