"""The embedded store's in-process indexes, kept in step with the SQLite file.

Each process holds a vector index (compact vectors, ranked exactly from the float32 vectors
of the file: vector_index.py) and a BM25 keyword index per partition (a memory scope, or a
kind of context item). Triggers append every change of a row's vector, terms or
partition to a log table; ``sync`` applies the entries this process has not seen, whoever
wrote them, before every search. The same machinery serves every indexed table.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lamina.embeddings.base import Vector
from lamina.heap import release_freed
from lamina.memory.bm25 import KeywordScores
from lamina.store.sqlite import graph as hnsw
from lamina.store.sqlite.db import Database
from lamina.store.sqlite.graph_files import GraphFiles, Pending
from lamina.store.sqlite.lexical_index import LexicalIndex
from lamina.store.sqlite.ranking import Pks, Ranking
from lamina.store.sqlite.vector_index import PartitionKey, Start, VectorIndex
from lamina.text import decode_terms

log = logging.getLogger(__name__)

#: How long closing waits for a cancelled graph build to stop (it stops between chunks).
CLOSE_WAIT = 10.0
#: Keys read per statement by ``_stored`` (below SQLite's limit on parameters).
_READ = 500
#: The nice value a background graph build runs at (Linux: per thread; its insert threads
#: inherit it), so that searches meanwhile keep the cores they need.
BUILD_NICE = 10


def yield_to_searches() -> None:
    """Lower the calling thread's CPU priority to ``BUILD_NICE``, if it is not lower (Linux
    only, where a thread's priority is its own; elsewhere it would lower the process's)."""
    if sys.platform.startswith("linux"):
        try:
            me = threading.get_native_id()
            nice = max(os.getpriority(os.PRIO_PROCESS, me), BUILD_NICE)
            os.setpriority(os.PRIO_PROCESS, me, nice)
        except OSError:  # not permitted: the build runs at the process's priority
            log.debug("could not lower the graph build's priority", exc_info=True)


@dataclass(frozen=True)
class IndexedTable:
    """Where a table's rows and change log are. ``partition`` is an SQL expression list over
    the row alias ``m`` giving (tenant, a, b); a NULL tenant means "not in the index"."""

    table: str
    log: str
    log_column: str
    partition: str
    pruned_key: str
    #: The schema version that created the table.
    since: int = 1


MEMORIES = IndexedTable(
    "memories",
    "index_log",
    "memory_pk",
    "m.tenant_id, m.layer, m.scope_key",
    "index_log_pruned_through",
)
CONTEXT_ITEMS = IndexedTable(
    "context_items",
    "context_index_log",
    "item_pk",
    "CASE WHEN m.is_latest = 1 THEN m.tenant_id END, m.kind, ''",
    "context_index_log_pruned_through",
    since=2,
)


class SyncedIndexes:
    """Thread-safe: one lock guards both indexes and the position in the log."""

    def __init__(
        self,
        db: Database,
        dimensions: int,
        source: IndexedTable = MEMORIES,
        graphs: Path | None = None,
        start: Start | None = None,
    ) -> None:
        """``graphs``: the folder where the HNSW graphs of large scopes are saved (graph.py);
        None: no graphs. ``start`` runs a graph's build: by default on a daemon thread of
        its own, while searches scan the scope's codes (vector_index.py)."""
        self._db = db
        self._source = source
        self._dimensions = dimensions
        self._graphs = None if graphs is None else GraphFiles(graphs)
        self._threads: list[threading.Thread] = []
        self._vectors = VectorIndex(
            dimensions,
            self._stored,
            graphs=graphs is not None,
            start=start or self._in_background,
            built=self._built,
            position=lambda: self._applied_seq,
        )
        self._blob_size = 4 * dimensions  # float32
        self._lexicon = LexicalIndex()
        self._lock = threading.Lock()
        self._loaded = False
        self._applied_seq = 0
        #: A deletion was settled (``drop_saved``) that the indexes may not have applied:
        #: no graph is saved until they catch up with the log.
        self._deleting = False

    def sync(self) -> None:
        """Bring both indexes up to date with every committed write (any process); then
        save the graphs that a load or a build made, outside the lock (graph_files.py)."""
        with self._lock:
            loaded = self._catch_up()
            self._deleting = False
            pending = self._pending(everything=loaded)
        self._write(pending)

    def _catch_up(self) -> bool:
        """Apply the log this process has not seen; True if that (re)loaded everything."""
        conn = self._db.connection()
        src = self._source
        if self._loaded:
            top, pruned = conn.execute(
                f"SELECT (SELECT max(seq) FROM {src.log}), "  # noqa: S608
                "(SELECT value FROM store_meta WHERE key = ?)",
                (src.pruned_key,),
            ).fetchone()
            if (top or 0) <= self._applied_seq:
                return False
            if pruned is not None and int(pruned) > self._applied_seq:
                self._loaded = False  # this process fell behind the pruned log
        if not self._loaded:
            self._load(conn)
            return True
        rows = conn.execute(
            f"SELECT l.seq, l.{src.log_column}, {src.partition}, m.embedding, "  # noqa: S608
            f"m.lexicon FROM {src.log} l LEFT JOIN {src.table} m "
            f"ON m.pk = l.{src.log_column} WHERE l.seq > ? ORDER BY l.seq",
            (self._applied_seq,),
        ).fetchall()
        self._apply(rows)
        return False

    def _write(self, pending: Pending | None) -> None:
        """Outside the lock: write what ``_pending`` took, then drop the copies and give
        their memory back (lamina/heap.py)."""
        if self._graphs is None or pending is None or not pending.saves:
            return
        self._graphs.write(pending)
        pending.saves.clear()
        release_freed()

    def _pending(self, everything: bool) -> Pending | None:
        """Under the lock: what to save of the graphs, as of the log applied (``everything``
        changed since saved; else only when a scope became a graph since)."""
        if self._graphs is None or self._deleting:
            return None
        if not (everything or self._vectors.graphs_built):
            return None
        return Pending(self._graphs.ticket(), self._applied_seq, self._vectors.saves())

    def _apply(
        self,
        rows: Iterable[tuple[Any, ...]],
        restored: frozenset[PartitionKey] = frozenset(),
        changed: frozenset[int] = frozenset(),
    ) -> None:
        """Apply log entries (or, loading, every row). ``restored``: scopes whose saved
        graph holds the vector of every row not ``changed`` since it was saved."""
        for seq, pk, tenant, layer, key, blob, lexicon in rows:
            if tenant is None:
                self._vectors.remove(pk)
                self._lexicon.remove(pk)
            else:
                part = (tenant, layer, key)
                if part in restored and pk not in changed:
                    self._vectors.adopt(pk, part, blob)
                elif blob is None or len(blob) != self._blob_size:  # None, or another model's
                    self._vectors.remove(pk)
                else:
                    self._vectors.upsert(pk, part, np.frombuffer(blob, dtype=np.float32))
                self._lexicon.upsert(pk, part, decode_terms(lexicon))
            self._applied_seq = max(self._applied_seq, seq)

    def _load(self, conn: sqlite3.Connection) -> None:
        self._vectors.clear()
        self._lexicon.clear()
        src = self._source
        with self._db.snapshot():
            top = conn.execute(
                f"SELECT coalesce(max(seq), 0) FROM {src.log}"  # noqa: S608
            ).fetchone()[0]
            sizes = conn.execute(
                f"SELECT {src.partition}, count(*) FROM {src.table} m "  # noqa: S608
                "WHERE m.embedding IS NOT NULL GROUP BY 1, 2, 3"
            ).fetchall()
            restored, partial = self._restore(conn, sizes, top)
            for tenant, layer, key, count in sizes:
                if tenant is not None:
                    self._vectors.reserve((tenant, layer, key), count)
            changed: frozenset[int] = frozenset()
            if restored or partial:
                since = min([*restored.values(), *(seq for _, seq in partial.values())])
                changed = frozenset(
                    pk
                    for (pk,) in conn.execute(
                        f"SELECT DISTINCT {src.log_column} FROM {src.log} "  # noqa: S608
                        "WHERE seq > ?",
                        (since,),
                    )
                )
            for part, (graph, _) in partial.items():
                self._vectors.resume(part, graph, changed)
            rows = conn.execute(
                f"SELECT ?, m.pk, {src.partition}, m.embedding, m.lexicon "  # noqa: S608
                f"FROM {src.table} m ORDER BY m.pk",
                (top,),
            )
            self._applied_seq = 0
            self._vectors.loading = True
            self._apply(rows, frozenset(restored), changed)
            self._vectors.finish_load()
            failed = self._vectors.restore_failed
            if not failed:
                self._lexicon.merge()
                self._applied_seq = top
        if failed and self._graphs is not None:
            log.warning("a saved vector graph could not be read back: it is built again")
            self._graphs.drop_all()
            self._load(conn)
            return
        release_freed()  # the load's temporaries (lamina/heap.py)
        self._loaded = True

    def _restore(
        self, conn: sqlite3.Connection, sizes: list[tuple[Any, ...]], top: int
    ) -> tuple[dict[PartitionKey, int], dict[PartitionKey, tuple[hnsw.Graph, int]]]:
        """Load the saved graphs of large scopes that the log can bring up to date (saved
        at a seq the log still holds every entry after): their seqs by scope, and for the
        scopes without one, the partial graphs a stopped build saved, and their seqs."""
        if self._graphs is None:
            return {}, {}
        row = conn.execute(
            "SELECT value FROM store_meta WHERE key = ?", (self._source.pruned_key,)
        ).fetchone()
        pruned = int(row[0]) if row else 0
        out: dict[PartitionKey, int] = {}
        partial: dict[PartitionKey, tuple[hnsw.Graph, int]] = {}
        for tenant, layer, key, count in sizes:
            if tenant is None or count < hnsw.GRAPH_FROM:
                continue
            part = (tenant, layer, key)
            loaded = self._graphs.load(part, self._dimensions)
            if loaded is not None and pruned <= loaded[1] <= top:
                self._vectors.restore(part, loaded[0])
                out[part] = loaded[1]
                log.info(
                    "restored a vector graph of %d at log seq %d (now %d)", count, loaded[1], top
                )
                continue
            loaded = self._graphs.load(part, self._dimensions, partial=True)
            if loaded is not None and pruned <= loaded[1] <= top:
                graph, seq = loaded
                if isinstance(graph, hnsw.Graph):  # (saved whole)
                    partial[part] = (graph, seq)
                    log.info("a vector graph of %d resumes from %d saved", count, len(graph))
        return out, partial

    def _in_background(self, job: Callable[[], None]) -> None:
        def run() -> None:
            yield_to_searches()
            job()

        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=run, name="lamina-vector-graph", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _built(self) -> None:
        """A graph built in the background is ready: swap it in, and save it."""
        with self._lock:
            pending = self._pending(everything=False) if self._vectors.swap_built() else None
        self._write(pending)

    def wait_for_builds(self, timeout: float | None = None) -> bool:
        """Wait until the graphs being built are in place (or ``timeout`` seconds have
        passed); True if none is still building."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._threads):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)
        return not any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        """Stop the graphs being built, and save those that changed (caught up with the log
        first: a deletion another process made is applied, and its graph not saved) and the
        partial graphs of the stopped builds worth saving (the next start extends them)."""
        saving = self._graphs is not None and self._loaded
        if saving:
            self.sync()
        with self._lock:
            self._vectors.cancel_builds()
        if not self.wait_for_builds(CLOSE_WAIT):
            log.warning("a vector graph build did not stop within %s s", CLOSE_WAIT)
        if saving and self._graphs is not None:
            with self._lock:
                pending = [self._pending(everything=True)]
                if not self._deleting:
                    pending += [
                        Pending(self._graphs.ticket(), seq, [save])
                        for seq, save in self._vectors.partial_saves()
                    ]
            for each in pending:
                self._write(each)

    def drop_saved(self) -> None:
        """A deletion: no saved graph may keep the deleted vector (graph_files.py). Under
        the lock, so that a save taken before the deletion was applied is voided."""
        if self._graphs is not None:
            with self._lock:
                self._graphs.forget()
                self._deleting = True
            self._graphs.drop_all()

    def _stored(self, pks: Pks) -> Vector:
        """The float32 vectors the file holds for ``pks`` (NaN rows: none, or another
        model's), read by the vector index for the few it ranks exactly."""
        out: Vector = np.full((len(pks), self._dimensions), np.nan, dtype=np.float32)
        order = np.argsort(pks, kind="stable")
        ascending = pks[order]
        conn = self._db.connection()
        keys = pks.tolist()
        for start in range(0, len(keys), _READ):
            chunk = keys[start : start + _READ]
            found = conn.execute(
                f"SELECT pk, embedding FROM {self._source.table} "  # noqa: S608
                f"WHERE pk IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
            # One buffer for all (a row at a time costs more than reading it).
            usable = [r for r in found if r[1] is not None and len(r[1]) == self._blob_size]
            if usable:
                at = np.fromiter((r[0] for r in usable), dtype=np.int64, count=len(usable))
                blobs = b"".join([r[1] for r in usable])
                out[order[np.searchsorted(ascending, at)]] = np.frombuffer(
                    blobs, dtype=np.float32
                ).reshape(len(usable), self._dimensions)
        return out

    def vector_hits(
        self, key: PartitionKey, query: Vector, min_score: float | None, limit: int | None
    ) -> list[tuple[int, float]]:
        with self._lock:
            return list(self._vectors.search(key, query, min_score, limit))

    def nearest(self, key: PartitionKey, query: Vector, limit: int | None) -> Sequence[int]:
        """The pks of the best ``limit`` by vector (None: all, exact as far as read)."""
        with self._lock:
            found = self._vectors.search(key, query, None, limit)
        return found.pks() if isinstance(found, Ranking) else [pk for pk, _ in found]

    def keyword_hits(
        self, key: PartitionKey, terms: list[str], limit: int | None
    ) -> list[tuple[int, float]]:
        with self._lock:
            return self._lexicon.search(key, terms, limit)

    def keyword_scores(self, key: PartitionKey, terms: list[str]) -> KeywordScores:
        with self._lock:
            return self._lexicon.scores(key, terms)

    def cosines(self, pks: Iterable[int], query: Vector) -> dict[int, float | None]:
        """Cosine of ``query`` with each stored vector (None for a memory without one)."""
        out: dict[int, float | None] = {}
        pks = list(pks)
        with self._lock:
            known = np.array([pk for pk in pks if pk in self._vectors], dtype=np.int64)
            scores = np.vecdot(self._stored(known), query) if len(known) else known
            found = {int(pk): float(s) for pk, s in zip(known, scores, strict=True)}
        for pk in pks:
            score = found.get(pk)
            out[pk] = None if score is None or np.isnan(score) else score
        return out

    def counts_by_layer(self, tenant_id: str | None) -> dict[str, int]:
        with self._lock:
            return self._vectors.counts_by_layer(tenant_id)
