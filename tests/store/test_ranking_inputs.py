"""What search's shared ranking reads from candidate rows (lamina.store.sql.memory_reads):
computed in bulk, it must be what one row at a time gave."""

from __future__ import annotations

import json

import numpy as np

from lamina.embeddings.base import Vector
from lamina.memory.bm25 import KeywordScores
from lamina.store.sql.memory_reads import _cosines, _ranking_metadata


def test_cosines_in_one_product_have_the_bits_of_one_row_at_a_time() -> None:
    rng = np.random.default_rng(7)
    query = rng.normal(size=384).astype(np.float32)
    query /= np.linalg.norm(query)
    vectors: list[Vector | None] = []
    for i in range(300):
        v = rng.normal(size=384).astype(np.float32)
        vectors.append(None if i % 17 == 0 else (v / np.linalg.norm(v)).astype(np.float32))
    vectors.append(np.ones(12, dtype=np.float32))  # another model's size: left alone
    got: list[float | None] = [None] * len(vectors)
    _cosines(query, vectors, got)
    want = [None if v is None or len(v) != len(query) else float(v @ query) for v in vectors]
    assert got == want


def test_ranking_reads_the_conversation_key_whatever_else_the_metadata_holds() -> None:
    message = {"conversation": {"id": "c1", "speaker": "Ada"}, "x": [1, 2]}
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    assert _ranking_metadata(json.loads, text) == message
    plain = json.dumps({"i": 3, "note": "no talk here"})
    assert _ranking_metadata(json.loads, plain).get("conversation") is None
    assert _ranking_metadata(lambda v: v, message) is message  # PostgreSQL: parsed already


def test_keyword_scores_of_many_are_those_of_each() -> None:
    scores = KeywordScores(np.array([2, 5, 9], dtype=np.int64), np.array([0.5, 1.25, 3.0]), 2.0)
    keys = [9, 1, 5, 10, 2, 5]
    assert (
        scores.get_many(keys) == [scores.get(k) for k in keys] == [3.0, 0.0, 1.25, 0.0, 0.5, 1.25]
    )
    empty = KeywordScores(np.empty(0, dtype=np.int64), np.empty(0), 0.0)
    assert empty.get_many([1, 2]) == [0.0, 0.0] and scores.get_many([]) == []
