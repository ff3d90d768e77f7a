"""A scope that crosses the graph threshold is searched through its int8 codes while its
graph is built in the background: no search waits for a build, the writes made during it
reach the graph, and closing during a build does not hang; it saves what the build made as
a partial graph only when that is worth it and holds no deleted memory, and the next start
extends it.

Builds are held by a ``start`` that keeps the job until the test runs it: no timing."""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina import Lamina
from lamina.memory.layers import MemoryLayer
from lamina.memory.ports import NewMemory, Scope
from lamina.store.sqlite import graph as hnsw
from lamina.store.sqlite.indexes import BUILD_NICE, SyncedIndexes
from lamina.store.sqlite.vector_index import VectorIndex
from tests.conftest import fast_settings
from tests.store.test_vector_graphs import vector
from tests.store.test_vector_two_pass import DIM, Stored, assert_exact, corpus, queries

KEY = ("t", "user", "big")
Job = Callable[[], None]


class Held:
    """A ``start`` that keeps each build job until ``run``."""

    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def __call__(self, job: Job) -> None:
        self.jobs.append(job)

    def run(self) -> None:
        jobs, self.jobs = self.jobs, []
        for job in jobs:
            job()


def test_searches_scan_the_codes_while_the_graph_builds_and_its_writes_reach_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hnsw, "GRAPH_FROM", 1_500)
    vectors = corpus(2_000, seed=11)
    stored = Stored((pk, vectors[pk]) for pk in range(1_600))
    held = Held()
    swaps: list[bool] = []
    index = VectorIndex(
        DIM, stored, graphs=True, start=held, built=lambda: swaps.append(index.swap_built())
    )
    for pk in range(1_600):
        index.upsert(pk, KEY, vectors[pk])
    assert len(held.jobs) == 1  # crossed the threshold once: one build, held
    # The search does not wait: it scans the scope's codes, and its result is exact.
    for query in queries(vectors, 10, seed=5):
        assert_exact(list(index.search(KEY, query, None, 10)), stored, query, 10)
    # Writes during the build: new vectors, an update, a move out, a removal.
    for pk in range(1_600, 2_000):
        stored[pk] = vectors[pk]
        index.upsert(pk, KEY, vectors[pk])
    assert len(held.jobs) == 1  # no second build of a scope already building
    stored[5] = vectors[7]
    index.upsert(5, KEY, vectors[7])
    index.upsert(6, ("t", "user", "small"), vectors[6])
    index.remove(8)
    del stored[8]
    assert {pk for pk, _ in index.search(KEY, vectors[7], None, 2)} == {5, 7}
    held.run()
    assert swaps == [True]
    assert KEY not in index._parts and KEY not in index._building  # the graph took over
    graph = index._graphs[KEY]
    assert len(graph) == 1_998 and 8 not in graph and 6 not in graph and 1_999 in graph
    assert graph.forgot  # it lost a vector: never saved (graph.py)
    assert len(index) == 1_999 and index.counts_by_layer("t") == {"user": 1_999}
    assert {pk for pk, _ in index.search(KEY, vectors[7], None, 2)} == {5, 7}
    for pk in (0, 1_650, 1_999):
        assert index.search(KEY, vectors[pk], None, 1)[0][0] == pk
    assert 6 not in {pk for pk, _ in index.search(KEY, vectors[6], None, 5)}


def test_a_cancelled_build_is_dropped_and_the_scope_stays_a_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hnsw, "GRAPH_FROM", 100)
    vectors = corpus(150, seed=2)
    stored = Stored(enumerate(vectors))
    held = Held()
    index = VectorIndex(DIM, stored, graphs=True, start=held, built=lambda: None)
    for pk, v in enumerate(vectors):
        index.upsert(pk, KEY, v)
    index.cancel_builds()
    held.run()
    assert KEY in index._parts and not index._graphs
    assert_exact(list(index.search(KEY, vectors[3], None, 5)), stored, vectors[3], 5)


def memories(scope: Scope, count: int) -> list[NewMemory]:
    return [
        NewMemory(str(uuid.uuid4()), "default", scope, f"memory {i}", {}, vector(i))
        for i in range(count)
    ]


def test_closing_during_a_build_saves_no_graph_and_the_next_start_builds_it(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hnsw, "GRAPH_FROM", 200)
    scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
    folder = data_dir / "lamina.db-vectors"
    key = ("default", "user", "u")
    with Lamina(fast_settings(data_dir)) as ms:
        db = ms.aio.store._db
        ms._run(ms.aio.store.memories.writes.bulk_add(memories(scope, 250)))
        # Another index over the same file, whose build waits at a gate on its own thread.
        gate = threading.Event()
        threads: list[threading.Thread] = []

        def gated(job: Job) -> None:
            def run() -> None:
                gate.wait()
                job()

            threads.append(threading.Thread(target=run))
            threads[-1].start()

        indexes = SyncedIndexes(db, DIM, graphs=folder, start=gated)
        indexes.sync()  # loads: the scope is large, its build starts and waits
        assert len(threads) == 1
        ((_, score),) = indexes.vector_hits(key, vector(42), None, 1)  # not waiting
        assert score == pytest.approx(1.0, abs=1e-5)
        indexes.close()  # cancels the build: returns at once
        gate.set()
        threads[0].join(30)
        assert not threads[0].is_alive()
        assert not list(folder.glob("*.usearch"))  # no graph saved, half built or not
        assert indexes.counts_by_layer("default") == {"user": 250}
    # The next start builds it (in the background) and saves it once swapped in.
    with Lamina(fast_settings(data_dir)) as ms:
        ms.memory.search("memory", user_id="u")
        store_indexes = ms.aio.store._indexes
        assert store_indexes.wait_for_builds(60)
        assert len(list(folder.glob("*.usearch"))) == 1
        ((_, score),) = store_indexes.vector_hits(key, vector(42), None, 1)
        assert score == pytest.approx(1.0, abs=1e-5)
        assert key in ms.aio.store._indexes._vectors._graphs


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority: Linux")
def test_a_background_build_runs_at_a_lower_priority_than_searches(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hnsw, "GRAPH_FROM", 200)
    seen: list[int] = []
    extend = hnsw.Graph.extend

    def noting(graph: hnsw.Graph, *args: Any, **kwargs: Any) -> bool:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return extend(graph, *args, **kwargs)

    monkeypatch.setattr(hnsw.Graph, "extend", noting)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
    with Lamina(fast_settings(data_dir)) as ms:
        ms._run(ms.aio.store.memories.writes.bulk_add(memories(scope, 250)))
        ms.memory.search("memory", user_id="u")  # loads: the scope is large, a build starts
        assert ms.aio.store._indexes.wait_for_builds(60)
        assert ("default", "user", "u") in ms.aio.store._indexes._vectors._graphs
    assert seen == [max(mine, BUILD_NICE)]
    # The process and this thread keep their priority: only the build's thread yields.
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine


BIG = ("default", "user", "u")


@pytest.fixture
def big_scope(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, Path, list[NewMemory]]]:
    """An open store whose scope ``BIG`` holds 3,000 memories (a graph from 200, built 16
    at a time), the folder of its graphs, and the memories in the order stored."""
    monkeypatch.setattr(hnsw, "GRAPH_FROM", 200)
    monkeypatch.setattr(hnsw, "BUILD_CHUNK", 16)
    with Lamina(fast_settings(data_dir)) as ms:
        scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
        stored = memories(scope, 3_000)
        ms._run(ms.aio.store.memories.writes.bulk_add(stored))
        yield ms, data_dir / "lamina.db-vectors", stored


def _building(indexes: SyncedIndexes, at_least: int) -> Any:
    """The build of ``BIG``, once it holds ``at_least`` vectors (or after 60 s)."""
    build = indexes._vectors._building[BIG]
    deadline = time.monotonic() + 60
    while len(build.partial) < at_least and time.monotonic() < deadline:
        time.sleep(0.001)
    return build


def test_a_build_stopped_by_closing_is_saved_partial_and_the_next_start_extends_it(
    big_scope: tuple[Any, Path, list[NewMemory]],
) -> None:
    ms, folder, _ = big_scope
    key = BIG
    db = ms.aio.store._db
    first = SyncedIndexes(db, DIM, graphs=folder)
    first.sync()  # loads: the scope is large, its build starts in the background
    build = _building(first, 400)
    first.close()  # waits for the build to stop (between two chunks)
    held = len(build.partial)
    assert 400 <= held < 3_000
    (saved,) = folder.glob("*.usearch")
    assert saved.name.endswith("-partial.usearch")
    # Written since: one vector changed, which the resumed graph must not keep stale.
    with db.write_transaction() as conn:
        pk = conn.execute("SELECT min(pk) FROM memories").fetchone()[0]
        conn.execute(
            "UPDATE memories SET embedding = ? WHERE pk = ?", (vector(10_001).tobytes(), pk)
        )
    gated = Held()
    second = SyncedIndexes(db, DIM, graphs=folder, start=gated)
    second.sync()
    assert second._vectors._building[key].start == held  # extends, not from nothing
    gated.run()
    assert key in second._vectors._graphs and second.counts_by_layer("default") == {"user": 3_000}
    ((found, score),) = second.vector_hits(key, vector(10_001), None, 1)
    assert (found, score) == (pk, pytest.approx(1.0, abs=1e-5))
    ((_, score),) = second.vector_hits(key, vector(2_999), None, 1)
    assert score == pytest.approx(1.0, abs=1e-5)
    second.close()
    (saved,) = folder.glob("*.usearch")  # the whole graph, in the partial one's place
    assert not saved.name.endswith("-partial.usearch")


def test_a_stopped_build_holding_a_deleted_memory_is_not_saved(
    big_scope: tuple[Any, Path, list[NewMemory]],
) -> None:
    ms, folder, stored = big_scope
    indexes = SyncedIndexes(ms.aio.store._db, DIM, graphs=folder)
    indexes.sync()
    _building(indexes, 400)
    ms.memory.delete(stored[0].id)  # its vector is in the graph being built
    indexes.close()
    assert not list(folder.glob("*.usearch"))  # a partial graph would hold its bytes
