"""A vector graph is saved without the int8 codes the SQLite file holds (graph_codes.py): a
load fills them back from the stored vectors and hands usearch the very bytes it saved;
vectors changed since the save are put again, and a file that cannot be read back is
rebuilt, never half-used."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from lamina import Lamina
from lamina.memory.layers import MemoryLayer
from lamina.memory.ports import Scope
from lamina.store.sqlite import graph as hnsw
from lamina.store.sqlite.compact import quantize
from lamina.store.sqlite.graph import Graph
from lamina.store.sqlite.graph_codes import Stripped
from lamina.store.sqlite.indexes import SyncedIndexes
from lamina.store.sqlite.vector_index import VectorIndex
from tests.conftest import fast_settings
from tests.store.test_vector_graph_builds import memories
from tests.store.test_vector_graphs import vector
from tests.store.test_vector_two_pass import DIM, Stored, corpus, queries

KEY = ("t", "user", "big")


def saved_graph(tmp_path: Path, vectors: np.ndarray) -> tuple[Graph, Path]:
    """A graph of ``vectors`` (pk = position + 1), two of them with the same codes, one
    replaced in place after the build; written to a file."""
    vectors = vectors.copy()
    vectors[11] = vectors[10]
    graph = Graph.build(DIM, np.arange(1, len(vectors) + 1, dtype=np.int64), quantize(vectors)[0])
    assert graph is not None
    graph.put(3, quantize(vectors[2:3])[0][0])  # pk 3 is vectors[2] already: same codes
    path = tmp_path / "graph.usearch"
    graph.write(path)
    return graph, path


def test_a_graph_is_saved_without_its_codes_and_read_back_as_usearch_saved_it(
    tmp_path: Path,
) -> None:
    vectors = corpus(600, seed=5)
    graph, path = saved_graph(tmp_path, vectors)
    whole = graph._index.save()
    assert path.stat().st_size < 0.45 * len(whole)  # the codes were most of it
    stripped = Graph.read(path, DIM)
    assert isinstance(stripped, Stripped) and len(stripped) == 600
    vectors[11] = vectors[10]
    for pk in np.random.default_rng(1).permutation(600).tolist():  # any order
        stripped.fill(pk + 1, vectors[pk].tobytes())
    restored = Graph.restore(stripped.assemble(), DIM)
    assert restored is not None and stripped.puts == []
    assert restored._index.save() == whole
    for query in queries(vectors, 5, seed=2):
        codes = quantize(query[None, :])[0][0]
        assert restored.search(codes, 10)[0].tolist() == graph.search(codes, 10)[0].tolist()


def test_vectors_changed_since_the_save_are_put_again_and_gone_ones_removed(
    tmp_path: Path,
) -> None:
    vectors = corpus(700, seed=6)
    _, path = saved_graph(tmp_path, vectors[:600])
    stripped = Graph.read(path, DIM)
    assert isinstance(stripped, Stripped)
    now = {pk + 1: vectors[pk] for pk in range(600) if pk != 20}  # pk 21 is gone
    now[11] = vectors[650]  # pk 11 changed since the save
    now[12] = vectors[10]  # pk 12 had pk 11's codes, which it keeps
    now[700] = vectors[699]  # a new one
    index = VectorIndex(DIM, Stored(now.items()), graphs=True)
    index.loading = True
    index.restore(KEY, stripped)
    for pk, v in now.items():
        if pk in (11, 700):
            index.upsert(pk, KEY, v)  # the log says they changed
        else:
            index.adopt(pk, KEY, v.tobytes())
    index.finish_load()
    assert not index.restore_failed and len(index) == len(now) == 600
    assert 21 not in index and 700 in index
    for pk in (11, 12, 700, 1):
        ((found, score),) = index.search(KEY, now[pk], None, 1)
        assert found == pk and score == pytest.approx(1.0, abs=1e-5)


def test_a_graph_usearch_saved_whole_still_loads(tmp_path: Path) -> None:
    codes = quantize(corpus(300, seed=7))[0]
    graph = Graph.build(DIM, np.arange(300, dtype=np.int64), codes)
    assert graph is not None
    graph._index.save(str(tmp_path / "old.usearch"))  # as lamina saved graphs before
    loaded = Graph.read(tmp_path / "old.usearch", DIM)
    assert isinstance(loaded, Graph) and len(loaded) == 300


def test_a_saved_graph_that_cannot_be_read_back_is_built_again(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(hnsw, "GRAPH_FROM", 200)
    scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
    key = ("default", "user", "u")
    folder = data_dir / "lamina.db-vectors"
    with Lamina(fast_settings(data_dir)) as ms:
        ms._run(ms.aio.store.memories.writes.bulk_add(memories(scope, 250)))
        db = ms.aio.store._db
        first = SyncedIndexes(db, 384, graphs=folder)
        first.sync()  # builds the graph (in the background), and saves it
        assert first.wait_for_builds(60)
        (path,) = folder.glob("*.usearch")
        assert path.read_bytes().startswith(b"lamina-graph-1")
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 4000])  # usearch's part cut short
        caplog.set_level(logging.WARNING)
        again = SyncedIndexes(db, 384, graphs=folder)
        again.sync()
        assert again.wait_for_builds(60)
        again.sync()
        assert "unreadable vector graph read back" in caplog.text
        assert "could not be read back" in caplog.text
        assert again.counts_by_layer("default") == {"user": 250}
        for i in (0, 42, 249):
            ((pk, score),) = again.vector_hits(key, vector(i), None, 1)
            (content,) = (
                db.connection()
                .execute("SELECT content FROM memories WHERE pk = ?", (pk,))
                .fetchone()
            )
            assert content == f"memory {i}" and score == pytest.approx(1.0, abs=1e-5)
        assert key in again._vectors._graphs  # built again
