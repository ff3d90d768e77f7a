"""The saved HNSW graphs (graph.py) of the embedded store, in ``<file>-vectors/`` beside it.

A graph is saved as ``<scope hash>-<log seq>.usearch``, written to a temporary name and
renamed: a process killed mid-write leaves the previous file whole. The seq is that of the
index log the graph had caught up with; on start, a store loads the newest file of each
large scope and applies what the log says changed after that seq (or rebuilds, when the log
was pruned past it, or no file is there). The SQLite file stays the truth: a lost or stale
graph file costs time, never a memory.

A build that a closing process stops leaves its graph as ``<scope hash>-<log seq>-partial
.usearch`` (when it got far enough to be worth the write, vector_index.py): the next start
extends it instead of building from nothing, so that short-lived processes (a CLI search
each) finish a large scope's graph between them.

Writing a graph of 100,000 vectors takes a while, and must not hold the index lock, which
every search and write takes: under that lock the owner takes a ``Pending`` save (a copy of
each graph to save, ``Graph.snapshot``, and a ``ticket``), and writes it after releasing
the lock. Writes are one at a time; one older than a save already written for its scope is
skipped, so a slow write never puts an older graph in place of a newer one.

Deleted vectors must not outlive their rows on disk: a graph that lost a vector is never
saved again (its files are removed; the next start rebuilds it), and a deletion removes the
saved graphs of the whole file (``forget``, then ``drop_all``), which also voids the saves
taken before it and not yet written.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from lamina.store.sqlite.graph import Graph
from lamina.store.sqlite.graph_codes import Stripped

log = logging.getLogger(__name__)

PartitionKey = tuple[str, str, str]
SUFFIX = ".usearch"
#: Marks the file of a partial graph (``Save.partial``): ``<scope hash>-<seq>-partial``.
PARTIAL = "-partial"


def scope_file(key: PartitionKey) -> str:
    """The file name stem of a scope's graph: a hash, so no identifier shows in the name."""
    return hashlib.sha256("\x1f".join(key).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Save:
    """One scope's part of a save: a copy of its graph to write, or None to remove its
    files (the graph lost a vector); ``graph`` is the live one (dirty again on a failure)."""

    key: PartitionKey
    graph: Graph
    copy: Graph | None
    #: A build stopped before its end (a closing process): the graph holds part of the
    #: scope, each vector as of the save's seq; a later start extends it (vector_index.py).
    partial: bool = False


@dataclass(frozen=True)
class Pending:
    """Saves taken under the index lock, as of log ``seq``, to ``write`` outside it."""

    ticket: int
    seq: int
    saves: list[Save] = field(default_factory=list)


class GraphFiles:
    """Thread-safe. ``ticket`` and ``forget`` are called under the owner's index lock."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._writing = threading.Lock()
        self._next = 0
        #: Saves ticketed before this one are void (a deletion came after them).
        self._void_below = 0
        #: The ticket of the last save written (or removal done) for each scope.
        self._written: dict[PartitionKey, int] = {}

    def ticket(self) -> int:
        self._next += 1
        return self._next

    def forget(self) -> None:
        """A deletion: void every save ticketed so far (``drop_all`` removes the files)."""
        self._void_below = self._next + 1

    def drop_all(self) -> None:
        """Remove the saved graph of every scope, and every half-written one: a process
        killed while writing leaves its temporary file, which may hold deleted vectors."""
        with self._writing:
            if self.folder.is_dir():
                for path in [*self.folder.glob(f"*{SUFFIX}"), *self.folder.glob(".*.tmp")]:
                    path.unlink(missing_ok=True)

    def write(self, pending: Pending | None) -> None:
        """Write (or remove) the saved graphs of ``pending``; a failed write is logged and
        its graph left to save again."""
        if pending is None or not pending.saves:
            return
        with self._writing:
            for save in pending.saves:
                if pending.ticket < max(self._void_below, self._written.get(save.key, 0)):
                    continue
                self._written[save.key] = pending.ticket
                try:
                    self._write_one(save, pending.seq)
                except OSError:
                    log.exception("saving a vector graph failed; it is saved again later")
                    save.graph.dirty = True

    def _write_one(self, save: Save, seq: int) -> None:
        stem = scope_file(save.key)
        final: Path | None = None
        if save.copy is not None:
            self.folder.mkdir(parents=True, exist_ok=True)
            final = self.folder / f"{stem}-{seq}{PARTIAL if save.partial else ''}{SUFFIX}"
            temporary = self.folder / f".{stem}-{seq}-{os.getpid()}.tmp"
            try:
                save.copy.write(temporary, whole=save.partial)  # (the load reads it so)
                _sync(temporary)  # whole on disk before it takes the final name
                os.replace(temporary, final)
                _sync(self.folder)
            finally:
                temporary.unlink(missing_ok=True)
        if self.folder.is_dir():  # (a partial graph replaces only partial ones)
            older = f"{stem}-*{PARTIAL if save.partial else ''}{SUFFIX}"
            for old in self.folder.glob(older):
                if old != final:
                    old.unlink(missing_ok=True)

    def load(
        self, key: PartitionKey, dim: int, partial: bool = False
    ) -> tuple[Graph | Stripped, int] | None:
        """The newest saved graph of a scope (or, ``partial``, partial graph) and its seq,
        None when there is none usable (one saved without its codes waits for them:
        graph_codes.py; a partial one is saved whole)."""
        if not self.folder.is_dir():
            return None
        stem = scope_file(key)
        end = len(PARTIAL if partial else "") + len(SUFFIX)
        saved: list[tuple[int, Path]] = []
        for path in self.folder.glob(f"{stem}-*{PARTIAL if partial else ''}{SUFFIX}"):
            number = path.name[len(stem) + 1 : -end]
            if number.isdigit():
                saved.append((int(number), path))
        for seq, path in sorted(saved, reverse=True):
            graph = Graph.read(path, dim)
            if graph is not None:
                return graph, seq
        return None


def _sync(path: Path) -> None:
    """Flush ``path`` (a file, or a folder's entries) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
