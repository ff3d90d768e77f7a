"""The embedded store: one SQLite file (WAL) and in-process vector and BM25 indexes.

It is the memory port itself (memories.py) and hands out the other domains' ports:
context items, sessions and threads, all in the same file.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from lamina.backend import HealthStatus, StoreCapabilities
from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.ports import MemoryPorts
from lamina.store.sql.meta import REEMBED_ITEMS_CLEARED, REEMBED_TARGET, capabilities
from lamina.store.sql.program import Program, rows
from lamina.store.sql.reembed import Reembedding
from lamina.store.sql.sessions import SqlSessions
from lamina.store.sqlite.context_items import SQLiteContextItems
from lamina.store.sqlite.db import REBUILD, SQLITE, Database
from lamina.store.sqlite.indexes import CONTEXT_ITEMS, MEMORIES, IndexedTable, SyncedIndexes
from lamina.store.sqlite.memories import SQLiteMemories, match_udf
from lamina.store.sqlite.threads import SQLiteThreads

log = logging.getLogger(__name__)

_LOG_KEEP = 10_000
_LOG_PRUNE_AT = 100_000


def _prune_log(conn: sqlite3.Connection, source: IndexedTable) -> None:
    """Keep an index log short; processes that fell behind the cut reload their indexes."""
    lo, hi = conn.execute(f"SELECT min(seq), max(seq) FROM {source.log}").fetchone()  # noqa: S608
    if hi is not None and hi - lo > _LOG_PRUNE_AT:
        conn.execute(f"DELETE FROM {source.log} WHERE seq <= ?", (hi - _LOG_KEEP,))  # noqa: S608
        conn.execute(
            "INSERT OR REPLACE INTO store_meta VALUES (?, ?)",
            (source.pruned_key, str(hi - _LOG_KEEP)),
        )


class SQLiteStore(SQLiteMemories, Reembedding):
    """Every port on one SQLite file. Safe for many threads and processes."""

    def __init__(
        self,
        path: Path | str,
        embedder: Embedder,
        *,
        busy_timeout: float = 30.0,
        schema_target: int | None = None,
    ) -> None:
        self.path = Path(path)
        self._schema_target = schema_target  # None: the newest schema (tests pin older ones)
        db = Database(self.path, {"ms_match": (2, match_udf)}, busy_timeout)
        # The HNSW graphs of large scopes are saved beside the file (graph.py).
        graphs = (
            None if str(path) == ":memory:" else self.path.with_name(f"{self.path.name}-vectors")
        )
        super().__init__(db, SyncedIndexes(db, embedder.dimensions, graphs=graphs), embedder)
        self.context_items = SQLiteContextItems(
            db, SyncedIndexes(db, embedder.dimensions, CONTEXT_ITEMS), self.embedding
        )
        self.sessions = SqlSessions(db, SQLITE)
        self.threads = SQLiteThreads(db)
        # One object per concern is the goal (issue 34); for now the store is each of them.
        self.memories = MemoryPorts(self, self, self, self, self, self)
        self.schema_version = 0

    async def initialize(self) -> None:
        await self._db.call("initialize", self._initialize)

    def _initialize(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LaminaError(
                ErrorCode.CONFIGURATION_ERROR,
                f"cannot create data directory {self.path.parent}: {exc}",
            ) from exc
        self.schema_version = self._db.migrate(self._schema_target)
        model, dims = self.embedder.model_id, self.embedder.dimensions
        with self._db.write_transaction() as conn:
            meta = dict(conn.execute("SELECT key, value FROM store_meta").fetchall())
            if "embedding_model" not in meta:
                conn.executemany(
                    "INSERT INTO store_meta VALUES (?, ?)",
                    [("embedding_model", model), ("embedding_dimensions", str(dims))],
                )
                meta.update(embedding_model=model, embedding_dimensions=str(dims))
            self.embedding.load(meta)  # another model: opens, needing ``reembed``
            if REBUILD in meta:  # a process deleted and stopped before it closed
                self._db.forgot()
            for source in (MEMORIES, CONTEXT_ITEMS):
                if source.since <= self.schema_version:
                    _prune_log(conn, source)

    async def shutdown(self) -> None:
        await self._db.call("shutdown", self._indexes.close)
        self._db.close()

    async def health_check(self) -> HealthStatus:
        details = {"store": "sqlite", "path": str(self.path)}
        try:
            count = await self._db.call(
                "health_check",
                lambda: (
                    self._db.connection().execute("SELECT count(*) FROM memories").fetchone()[0]
                ),
            )
        except LaminaError as exc:
            return HealthStatus(False, {**details, "error": exc.message})
        return HealthStatus(
            True,
            {
                **details,
                "memories": count,
                "schema_version": self.schema_version,
                "embedding": self.embedding.status.to_dict(),
            },
        )

    def capabilities(self) -> StoreCapabilities:
        return capabilities(self.embedder)

    # -- re-embedding (lamina.store.sql.reembed) ----------------------------------------------

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
