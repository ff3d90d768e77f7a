"""Saving a vector graph writes a copy taken under the index lock after releasing it: searches
and writes go on while a large graph is written; a slow older write never replaces a newer
file, a deletion voids the saves taken before it, and a failed write leaves the previous file
whole. The write is held at a gate (usearch's own ``Index.save``, wrapped): no timing."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from usearch.index import Index

from lamina import Lamina
from lamina.memory.layers import MemoryLayer
from lamina.memory.ports import NewMemory, Scope
from lamina.store.sqlite import graph as hnsw
from lamina.store.sqlite.compact import quantize
from lamina.store.sqlite.graph import Graph
from lamina.store.sqlite.graph_files import GraphFiles, Pending, Save, scope_file
from lamina.store.sqlite.indexes import SyncedIndexes
from tests.conftest import fast_settings
from tests.store.test_vector_graph_builds import Held, memories
from tests.store.test_vector_graphs import vector
from tests.store.test_vector_two_pass import DIM, corpus

KEY = ("default", "user", "u")
WAIT = 60.0


class GatedSave:
    """Wraps usearch's ``Index.save``: a write signals ``writing`` and waits for ``release``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.writing = threading.Event()
        self.release = threading.Event()
        original = Index.save

        def save(index: Index, path: Any = None, progress: Any = None) -> Any:
            self.writing.set()
            assert self.release.wait(WAIT)
            return original(index, path, progress)

        monkeypatch.setattr(Index, "save", save)


def in_thread(fn: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=fn)
    thread.start()
    return thread


def finishes(fn: Callable[[], object]) -> bool:
    """Whether ``fn`` returns within WAIT seconds (on a thread of its own)."""
    thread = in_thread(fn)
    thread.join(WAIT)
    return not thread.is_alive()


@pytest.fixture
def large(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lamina]:
    """A store with one scope of 250 memories, past a graph threshold lowered to 200."""
    monkeypatch.setattr(hnsw, "GRAPH_FROM", 200)
    scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
    with Lamina(fast_settings(data_dir)) as ms:
        ms._run(ms.aio.store.memories.writes.bulk_add(memories(scope, 250)))
        yield ms


def saved(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.usearch"))


def test_searches_and_writes_go_on_while_a_graph_is_written(
    large: Lamina, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = data_dir / "lamina.db-vectors"
    held = Held()
    indexes = SyncedIndexes(large.aio.store._db, DIM, graphs=folder, start=held)
    indexes.sync()  # loads: the scope is large, its build is held
    conn = large.aio.store._db.connection()
    (top,) = conn.execute("SELECT max(seq) FROM index_log").fetchone()
    gate = GatedSave(monkeypatch)
    builder = in_thread(held.run)  # builds, swaps the graph in, then writes it: at the gate
    assert gate.writing.wait(WAIT)
    # The write is under way: a search and a write are served meanwhile.
    assert finishes(lambda: indexes.vector_hits(KEY, vector(42), None, 1))
    ((_, score),) = indexes.vector_hits(KEY, vector(42), None, 1)
    assert score == pytest.approx(1.0, abs=1e-5)
    scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
    extra = NewMemory(str(uuid.uuid4()), "default", scope, "one more", {}, vector(300))
    large._run(large.aio.store.memories.writes.bulk_add([extra]))
    assert finishes(indexes.sync)
    assert indexes.counts_by_layer("default") == {"user": 251}
    assert builder.is_alive() and not saved(folder)  # still writing: no file yet
    gate.release.set()
    builder.join(WAIT)
    assert not builder.is_alive()
    # The copy written is the graph as of the log it had caught up with when it was taken.
    (name,) = saved(folder)
    stem, seq = name.removesuffix(".usearch").rsplit("-", 1)
    assert stem == scope_file(KEY) and int(seq) == top
    written = Graph.read(folder / name, DIM)
    assert written is not None and len(written) == 250
    assert not list(folder.glob(".*.tmp"))
    indexes.close()  # saves the graph that changed since, at the end of the log
    (name,) = saved(folder)
    assert int(name.removesuffix(".usearch").rsplit("-", 1)[1]) > top
    written = Graph.read(folder / name, DIM)
    assert written is not None and len(written) == 251


def test_a_deletion_during_a_write_leaves_no_graph_file(
    large: Lamina, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = data_dir / "lamina.db-vectors"
    held = Held()
    indexes = SyncedIndexes(large.aio.store._db, DIM, graphs=folder, start=held)
    indexes.sync()
    gate = GatedSave(monkeypatch)
    builder = in_thread(held.run)
    assert gate.writing.wait(WAIT)
    # A deletion settles while the graph (which still holds the vector) is being written:
    # it waits for the write, not holding the index lock, and removes what was written.
    dropping = in_thread(indexes.drop_saved)
    assert finishes(lambda: indexes.vector_hits(KEY, vector(1), None, 1))
    gate.release.set()
    for thread in (builder, dropping):
        thread.join(WAIT)
        assert not thread.is_alive()
    assert not saved(folder)
    indexes.close()


def graph_of(count: int, seed: int) -> Graph:
    codes = quantize(corpus(count, seed=seed))[0]
    graph = Graph.build(DIM, np.arange(count, dtype=np.int64), codes)
    assert graph is not None
    return graph


def test_an_older_save_never_replaces_a_newer_one_and_a_deletion_voids_older_saves(
    tmp_path: Path,
) -> None:
    files = GraphFiles(tmp_path / "vectors")
    old, new = graph_of(50, seed=1), graph_of(60, seed=2)
    older = Pending(files.ticket(), 10, [Save(KEY, old, old.snapshot())])
    newer = Pending(files.ticket(), 12, [Save(KEY, new, new.snapshot())])
    files.write(newer)
    files.write(older)  # a slower write of an older snapshot, finishing last
    loaded = files.load(KEY, DIM)
    assert loaded is not None and loaded[1] == 12 and len(loaded[0]) == 60
    assert [p.name for p in files.folder.iterdir()] == [f"{scope_file(KEY)}-12.usearch"]
    # A save taken before a deletion is void, even if written after its files went.
    before = Pending(files.ticket(), 13, [Save(KEY, new, new.snapshot())])
    files.forget()
    files.drop_all()
    files.write(before)
    assert files.load(KEY, DIM) is None
    after = Pending(files.ticket(), 14, [Save(KEY, new, new.snapshot())])
    files.write(after)
    loaded = files.load(KEY, DIM)
    assert loaded is not None and loaded[1] == 14
    # A graph that lost a vector: its files are removed, and no older save comes back.
    new.remove(3)
    files.write(Pending(files.ticket(), 15, [Save(KEY, new, None)]))
    files.write(after)
    assert not list(files.folder.iterdir())


def test_a_partial_graph_replaces_only_partial_ones(tmp_path: Path) -> None:
    """A stopped build's partial graph never removes a whole graph another process saved;
    a whole graph replaces both, and loads before a partial one."""
    files = GraphFiles(tmp_path / "vectors")
    whole, part = graph_of(30, seed=5), graph_of(20, seed=6)
    files.write(Pending(files.ticket(), 7, [Save(KEY, part, part, partial=True)]))
    files.write(Pending(files.ticket(), 9, [Save(KEY, whole, whole.snapshot())]))
    assert len(list(files.folder.iterdir())) == 1  # the whole one replaced the partial one
    files.write(Pending(files.ticket(), 8, [Save(KEY, part, part, partial=True)]))
    assert len(list(files.folder.iterdir())) == 2
    loaded = files.load(KEY, DIM)
    assert loaded is not None and loaded[1] == 9
    partial = files.load(KEY, DIM, partial=True)
    assert partial is not None and partial[1] == 8 and len(partial[0]) == 20


def test_a_deletion_removes_half_written_graphs_too(tmp_path: Path) -> None:
    files = GraphFiles(tmp_path / "vectors")
    graph = graph_of(30, seed=5)
    files.write(Pending(files.ticket(), 3, [Save(KEY, graph, graph.snapshot())]))
    # What a process killed in the middle of a write leaves behind.
    stray = files.folder / f".{scope_file(KEY)}-4-12345.tmp"
    stray.write_bytes(b"part of a graph with a deleted vector")
    files.forget()
    files.drop_all()
    assert not list(files.folder.iterdir())


def test_a_failed_write_leaves_the_previous_file_whole_and_saves_again_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    files = GraphFiles(tmp_path / "vectors")
    graph = graph_of(40, seed=3)
    files.write(Pending(files.ticket(), 5, [Save(KEY, graph, graph.snapshot())]))
    graph.put(100, quantize(corpus(1, seed=4))[0][0])

    def full_disk(copy: Graph, path: Path, whole: bool = False) -> None:
        path.write_bytes(b"half a graph")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Graph, "write", full_disk)
    with caplog.at_level(logging.ERROR):
        files.write(Pending(files.ticket(), 9, [Save(KEY, graph, graph.snapshot())]))
    assert "saving a vector graph failed" in caplog.text
    assert graph.dirty  # saved again at the next save
    assert [p.name for p in files.folder.iterdir()] == [f"{scope_file(KEY)}-5.usearch"]
    loaded = files.load(KEY, DIM)
    assert loaded is not None and loaded[1] == 5 and len(loaded[0]) == 40
