"""The embedded store's in-process indexes, kept in step with the SQLite file.

Each process holds an exact vector index and a BM25 keyword index per scope. Triggers append
every change of a memory's vector, terms or scope to ``index_log``; ``sync`` applies the
entries this process has not seen, whoever wrote them, before every search.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from memstrata.store.lexical_index import LexicalIndex
from memstrata.store.sqlite_db import Database
from memstrata.store.vector_index import PartitionKey, Vector, VectorIndex
from memstrata.text import decode_terms


class SyncedIndexes:
    """Thread-safe: one lock guards both indexes and the position in the log."""

    def __init__(self, db: Database, dimensions: int) -> None:
        self._db = db
        self._vectors = VectorIndex(dimensions)
        self._lexicon = LexicalIndex()
        self._lock = threading.Lock()
        self._loaded = False
        self._applied_seq = 0

    def sync(self) -> None:
        """Bring both indexes up to date with every committed write (any process)."""
        conn = self._db.connection()
        with self._lock:
            if self._loaded:
                top, pruned = conn.execute(
                    "SELECT (SELECT max(seq) FROM index_log), (SELECT value FROM store_meta "
                    "WHERE key = 'index_log_pruned_through')"
                ).fetchone()
                if (top or 0) <= self._applied_seq:
                    return
                if pruned is not None and int(pruned) > self._applied_seq:
                    self._loaded = False  # this process fell behind the pruned log
            if not self._loaded:
                self._load(conn)
                return
            rows = conn.execute(
                "SELECT l.seq, l.memory_pk, m.tenant_id, m.layer, m.scope_key, m.embedding, "
                "m.lexicon FROM index_log l LEFT JOIN memories m ON m.pk = l.memory_pk "
                "WHERE l.seq > ? ORDER BY l.seq",
                (self._applied_seq,),
            ).fetchall()
            self._apply(rows)

    def _apply(self, rows: Iterable[tuple[Any, ...]]) -> None:
        for seq, pk, tenant, layer, key, blob, lexicon in rows:
            if tenant is None:
                self._vectors.remove(pk)
                self._lexicon.remove(pk)
            else:
                part = (tenant, layer, key)
                if blob is None:
                    self._vectors.remove(pk)
                else:
                    self._vectors.upsert(pk, part, np.frombuffer(blob, dtype=np.float32))
                self._lexicon.upsert(pk, part, decode_terms(lexicon))
            self._applied_seq = max(self._applied_seq, seq)

    def _load(self, conn: sqlite3.Connection) -> None:
        self._vectors.clear()
        self._lexicon.clear()
        with self._db.snapshot():
            top = conn.execute("SELECT coalesce(max(seq), 0) FROM index_log").fetchone()[0]
            sizes = conn.execute(
                "SELECT tenant_id, layer, scope_key, count(*) FROM memories "
                "WHERE embedding IS NOT NULL GROUP BY tenant_id, layer, scope_key"
            ).fetchall()
            for tenant, layer, key, count in sizes:
                self._vectors.reserve((tenant, layer, key), count)
            rows = conn.execute(
                "SELECT ?, pk, tenant_id, layer, scope_key, embedding, lexicon FROM memories "
                "ORDER BY pk",
                (top,),
            )
            self._applied_seq = 0
            self._apply(rows)
            self._applied_seq = top
        self._loaded = True

    def vector_hits(
        self, key: PartitionKey, query: Vector, min_score: float | None, limit: int | None
    ) -> list[tuple[int, float]]:
        with self._lock:
            return self._vectors.search(key, query, min_score, limit)

    def keyword_hits(
        self, key: PartitionKey, terms: list[str], limit: int | None
    ) -> list[tuple[int, float]]:
        with self._lock:
            return self._lexicon.search(key, terms, limit)

    def cosines(self, pks: Iterable[int], query: Vector) -> dict[int, float | None]:
        """Cosine of ``query`` with each stored vector (None for a memory without one)."""
        out: dict[int, float | None] = {}
        with self._lock:
            for pk in pks:
                vector = self._vectors.vector(pk)
                out[pk] = None if vector is None else float(vector @ query)
        return out

    def counts_by_layer(self, tenant_id: str | None) -> dict[str, int]:
        with self._lock:
            return self._vectors.counts_by_layer(tenant_id)
