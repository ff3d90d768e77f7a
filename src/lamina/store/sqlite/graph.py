"""HNSW graphs (usearch) for the largest scopes of the embedded store, kept beside its file.

A scope of ``GRAPH_FROM`` memories or more is searched through a graph instead of a scan
(docs/vector-index.md says why usearch, and how it compares). The graph holds the scope's
int8 codes (compact.py) and is then their one in-memory copy; a search asks it for the best
``count`` by the cosine of the codes, and the caller ranks those exactly from the float32
vectors of the SQLite file.

The graphs are saved beside the SQLite file and caught up from its index log on start
(graph_files.py). A build runs in the background while the scope is still searched through
its codes (vector_index.py), in chunks, so that a closing store can cancel it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from lamina.store.sqlite.graph_codes import Stripped, strip

if TYPE_CHECKING:
    from lamina.store.sqlite.compact import Floats, Int8s

log = logging.getLogger(__name__)

#: Scopes with at least this many vectors are searched through a graph (module docstring).
GRAPH_FROM = 100_000
#: HNSW parameters: edges per node, candidates kept while inserting and while searching (a
#: search keeps at least 1,024: at 300,000 vectors, 256 kept missed one query's neighbours
#: nine times in ten, recall@10 0.985; 1,024 gave 0.994 for 1.5 ms more a search).
CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = 1024
#: A build adds this many vectors between two looks at whether it was cancelled.
BUILD_CHUNK = 1024
#: Threads a build inserts with: one. usearch's concurrent inserts (2.26) leave some nodes
#: stored yet unreachable by any search (unum-cloud/USearch#735, fix pending upstream in
#: #772): built on two threads, about one vector in 1,500 of random 384-dimension vectors was
#: never found, not even by a query equal to it. One thread builds the same graph for the
#: same vectors each time, at the same CPU (the build runs in the background at nice 10).
BUILD_THREADS = 1

Cancelled = Callable[[], bool]


def _never() -> bool:
    return False


def _usearch() -> Any:
    """usearch's index module, imported after onnxruntime (the local embedder's runtime):
    importing onnxruntime once usearch's compiled module is loaded crashes the process
    (SIGSEGV in libstdc++, onnxruntime 1.31 and usearch 2.26: ``python -c "import
    usearch.index; import onnxruntime"``), and a store may load a saved graph before its
    first query loads the model."""
    from lamina.embeddings.local import load_runtime

    load_runtime()
    import usearch.index

    return usearch.index


class Graph:
    """One scope's HNSW graph over int8 codes, keyed by the rows' pks."""

    def __init__(self, index: Any) -> None:
        self._index = index
        #: A vector left the graph since it was built: it may still hold its bytes.
        self.forgot = False
        #: Changed since it was last saved (or loaded).
        self.dirty = True

    @classmethod
    def new(cls, dim: int) -> Graph:
        """An empty graph of ``dim``-dimensional codes."""
        index = _usearch().Index(
            ndim=dim,
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        return cls(index)

    @classmethod
    def build(
        cls, dim: int, pks: npt.NDArray[np.int64], codes: Int8s, cancelled: Cancelled = _never
    ) -> Graph | None:
        """A graph of ``codes`` keyed by ``pks``; None when ``cancelled()`` turns true."""
        graph = cls.new(dim)
        return graph if graph.extend(pks, codes, cancelled) else None

    def extend(
        self, pks: npt.NDArray[np.int64], codes: Int8s, cancelled: Cancelled = _never
    ) -> bool:
        """Add the ``pks`` (and their ``codes``) the graph does not hold yet, ``BUILD_CHUNK``
        at a time; False when ``cancelled()`` turned true between two chunks (the graph then
        holds the chunks added so far: a partial graph, which a later build extends)."""
        missing = ~np.isin(pks, self.keys())
        keys, codes = pks[missing].astype(np.uint64), codes[missing]
        for start in range(0, len(keys), BUILD_CHUNK):
            if cancelled():
                return False
            stop = start + BUILD_CHUNK
            self._index.add(keys[start:stop], codes[start:stop], threads=BUILD_THREADS)
            self.dirty = True
        return True

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

    def snapshot(self) -> Graph:
        """A copy to save while this graph goes on changing (graph_files.py); this one
        counts as saved from now on."""
        self.dirty = False
        copy = Graph(self._index.copy())
        copy.forgot = self.forgot
        return copy

    def _codes(self, pks: npt.NDArray[np.int64]) -> Int8s:
        found: Int8s = np.vstack(self._index.get(pks.astype(np.uint64)))
        return found

    def write(self, path: Path, whole: bool = False) -> None:
        """Save the graph without the codes the SQLite file holds (graph_codes.py), or as
        usearch saves it (``whole``, or when its bytes are not laid out as expected)."""
        saved = self._index.save()
        parts = None if whole else strip(saved, self.keys(), self._codes)
        with path.open("wb") as f:
            for part in parts if parts is not None else [saved]:
                f.write(part)

    @classmethod
    def read(cls, path: Path, dim: int) -> Graph | Stripped | None:
        """The graph saved at ``path``: one waiting for its codes (graph_codes.py), or one
        usearch saved whole; None when it is unreadable or of another size."""
        try:
            stripped = Stripped.read(path, dim)
        except Exception:
            log.warning("ignoring the unreadable vector graph %s", path)
            return None
        return stripped if stripped is not None else cls.restore(str(path), dim)

    @classmethod
    def restore(cls, source: str | bytearray, dim: int) -> Graph | None:
        """The graph usearch saved (a file's path, or its bytes); None when it is
        unreadable or of another size."""
        try:
            index = _usearch().Index.restore(source)
        except Exception:
            where = source if isinstance(source, str) else "read back"
            log.warning("ignoring the unreadable vector graph %s", where)
            return None
        if index is None or index.ndim != dim:
            return None
        graph = cls(index)
        graph.dirty = False
        return graph
