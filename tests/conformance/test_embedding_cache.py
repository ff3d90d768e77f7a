"""The embedding cache holds no second copy of a stored memory's vector (issue 35): a text a
memory holds is looked up through the memory, storing the memory drops the text's cached row,
and the cache keeps only the texts no memory holds. Every store."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np

from lamina.memory.ports import NewMemory
from lamina.store.sql.embedding_cache import content_hash
from tests.conformance.conftest import Harness
from tests.conformance.test_forgetting import T1, T2, cached_hashes
from tests.conformance.test_store import scope

TEXT = "Ada keeps her sourdough starter in the cellar"


def _embedded(h: Harness, text: str) -> np.ndarray:
    return np.asarray(h.run(h.embedder.embed([text]))[0], dtype=np.float32)


def test_a_stored_memory_s_text_is_not_cached_and_its_vector_is_found(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    vector = h.run(h.store.memories.embeddings.generate_embedding(T1, [TEXT]))[0]
    # Embedded before its memory is written: cached (a retry finds it).
    assert content_hash(TEXT) in cached_hashes(h, tmp_path)
    memory = NewMemory(str(uuid.uuid4()), T1, scope(), TEXT, {}, vector)
    h.run(h.store.memories.writes.add(memory))
    # The memory holds the vector now: the cache has no copy of it.
    assert content_hash(TEXT) not in cached_hashes(h, tmp_path)
    # The text's vector comes from the memory, the same floats, no new cache row.
    again = h.run(
        h.store.memories.embeddings.generate_embedding(T1, [TEXT, "a query no memory holds"])
    )
    assert np.allclose(again[0], vector, atol=1e-6)
    assert np.allclose(again[1], _embedded(h, "a query no memory holds"), atol=1e-5)
    assert cached_hashes(h, tmp_path) == {content_hash("a query no memory holds")}
    # Another tenant's memory is not a source: T2 embeds and caches its own.
    h.run(h.store.memories.embeddings.generate_embedding(T2, [TEXT]))
    assert content_hash(TEXT) in cached_hashes(h, tmp_path)


def test_updates_pending_vectors_and_bulk_adds_leave_no_copy(
    harness: Harness, tmp_path: Path
) -> None:
    h = harness
    texts = [f"Bulk memory number {i} about kayaks" for i in range(5)]
    vectors = h.run(h.store.memories.embeddings.generate_embedding(T1, texts))
    batch = [
        NewMemory(str(uuid.uuid4()), T1, scope(), t, {}, v)
        for t, v in zip(texts, vectors, strict=True)
    ]
    stored = h.run(h.store.memories.writes.bulk_add(batch))
    assert not {content_hash(t) for t in texts} & cached_hashes(h, tmp_path)
    # An update with a new text and vector.
    new_text = "Bulk memory number 0 is about canoes now"
    new_vector = h.run(h.store.memories.embeddings.generate_embedding(T1, [new_text]))[0]
    assert content_hash(new_text) in cached_hashes(h, tmp_path)
    h.run(h.store.memories.writes.update(T1, stored[0].id, content=new_text, embedding=new_vector))
    assert content_hash(new_text) not in cached_hashes(h, tmp_path)
    # A pending memory (no vector yet): its text may be cached until its vector is stored.
    pending_text = "A pending memory about paddles"
    pending = NewMemory(str(uuid.uuid4()), T1, scope(), pending_text, {}, None)
    h.run(h.store.memories.writes.add(pending))
    assert h.run(h.store.memories.embeddings.unembedded(T1, 10)) == [(pending.id, pending_text)]
    vector = h.run(h.store.memories.embeddings.generate_embedding(T1, [pending_text]))[0]
    assert content_hash(pending_text) in cached_hashes(h, tmp_path)
    assert (
        h.run(h.store.memories.embeddings.set_embeddings(T1, [(pending.id, pending_text, vector)]))
        == 1
    )
    assert cached_hashes(h, tmp_path) == set()
    # Found through the memories afterwards.
    found = h.run(h.store.memories.embeddings.generate_embedding(T1, [pending_text, texts[3]]))
    assert np.allclose(found[0], vector, atol=1e-6)
    assert np.allclose(found[1], vectors[3], atol=1e-6)
    assert cached_hashes(h, tmp_path) == set()
