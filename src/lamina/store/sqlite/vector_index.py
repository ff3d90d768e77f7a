"""An in-process vector index, partitioned by (tenant, layer, scope key).

A search only ever looks inside one scope, so each scope's vectors sit in contiguous arrays
and a query is scored over that scope alone. Vectors are unit length: the dot product is the
cosine similarity.

The index keeps the one in-memory copy of each vector, compact (compact.py: int8 codes, a
scale and the length of the rounding error, 392 bytes at 384 dimensions). A search scores
the codes, then reads the float32 vectors of the few that may belong to the exact result
(``exact``, the stored vectors of the SQLite file) and ranks those exactly: with a limit, the
result is the exact scan's. Only when more than ``max(FINALISTS x limit, FINALISTS_MIN)``
might belong does it keep the best of them by code (likely exact, no longer certain).

A large scope (TWO_PASS_FROM vectors or more) is searched in two passes, because even the
int8 scan grows with the scope. Each vector also has a binary code: one bit per dimension,
set where the vector is above the scope's mean vector (48 bytes at 384 dimensions). The
first pass counts the bits in which each code differs from the query's (Hamming distance,
``np.bitwise_count``) and keeps every vector within the smallest distance that holds at
least ``max(OVERSAMPLE x limit, FIRST_PASS_MIN)`` of them; the second pass scores those as
above. The result is the exact one unless a true top-``limit`` vector lies outside that
pool (at 100k memories of the benchmark corpus, none did for 200 queries:
docs/operations.md). Smaller scopes, searches without a limit and searches with a minimum
score score every code. Without a limit, the first ``UNLIMITED_EXACT`` are ranked exactly and
the rest follow in the order of their codes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import overload

import numpy as np
import numpy.typing as npt

from lamina.embeddings.base import Vector
from lamina.store.sqlite import graph as hnsw
from lamina.store.sqlite.compact import (
    Codes,
    Int8s,
    Slots,
    approximate,
    binary_codes,
    dequantize,
    finalists,
    hamming_within,
    quantize,
    slack,
    words,
)
from lamina.store.sqlite.graph import Graph

log = logging.getLogger(__name__)

PartitionKey = tuple[str, str, str]
Pks = npt.NDArray[np.int64]
#: The float32 vectors stored for ``pks`` (len(pks) x dim), a row of NaN for one that is no
#: longer stored (deleted or rewritten since the index last caught up).
Exact = Callable[[Pks], Vector]
#: Runs a graph build job (a background thread, say); see ``VectorIndex``.
Start = Callable[[Callable[[], None]], None]

#: Scopes with at least this many vectors are searched in two passes (module docstring).
TWO_PASS_FROM = 20_000
#: The first pass keeps at least OVERSAMPLE x limit vectors, and at least FIRST_PASS_MIN.
OVERSAMPLE = 20
FIRST_PASS_MIN = 1_000
#: At most max(FINALISTS x limit, FINALISTS_MIN) vectors are read and scored exactly.
FINALISTS = 4
FINALISTS_MIN = 256
#: A search without a limit ranks this many exactly (module docstring).
UNLIMITED_EXACT = 200
#: A build applies the writes made meanwhile until fewer than this are left for the swap.
_REPLAY = 64
#: How far below a minimum score a graph's cosine of codes may be and its exact one not.
GRAPH_SLACK = 0.05


class _Partition:
    __slots__ = ("center", "codes", "errors", "int8", "pks", "scales", "size")

    def __init__(self, dim: int, capacity: int = 8) -> None:
        self.int8 = np.empty((capacity, dim), dtype=np.int8)
        self.scales = np.empty(capacity, dtype=np.float32)
        self.errors = np.empty(capacity, dtype=np.float32)
        self.pks: Pks = np.empty(capacity, dtype=np.int64)
        self.size = 0
        #: Binary codes, one column per slot (words x capacity), made by the first search
        #: that needs them and kept in step from then on; and the vector they are taken
        #: around (the mean vector of the scope when they were made).
        self.codes: Codes | None = None
        self.center: Vector | None = None

    def resize(self, capacity: int) -> None:
        n = self.size
        for name in ("int8", "scales", "errors", "pks"):
            old = getattr(self, name)
            new = np.empty((capacity, *old.shape[1:]), dtype=old.dtype)
            new[:n] = old[:n]
            setattr(self, name, new)
        if self.codes is not None:
            codes = np.empty((self.codes.shape[0], capacity), dtype=np.uint64)
            codes[:, :n] = self.codes[:, :n]
            self.codes = codes

    def set(self, slot: int, vector: Vector) -> None:
        int8, scales, errors = quantize(vector[None, :])
        self.int8[slot], self.scales[slot], self.errors[slot] = int8[0], scales[0], errors[0]
        if self.codes is not None and self.center is not None:
            self.codes[:, slot] = binary_codes(dequantize(int8, scales), self.center)[:, 0]

    def append(self, pk: int, vector: Vector) -> int:
        if self.size == len(self.pks):
            self.resize(max(8, self.size + self.size // 2))
        slot = self.size
        self.set(slot, vector)
        self.pks[slot] = pk
        self.size += 1
        return slot

    def pop(self, slot: int) -> int | None:
        """Remove ``slot`` by moving the last row into it; returns the moved pk, if any."""
        last = self.size - 1
        moved: int | None = None
        if slot != last:
            for array in (self.int8, self.scales, self.errors, self.pks):
                array[slot] = array[last]
            if self.codes is not None:
                self.codes[:, slot] = self.codes[:, last]
            moved = int(self.pks[slot])
        self.size -= 1
        return moved

    def live(self, start: int = 0, stop: int | None = None) -> Vector:
        """The vectors of slots ``start:stop`` as their codes give them (float32)."""
        stop = self.size if stop is None else min(stop, self.size)
        return dequantize(self.int8[start:stop], self.scales[start:stop])

    def coded(self) -> tuple[Codes, Vector]:
        """The binary codes of every slot and their center, made now if need be."""
        if self.codes is None or self.center is None:
            total = np.zeros(self.int8.shape[1], dtype=np.float64)
            for start in range(0, self.size, 8192):  # bounded temporaries
                total += self.live(start, start + 8192).sum(axis=0)
            center: Vector = (total / max(self.size, 1)).astype(np.float32)
            codes = np.empty((words(self.int8.shape[1]), len(self.pks)), dtype=np.uint64)
            for start in range(0, self.size, 8192):
                chunk = self.live(start, start + 8192)
                codes[:, start : start + len(chunk)] = binary_codes(chunk, center)
            self.codes, self.center = codes, center
        return self.codes, self.center

    def nearest_slots(self, query: Vector, want: int) -> Slots:
        """Slots of the first pass, ascending: every vector whose code is within the
        smallest Hamming distance of the query's that holds at least ``want`` of them."""
        codes, center = self.coded()
        return hamming_within(codes, self.size, query, center, want)


class _Build:
    """A graph being built from a snapshot of a scope's codes, and what changed since."""

    __slots__ = ("applied", "cancelled", "failed", "graph", "journal")

    def __init__(self) -> None:
        #: The writes to the scope since the snapshot, in order: (pk, codes), None: removed.
        self.journal: list[tuple[int, Int8s | None]] = []
        #: How many of them the graph has (the job applies most before the swap).
        self.applied = 0
        self.cancelled = False
        self.failed = False
        self.graph: Graph | None = None


class VectorIndex:
    """Not thread-safe by itself: the owning store serialises access. ``exact`` reads the
    float32 vectors of the few a search ranks exactly (module docstring). With ``graphs``,
    scopes of ``GRAPH_FROM`` vectors or more move to an HNSW graph (graph.py).

    ``start`` runs a graph's build (a job that touches nothing of the index until it
    calls ``built``); None builds at once, inside the call that crossed the threshold.
    ``built`` is called by a job started elsewhere when its graph is ready: it must take
    the owner's lock and call ``swap_built``. Until then the scope is searched through
    its codes, and its writes are journaled for the graph (``swap_built``)."""

    def __init__(
        self,
        dim: int,
        exact: Exact,
        *,
        graphs: bool = False,
        start: Start | None = None,
        built: Callable[[], None] | None = None,
    ) -> None:
        self.dim = dim
        self._exact = exact
        self._use_graphs = graphs
        self._start = start
        self._built = built
        self._parts: dict[PartitionKey, _Partition] = {}
        self._where: dict[int, tuple[PartitionKey, int]] = {}
        #: Scopes searched through a graph; their pks are in the graph, not in ``_where``.
        self._graphs: dict[PartitionKey, Graph] = {}
        #: Scopes whose graph is being built (still searched through their codes).
        self._building: dict[PartitionKey, _Build] = {}
        #: While loading, large scopes wait for ``finish_load`` to become graphs at once.
        self.loading = False
        #: pks of restored graphs that the load found stored (``adopt``).
        self._seen: dict[PartitionKey, list[int]] = {}
        #: A scope became a graph since the graphs were last saved.
        self.graphs_built = False

    def __len__(self) -> int:
        return len(self._where) + sum(len(g) for g in self._graphs.values())

    def clear(self) -> None:
        self.cancel_builds()
        self._parts.clear()
        self._where.clear()
        self._graphs.clear()
        self._seen.clear()

    def reserve(self, key: PartitionKey, capacity: int) -> None:
        """Make room for ``capacity`` vectors in one scope (a bulk load sizes it exactly)."""
        if key in self._graphs:
            return
        part = self._parts.get(key)
        if part is None:
            self._parts[key] = _Partition(self.dim, capacity)
        elif len(part.pks) < capacity:
            part.resize(capacity)

    def _graph_of(self, pk: int) -> PartitionKey | None:
        for key, graph in self._graphs.items():
            if pk in graph:
                return key
        return None

    def upsert(self, pk: int, key: PartitionKey, vector: Vector) -> None:
        found = self._where.get(pk)
        if found is not None:
            old_key, slot = found
            if old_key == key:
                self._parts[key].set(slot, vector)
                self._journal(key, pk, slot)
                return
            self.remove(pk)
        elif self._graphs and self._graph_of(pk) not in (None, key):
            self.remove(pk)
        graph = self._graphs.get(key)
        if graph is not None:
            self._seen.get(key, []).append(pk)
            graph.put(pk, quantize(vector[None, :])[0][0])
            return
        part = self._parts.get(key)
        if part is None:
            part = self._parts[key] = _Partition(self.dim)
        slot = part.append(pk, vector)
        self._where[pk] = (key, slot)
        self._journal(key, pk, slot)
        if self._use_graphs and not self.loading and part.size >= hnsw.GRAPH_FROM:
            self._promote(key)

    def remove(self, pk: int) -> None:
        found = self._where.pop(pk, None)
        if found is None:
            owner = self._graph_of(pk) if self._graphs else None
            if owner is not None:
                self._graphs[owner].remove(pk)
            return
        key, slot = found
        building = self._building.get(key)
        if building is not None and not building.failed:
            building.journal.append((pk, None))
        part = self._parts[key]
        moved = part.pop(slot)
        if moved is not None:
            self._where[moved] = (key, slot)
        if part.size == 0:
            del self._parts[key]

    def __contains__(self, pk: int) -> bool:
        return pk in self._where or (bool(self._graphs) and self._graph_of(pk) is not None)

    # -- graphs (graph.py) ------------------------------------------------------------------

    def _journal(self, key: PartitionKey, pk: int, slot: int) -> None:
        building = self._building.get(key)
        if building is not None and not building.failed:
            building.journal.append((pk, self._parts[key].int8[slot].copy()))

    def _promote(self, key: PartitionKey) -> None:
        """Build a graph of a scope from a snapshot of its codes (``start``); the scope is
        searched through its codes until ``swap_built`` puts the graph in their place."""
        if key in self._building:
            return
        part = self._parts[key]
        pks = part.pks[: part.size].copy()
        codes = part.int8[: part.size].copy()
        build = self._building[key] = _Build()
        built: Callable[[], object] | None = self._built
        if self._start is None:
            built = self.swap_built

        def job() -> None:
            try:
                graph = Graph.build(self.dim, pks, codes, lambda: build.cancelled)
                # The writes made meanwhile, outside the owner's lock while they are many.
                while graph is not None and len(build.journal) - build.applied > _REPLAY:
                    _replay(graph, build)
            except Exception:
                log.exception("building a vector graph failed; its scope stays a scan")
                build.failed = True
                build.journal.clear()
                return
            if graph is not None and not build.cancelled:
                build.graph = graph
                if built is not None:
                    built()

        (self._start or _at_once)(job)

    def swap_built(self) -> bool:
        """Put each graph built since in place of its scope's codes, once it has the
        writes journaled during its build; True if any did."""
        swapped = False
        for key, build in list(self._building.items()):
            graph = build.graph
            if graph is None:
                continue
            del self._building[key]
            part = self._parts.get(key)
            if part is None:  # emptied meanwhile
                continue
            _replay(graph, build)
            self._graphs[key] = graph
            del self._parts[key]
            for pk in part.pks[: part.size].tolist():
                del self._where[pk]
            self.graphs_built = swapped = True
        return swapped

    def cancel_builds(self) -> None:
        """Forget the graphs being built: their scopes stay scans (a reload builds again)."""
        for build in self._building.values():
            build.cancelled = True
        self._building.clear()

    def restore(self, key: PartitionKey, graph: Graph) -> None:
        """Take a saved graph of a scope; the load then ``adopt``s its stored pks."""
        self._graphs[key] = graph
        self._seen[key] = []

    def adopt(self, pk: int, key: PartitionKey) -> None:
        """During a load: ``pk`` is stored in restored scope ``key``, unchanged since."""
        self._seen[key].append(pk)

    def finish_load(self) -> None:
        """After a load: restored graphs lose what is no longer stored in their scope, and
        scopes large enough become graphs."""
        for key, seen in self._seen.items():
            graph = self._graphs[key]
            keys = graph.keys()
            for pk in keys[~np.isin(keys, np.array(seen, dtype=np.int64))].tolist():
                graph.remove(pk)
        self._seen.clear()
        self.loading = False
        if self._use_graphs:
            for key in [k for k, p in self._parts.items() if p.size >= hnsw.GRAPH_FROM]:
                self._promote(key)

    def save_graphs(self, folder: Path, seq: int) -> None:
        """Save the graphs changed since saved, as of log ``seq``; a graph that lost a
        vector is never saved (its files are removed instead: graph.py)."""
        self.graphs_built = False
        for key, graph in self._graphs.items():
            if graph.forgot:
                Graph.drop(folder, key)
            elif graph.dirty:
                graph.save(folder, key, seq)

    # -- search -----------------------------------------------------------------------------

    def search(
        self, key: PartitionKey, query: Vector, min_score: float | None, limit: int | None
    ) -> Sequence[tuple[int, float]]:
        """(pk, cosine) pairs, best first: at most ``limit``, none below ``min_score``.
        Without either, a ``Ranking``: exact as far as it is read."""
        query = np.asarray(query, dtype=np.float32)
        graph = self._graphs.get(key)
        if graph is not None:
            return self._graph_search(graph, query, min_score, limit)
        part = self._parts.get(key)
        if part is None or part.size == 0:
            return []
        slots: Slots | None = None
        if min_score is None and limit is not None and part.size >= TWO_PASS_FROM:
            want = max(limit * OVERSAMPLE, FIRST_PASS_MIN)
            if want * 4 <= part.size:
                slots = part.nearest_slots(query, want)
        if slots is None:
            slots = np.arange(part.size)
            approx, off = approximate(part.int8[: part.size], part.scales[: part.size], query)
        else:
            approx, off = approximate(part.int8[slots], part.scales[slots], query)
        bound = slack(part.errors[slots], query, off)
        if min_score is not None:
            chosen: Slots = np.flatnonzero(approx + bound >= min_score)
        elif limit is None:
            return Ranking(part.pks[slots], approx, bound, self._exact, query)
        else:
            k = min(len(slots), limit)
            chosen = finalists(approx, bound, k, max(FINALISTS * k, FINALISTS_MIN))
        ranked = self._ranked(part.pks[np.sort(slots[chosen])], query)
        if min_score is not None:
            return [(pk, s) for pk, s in ranked if s >= min_score]
        return ranked[:limit]

    def _graph_search(
        self, graph: Graph, query: Vector, min_score: float | None, limit: int | None
    ) -> Sequence[tuple[int, float]]:
        """A graph's best by the cosine of the codes, ranked exactly: with a limit, the
        ``max(FINALISTS x limit, FINALISTS_MIN)`` the graph finds; else every vector by an
        exhaustive scan of the codes (ranked exactly as far as it is read, or those within
        ``GRAPH_SLACK`` of ``min_score``)."""
        if len(graph) == 0:
            return []
        codes = quantize(query[None, :])[0][0]
        if limit is not None and min_score is None:
            count = min(len(graph), max(FINALISTS * limit, FINALISTS_MIN))
            pks, _ = graph.search(codes, count)
            return self._ranked(np.sort(pks), query)[:limit]
        pks, approx = graph.search(codes, len(graph), exact=True)
        if min_score is not None:
            near = np.sort(pks[approx >= min_score - GRAPH_SLACK])
            return [(pk, s) for pk, s in self._ranked(near, query) if s >= min_score]
        bound = np.full(len(pks), GRAPH_SLACK, dtype=np.float32)
        return Ranking(pks, approx, bound, self._exact, query)

    def _ranked(self, pks: Pks, query: Vector) -> list[tuple[int, float]]:
        """(pk, exact cosine) of ``pks`` still stored, best first (ties: in the given order)."""
        if len(pks) == 0:
            return []
        scores = np.vecdot(self._exact(pks), query)
        stored = ~np.isnan(scores)
        pks, scores = pks[stored], scores[stored]
        order = np.argsort(-scores, kind="stable")
        return _pairs(pks[order], scores[order])

    def counts_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        counts: Counter[str] = Counter()
        sizes: Iterable[tuple[PartitionKey, int]] = [
            *((k, p.size) for k, p in self._parts.items()),
            *((k, len(g)) for k, g in self._graphs.items()),
        ]
        for (tenant, layer, _), size in sizes:
            if tenant_id is None or tenant == tenant_id:
                counts[layer] += size
        return dict(counts)


class Ranking(Sequence[tuple[int, float]]):
    """Every vector of a scope, best first, ranked exactly as far as it is read: reading
    the first ``m`` ranks exactly every vector whose upper bound reaches the ``m``-th best
    lower bound (reading on doubles ``m``). A search with a metadata filter reads it until
    enough pass. It holds copies of the scope's pks and approximate cosines, not the index:
    it stays valid while the index changes. A vector no longer stored is left out (the
    length counts it until the ranking reaches it)."""

    def __init__(
        self, pks: Pks, approx: npt.NDArray[np.float32], bound: npt.NDArray[np.float32],
        exact: Exact, query: Vector,
    ) -> None:  # fmt: skip
        self._pks, self._approx, self._bound = pks, approx, bound
        self._exact, self._query = exact, query
        self._done: list[tuple[int, float]] = []
        self._reached = 0

    def __len__(self) -> int:
        return len(self._pks)

    def _reach(self, m: int) -> None:
        if m <= self._reached:
            return
        m = min(max(m, 2 * self._reached, UNLIMITED_EXACT), len(self._pks))
        chosen = finalists(self._approx, self._bound, m, len(self._pks))
        order = np.sort(chosen)  # ties: in scope order
        scores = np.vecdot(self._exact(self._pks[order]), self._query)
        stored = ~np.isnan(scores)
        pks, scores = self._pks[order][stored], scores[stored]
        best = np.argsort(-scores, kind="stable")
        self._done = _pairs(pks[best], scores[best])[:m]
        self._reached = m

    @overload
    def __getitem__(self, i: int) -> tuple[int, float]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, float]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, float] | list[tuple[int, float]]:
        if isinstance(i, slice):
            stop = len(self._pks) if i.stop is None else i.stop
            self._reach(stop if stop >= 0 else len(self._pks))
            return self._done[i]
        self._reach(i + 1 if i >= 0 else len(self._pks))
        return self._done[i]

    def pks(self) -> Sequence[int]:
        """The pks alone, as lazily."""
        return _Pks(self)


class _Pks(Sequence[int]):
    def __init__(self, ranking: Ranking) -> None:
        self._ranking = ranking

    def __len__(self) -> int:
        return len(self._ranking)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [pk for pk, _ in self._ranking[i]]
        return self._ranking[i][0]


def _replay(graph: Graph, build: _Build) -> None:
    """Apply the writes journaled during a build that the graph does not have yet."""
    stop = len(build.journal)
    for pk, codes in build.journal[build.applied : stop]:
        if codes is None:
            graph.remove(pk)
        else:
            graph.put(pk, codes)
    build.applied = stop


def _at_once(job: Callable[[], None]) -> None:
    job()


def _pairs(pks: Pks, scores: npt.NDArray[np.float32]) -> list[tuple[int, float]]:
    return [(int(pk), float(s)) for pk, s in zip(pks, scores, strict=True)]
