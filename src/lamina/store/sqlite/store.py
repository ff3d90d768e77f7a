"""The embedded store: one SQLite file (WAL) and in-process vector and BM25 indexes.

It opens, checks and closes the file, and hands out every domain's repositories, all on
that file: the memory repositories (``memories``: one per memory port, built from the
shared SQL's parts with SQLite's search, counts, filter and checkpoint: memories.py,
reembed.py), context items, sessions and threads.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

from lamina.backend import HealthStatus, StoreCapabilities
from lamina.embeddings.base import Embedder
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.ports import MemoryPorts
from lamina.store.sql.embedding_cache import content_hash
from lamina.store.sql.forgetting import SqlMemoryForgetting
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.memory_writes import SqlMemoryWrites
from lamina.store.sql.meta import EmbeddingState, capabilities
from lamina.store.sql.sessions import SqlSessions
from lamina.store.sql.transfer import LoadingInPlace, MemoryImport, SqlMemoryTransfer
from lamina.store.sqlite.context_items import SQLiteContextItems
from lamina.store.sqlite.db import REBUILD, SQLITE, Database
from lamina.store.sqlite.indexes import CONTEXT_ITEMS, MEMORIES, IndexedTable, SyncedIndexes
from lamina.store.sqlite.memories import (
    SQLiteMemoryReads,
    SQLiteOwners,
    WalCheckpoint,
    match_udf,
    metadata_filter,
)
from lamina.store.sqlite.reembed import SQLiteReembedding
from lamina.store.sqlite.threads import SQLiteThreads
from lamina.threads.forgetting import link_key

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


class SQLiteStore:
    """Every repository on one SQLite file. Safe for many threads and processes."""

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
        self._db = db = Database(
            self.path,
            {
                "ms_match": (2, match_udf),
                "lamina_sha256": (1, content_hash),
                "lamina_ref_key": (2, link_key),
            },
            busy_timeout,
        )
        self.embedder = embedder
        #: The model of the stored vectors against the embedder's (read when the store opens).
        self.embedding = EmbeddingState(embedder)
        # The HNSW graphs of large scopes are saved beside the file (graph.py).
        graphs = (
            None if str(path) == ":memory:" else self.path.with_name(f"{self.path.name}-vectors")
        )
        self._indexes = SyncedIndexes(db, embedder.dimensions, graphs=graphs)
        self.context_items = SQLiteContextItems(
            db, SyncedIndexes(db, embedder.dimensions, CONTEXT_ITEMS), self.embedding
        )
        self.sessions = SqlSessions(db, SQLITE)
        self.threads = SQLiteThreads(db)
        self.memories = _memory_repositories(
            db, embedder, self.embedding, self.context_items, self._indexes
        )
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


def _memory_repositories(
    db: Database,
    embedder: Embedder,
    embedding: EmbeddingState,
    items: SQLiteContextItems,
    indexes: SyncedIndexes,
) -> MemoryPorts:
    """The memory repositories on the file: the shared SQL's, searched and counted through
    the in-process indexes of memories."""
    parts = MemoryParts.build(
        db,
        SQLITE,
        embedder,
        embedding,
        metadata_filter=metadata_filter,
        settle=WalCheckpoint(db, indexes),
    )
    return MemoryPorts(
        reads=SQLiteMemoryReads(parts.rows, db, indexes),
        writes=SqlMemoryWrites(parts),
        forgetting=SqlMemoryForgetting(parts),
        transfer=SqlMemoryTransfer(parts, MemoryImport(parts), LoadingInPlace()),
        embeddings=SQLiteReembedding(parts, items, db),
        owners=SQLiteOwners(parts.rows, db, indexes),
    )
