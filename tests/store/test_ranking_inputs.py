"""What search's shared ranking reads from candidate rows (lamina.store.sql.memory_reads):
computed in bulk, it must be what one row at a time gave."""

from __future__ import annotations

import sqlite3

import numpy as np

from lamina.embeddings.base import Vector
from lamina.memory.bm25 import KeywordScores
from lamina.memory.scoring import keyword_part
from lamina.store.sql.memory_reads import cosines
from lamina.store.sqlite.db import SQLITE, dumps


def test_cosines_in_one_product_have_the_bits_of_one_row_at_a_time() -> None:
    rng = np.random.default_rng(7)
    query = rng.normal(size=384).astype(np.float32)
    query /= np.linalg.norm(query)
    vectors: list[Vector | None] = []
    for i in range(300):
        v = rng.normal(size=384).astype(np.float32)
        vectors.append(None if i % 17 == 0 else (v / np.linalg.norm(v)).astype(np.float32))
    vectors.append(np.ones(12, dtype=np.float32))  # another model's size: left alone
    got = cosines(query, vectors)
    want = [None if v is None or len(v) != len(query) else float(v @ query) for v in vectors]
    assert got == want
    assert cosines(None, vectors) == [None] * len(vectors)


def test_keyword_parts_of_many_are_those_of_each() -> None:
    scores = KeywordScores(np.array([2, 5, 9], dtype=np.int64), np.array([0.5, 1.25, 3.0]), 2.0)
    keys = [9, 1, 5, 10, 2]
    assert scores.parts(keys) == {k: keyword_part(scores.get(k), 2.0) for k in keys}
    assert scores.parts(keys) == {9: 1.5, 1: 0.0, 5: 0.625, 10: 0.0, 2: 0.25}
    empty = KeywordScores(np.empty(0, dtype=np.int64), np.empty(0), 0.0)
    assert empty.parts([1, 2]) == {1: 0.0, 2: 0.0} and scores.parts([]) == {}


def test_speaker_and_conversation_are_read_only_when_they_are_strings() -> None:
    """The SQL the embedded store ranks with (PostgreSQL's twin runs in the conformance and
    parity suites): a string gives itself, anything else NULL."""
    conn = sqlite3.connect(":memory:")
    speaker = SQLITE.json_string("m", "conversation", "speaker")
    cases = [
        ({"conversation": {"speaker": "Ada", "id": "c1"}}, "Ada"),
        ({"conversation": {"speaker": 3}}, None),
        ({"conversation": {"speaker": None}}, None),
        ({"conversation": {"speaker": ["Ada"]}}, None),
        ({"conversation": "Ada"}, None),
        ({"speaker": "Ada"}, None),
        ({"conversation": {"speaker": 'Zoë "the" \\ one'}}, 'Zoë "the" \\ one'),
    ]
    for metadata, want in cases:
        got = conn.execute(f"SELECT {speaker} FROM (SELECT ? AS m)", (dumps(metadata),))
        assert got.fetchone()[0] == want, metadata
