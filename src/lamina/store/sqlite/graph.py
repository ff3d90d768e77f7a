"""HNSW graphs (usearch) for the largest scopes of the embedded store, kept beside its file.

A scope of ``GRAPH_FROM`` memories or more is searched through a graph instead of a scan
(docs/vector-index.md says why usearch, and how it compares). The graph holds the scope's
int8 codes (compact.py) and is then their one in-memory copy; a search asks it for the best
``count`` by the cosine of the codes, and the caller ranks those exactly from the float32
vectors of the SQLite file.

A graph is saved as ``<scope hash>-<log seq>.usearch`` in ``<file>-vectors/`` beside the
SQLite file, written to a temporary name and renamed: a process killed mid-write leaves the
previous file whole. The seq is that of the index log the graph had caught up with; on
start, a store loads the newest file of each large scope and applies what the log says
changed after that seq (or rebuilds, when the log was pruned past it, or no file is there).
A build runs in the background while the scope is still searched through its codes
(vector_index.py), in chunks, so that a closing store can cancel it.
The SQLite file stays the truth: a lost or stale graph file costs time, never a memory.

Deleted vectors must not outlive their rows on disk: a graph that lost a vector is never
saved again (its files are removed; the next start rebuilds it), and a deletion removes the
saved graphs of the whole file (``drop_saved``).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from lamina.store.sqlite.compact import Floats, Int8s

log = logging.getLogger(__name__)

#: Scopes with at least this many vectors are searched through a graph (module docstring).
GRAPH_FROM = 100_000
#: HNSW parameters: edges per node, candidates kept while inserting and while searching.
CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = 64
SUFFIX = ".usearch"
#: A build adds this many vectors between two looks at whether it was cancelled.
BUILD_CHUNK = 1024

Cancelled = Callable[[], bool]


def _never() -> bool:
    return False


def scope_file(key: tuple[str, str, str]) -> str:
    """The file name stem of a scope's graph: a hash, so no identifier shows in the name."""
    return hashlib.sha256("\x1f".join(key).encode()).hexdigest()[:32]


class Graph:
    """One scope's HNSW graph over int8 codes, keyed by the rows' pks."""

    def __init__(self, index: Any) -> None:
        self._index = index
        #: A vector left the graph since it was built: it may still hold its bytes.
        self.forgot = False
        #: Changed since it was last saved (or loaded).
        self.dirty = True

    @classmethod
    def build(
        cls, dim: int, pks: npt.NDArray[np.int64], codes: Int8s, cancelled: Cancelled = _never
    ) -> Graph | None:
        """A graph of ``codes`` keyed by ``pks``, added ``BUILD_CHUNK`` at a time; None when
        ``cancelled()`` turns true between two chunks."""
        from usearch.index import Index

        index = Index(
            ndim=dim,
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        keys = pks.astype(np.uint64)
        for start in range(0, len(keys), BUILD_CHUNK):
            if cancelled():
                return None
            stop = start + BUILD_CHUNK
            index.add(keys[start:stop], codes[start:stop], threads=os.cpu_count() or 1)
        return cls(index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, pk: int) -> bool:
        return bool(pk in self._index)

    def keys(self) -> npt.NDArray[np.int64]:
        return np.asarray(self._index.keys, dtype=np.int64)

    def put(self, pk: int, codes: Int8s) -> None:
        if pk in self._index:
            self._index.remove(pk)
        self._index.add(pk, codes, threads=1)
        self.dirty = True

    def remove(self, pk: int) -> None:
        if pk in self._index:
            self._index.remove(pk)
            self.forgot = self.dirty = True

    def search(self, codes: Int8s, count: int, exact: bool = False) -> tuple[Any, Floats]:
        """The pks of the best ``count`` by the cosine of the codes, and those cosines."""
        expansion = max(EXPANSION_SEARCH, count)
        if not exact and self._index.expansion_search != expansion:
            self._index.expansion_search = expansion
        found = self._index.search(codes, count, threads=1, exact=exact)
        cosines: Floats = (1 - np.asarray(found.distances, dtype=np.float32)).astype(np.float32)
        return np.asarray(found.keys, dtype=np.int64), cosines

    def save(self, folder: Path, key: tuple[str, str, str], seq: int) -> None:
        """Write the graph as of log ``seq`` (module docstring); older files of the scope
        are removed once it is in place."""
        folder.mkdir(parents=True, exist_ok=True)
        stem = scope_file(key)
        final = folder / f"{stem}-{seq}{SUFFIX}"
        temporary = folder / f".{stem}-{seq}-{os.getpid()}.tmp"
        self._index.save(str(temporary))
        os.replace(temporary, final)
        self.dirty = False
        for old in folder.glob(f"{stem}-*{SUFFIX}"):
            if old != final:
                old.unlink(missing_ok=True)

    @classmethod
    def load(cls, folder: Path, key: tuple[str, str, str], dim: int) -> tuple[Graph, int] | None:
        """The newest saved graph of a scope and its seq, None when there is none usable."""
        from usearch.index import Index

        stem = scope_file(key)
        saved: list[tuple[int, Path]] = []
        for path in folder.glob(f"{stem}-*{SUFFIX}"):
            number = path.name[len(stem) + 1 : -len(SUFFIX)]
            if number.isdigit():
                saved.append((int(number), path))
        for seq, path in sorted(saved, reverse=True):
            try:
                index = Index.restore(str(path))
            except Exception:
                log.warning("ignoring the unreadable vector graph %s", path)
                continue
            if index is None or index.ndim != dim:
                continue
            graph = cls(index)
            graph.dirty = False
            return graph, seq
        return None

    @staticmethod
    def drop(folder: Path, key: tuple[str, str, str] | None = None) -> None:
        """Remove the saved graphs of one scope, or (None) of every scope."""
        pattern = f"{scope_file(key)}-*{SUFFIX}" if key else f"*{SUFFIX}"
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)
