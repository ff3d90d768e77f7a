"""An in-process vector index, partitioned by (tenant, layer, scope key).

A search only ever looks inside one scope, so each scope is searched alone: by a scan of its
compact codes (scan.py), or, once it holds ``GRAPH_FROM`` vectors, through an HNSW graph of
them (graph.py). Either way the index keeps the one in-memory copy of each vector (compact.py:
int8 codes, a scale and the length of the rounding error, 392 bytes at 384 dimensions), and
the finalists of a search are ranked exactly from the float32 vectors of the SQLite file
(ranking.py). Vectors are unit length: the dot product is the cosine similarity.

A scope that crosses the threshold keeps being scanned while its graph is built (``start``,
a background job), and the writes made meanwhile are journaled for the graph (``_Build``).
A build stopped by a closing process leaves a partial graph to save (``partial_saves``),
which the next start extends (``resume``) instead of building from nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from lamina.embeddings.base import Vector
from lamina.store.sqlite import graph as hnsw
from lamina.store.sqlite.compact import Int8s, quantize
from lamina.store.sqlite.graph import Graph
from lamina.store.sqlite.graph_codes import Stripped
from lamina.store.sqlite.graph_files import Save
from lamina.store.sqlite.ranking import Exact, Ranking, most_read, ranked
from lamina.store.sqlite.scan import Partition

log = logging.getLogger(__name__)

PartitionKey = tuple[str, str, str]
#: Runs a graph build job (a background thread, say); see ``VectorIndex``.
Start = Callable[[Callable[[], None]], None]

#: A build applies the writes made meanwhile until fewer than this are left for the swap.
_REPLAY = 64
#: How far below a minimum score a graph's cosine of codes may be and its exact one not.
GRAPH_SLACK = 0.05
#: A stopped build's graph is saved when it added at least this share of the vectors it
#: holds (a write of the whole graph for each step would cost more than it saves).
PARTIAL_SHARE = 0.05


class _Build:
    """A graph being built from a snapshot of a scope's codes, and what changed since."""

    __slots__ = (
        "applied", "cancelled", "failed", "graph", "journal", "partial", "seq", "start", "stopped"
    )  # fmt: skip

    def __init__(self, seq: int, graph: Graph) -> None:
        #: The writes to the scope since the snapshot, in order: (pk, codes), None: removed.
        self.journal: list[tuple[int, Int8s | None]] = []
        #: How many of them the graph has (the job applies most before the swap).
        self.applied = 0
        self.cancelled = False
        self.failed = False
        #: The graph, once built and caught up with all but the last few writes.
        self.graph: Graph | None = None
        #: The owner's log position of the snapshot, and the graph the job extends from it
        #: (a resumed partial graph, or a new one) and its size then.
        self.seq = seq
        self.partial = graph
        self.start = len(graph)
        #: The job has returned: nothing touches ``partial`` any more.
        self.stopped = False

    def worth_saving(self, stored: npt.NDArray[np.int64]) -> bool:
        """Cancelled and stopped, it added enough to its graph to save it as a partial one,
        and every vector of that graph is still ``stored`` in the scope (a deleted memory's
        bytes must not reach the disk)."""
        size = len(self.partial)
        return (
            self.cancelled
            and self.stopped
            and not self.failed
            and not self.partial.forgot
            and size - self.start >= max(hnsw.BUILD_CHUNK, PARTIAL_SHARE * size)
            and bool(np.isin(self.partial.keys(), stored).all())
        )


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
        position: Callable[[], int] = lambda: 0,
    ) -> None:
        """``position``: the owner's log position, which a build's snapshot is as of."""
        self.dim = dim
        self._exact = exact
        self._use_graphs = graphs
        self._start = start
        self._built = built
        self._parts: dict[PartitionKey, Partition] = {}
        self._where: dict[int, tuple[PartitionKey, int]] = {}
        #: Scopes searched through a graph; their pks are in the graph, not in ``_where``.
        self._graphs: dict[PartitionKey, Graph] = {}
        #: Scopes whose graph is being built (still searched through their codes).
        self._building: dict[PartitionKey, _Build] = {}
        self._position = position
        #: Partial graphs saved by an earlier process, for the builds of their scopes to
        #: extend, with the pks changed since they were saved (``resume``).
        self._resumed: dict[PartitionKey, tuple[Graph, frozenset[int]]] = {}
        #: Builds cancelled whose partial graphs may be saved (``partial_saves``).
        self._stopped: list[tuple[PartitionKey, _Build]] = []
        #: While loading, large scopes wait for ``finish_load`` to become graphs at once.
        self.loading = False
        #: pks of restored graphs that the load found stored (``adopt``).
        self._seen: dict[PartitionKey, list[int]] = {}
        #: While loading, restored graphs waiting for their codes (graph_codes.py).
        self._stripped: dict[PartitionKey, Stripped] = {}
        #: A restored graph could not be read back: the load must start again without.
        self.restore_failed = False
        #: A scope became a graph since the graphs were last saved.
        self.graphs_built = False

    def __len__(self) -> int:
        return len(self._where) + sum(len(g) for g in self._graphs.values())

    def clear(self) -> None:
        self.cancel_builds(keep=False)
        self._resumed.clear()
        self._parts.clear()
        self._where.clear()
        self._graphs.clear()
        self._seen.clear()
        self._stripped.clear()
        self.restore_failed = False

    def reserve(self, key: PartitionKey, capacity: int) -> None:
        """Make room for ``capacity`` vectors in one scope (a bulk load sizes it exactly)."""
        if key in self._graphs or key in self._stripped:
            return
        part = self._parts.get(key)
        if part is None:
            self._parts[key] = Partition(self.dim, capacity)
        elif len(part.pks) < capacity:
            part.resize(capacity)

    def _graph_of(self, pk: int) -> PartitionKey | None:
        for key, graph in self._graphs.items():
            if pk in graph:
                return key
        return None

    def upsert(self, pk: int, key: PartitionKey, vector: Vector) -> None:
        stripped = self._stripped.get(key)
        if stripped is not None:  # loading: the graph takes it once read back
            self.adopt(pk, key, np.asarray(vector, dtype=np.float32).tobytes())
            return
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
            part = self._parts[key] = Partition(self.dim)
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
        """Build a graph of a scope from a snapshot of its codes (``start``), extending the
        partial graph an earlier process saved (``resume``) if there is one; the scope is
        searched through its codes until ``swap_built`` puts the graph in their place."""
        if key in self._building:
            return
        part = self._parts[key]
        pks = part.pks[: part.size].copy()
        codes = part.int8[: part.size].copy()
        resumed, changed = self._resumed.pop(key, (None, frozenset()))
        build = self._building[key] = _Build(self._position(), resumed or Graph.new(self.dim))
        built: Callable[[], object] | None = self._built
        if self._start is None:
            built = self.swap_built

        def job() -> None:
            graph = build.partial
            try:
                if resumed is not None:
                    _refresh(graph, pks, codes, changed)
                done = graph.extend(pks, codes, lambda: build.cancelled)
                # The writes made meanwhile, outside the owner's lock while they are many.
                while done and len(build.journal) - build.applied > _REPLAY:
                    _replay(graph, build)
            except Exception:
                log.exception("building a vector graph failed; its scope stays a scan")
                build.failed = True
                build.journal.clear()
                return
            finally:
                build.stopped = True
            if done and not build.cancelled:
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

    def cancel_builds(self, keep: bool = True) -> None:
        """Stop the graphs being built: their scopes stay scans (a reload builds again, from
        the partial graph ``partial_saves`` gives, once saved; ``keep``: for that, else
        dropped, as a reload drops them)."""
        for key, build in self._building.items():
            build.cancelled = True
            if keep:
                self._stopped.append((key, build))
        self._building.clear()

    def partial_saves(self) -> list[tuple[int, Save]]:
        """The partial graphs of the builds cancelled since, with the log position each is
        as of, those worth saving (``_Build.worth_saving``) once their jobs have stopped."""
        stopped, self._stopped = self._stopped, []
        out = []
        for key, build in stopped:
            part = self._parts.get(key)
            if part is not None and build.worth_saving(part.pks[: part.size]):
                out.append((build.seq, Save(key, build.partial, build.partial, partial=True)))
        return out

    def resume(self, key: PartitionKey, graph: Graph, changed: frozenset[int]) -> None:
        """A partial graph of a scope saved by an earlier process: the scope's build extends
        it; the vectors of ``changed`` pks (written since it was saved) are put again."""
        self._resumed[key] = (graph, changed)

    def restore(self, key: PartitionKey, graph: Graph | Stripped) -> None:
        """Take a saved graph of a scope; the load then ``adopt``s its stored pks (a graph
        saved without its codes takes them from there: graph_codes.py)."""
        if isinstance(graph, Stripped):
            self._stripped[key] = graph
        else:
            self._graphs[key] = graph
        self._seen[key] = []

    def adopt(self, pk: int, key: PartitionKey, blob: bytes) -> None:
        """During a load: ``pk`` is stored in restored scope ``key`` (unchanged since, but
        for a graph waiting for its codes), ``blob`` its float32 vector."""
        stripped = self._stripped.get(key)
        if stripped is not None:
            stripped.fill(pk, blob)
        self._seen[key].append(pk)

    def finish_load(self) -> None:
        """After a load: restored graphs get their codes (or, unreadable, make the load
        start again: ``restore_failed``) and lose what is no longer stored in their scope,
        and scopes large enough become graphs."""
        for key, stripped in self._stripped.items():
            graph = Graph.restore(stripped.assemble(), self.dim)
            if graph is None:
                self.restore_failed = True
                continue
            self._graphs[key] = graph
            for pk, codes in stripped.puts:
                graph.put(pk, codes)
        self._stripped.clear()
        if self.restore_failed:
            return
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
        self._resumed.clear()  # (those not promoted now: their changed pks are of this load)

    def saves(self) -> list[Save]:
        """What to save of the graphs (graph_files.py): a copy of each changed since saved,
        and the removal of the files of each that lost a vector (never saved again)."""
        self.graphs_built = False
        out: list[Save] = []
        for key, graph in self._graphs.items():
            if graph.forgot:
                out.append(Save(key, graph, None))
            elif graph.dirty:
                out.append(Save(key, graph, graph.snapshot()))
        return out

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
        if part is None:
            return []
        return part.search(query, min_score, limit, self._exact)

    def _graph_search(
        self, graph: Graph, query: Vector, min_score: float | None, limit: int | None
    ) -> Sequence[tuple[int, float]]:
        """A graph's best by the cosine of the codes, ranked exactly: with a limit, the
        ``most_read(limit)`` the graph finds (ranking.py); else every vector by an
        exhaustive scan of the codes (ranked exactly as far as it is read, or those within
        ``GRAPH_SLACK`` of ``min_score``)."""
        if len(graph) == 0:
            return []
        codes = quantize(query[None, :])[0][0]
        if limit is not None and min_score is None:
            count = min(len(graph), most_read(limit))
            pks, _ = graph.search(codes, count)
            return ranked(np.sort(pks), query, self._exact)[:limit]
        pks, approx = graph.search(codes, len(graph), exact=True)
        if min_score is not None:
            near = np.sort(pks[approx >= min_score - GRAPH_SLACK])
            return [(pk, s) for pk, s in ranked(near, query, self._exact) if s >= min_score]
        bound = np.full(len(pks), GRAPH_SLACK, dtype=np.float32)
        return Ranking(pks, approx, bound, self._exact, query)

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


def _replay(graph: Graph, build: _Build) -> None:
    """Apply the writes journaled during a build that the graph does not have yet."""
    stop = len(build.journal)
    for pk, codes in build.journal[build.applied : stop]:
        if codes is None:
            graph.remove(pk)
        else:
            graph.put(pk, codes)
    build.applied = stop


def _refresh(
    graph: Graph, pks: npt.NDArray[np.int64], codes: Int8s, changed: frozenset[int]
) -> None:
    """Bring a resumed partial graph to the snapshot (``pks``, ``codes``): drop what left
    the scope, put again what ``changed`` since it was saved; ``extend`` adds the rest."""
    held = graph.keys()
    for pk in held[~np.isin(held, pks)].tolist():
        graph.remove(pk)
    if changed:
        order = np.argsort(pks)
        stale = held[np.isin(held, np.fromiter(changed, dtype=np.int64)) & np.isin(held, pks)]
        places = order[np.searchsorted(pks, stale, sorter=order)]
        for pk, at in zip(stale.tolist(), places.tolist(), strict=True):
            graph.put(pk, codes[at])


def _at_once(job: Callable[[], None]) -> None:
    job()
