"""The in-process indexes: exact vectors per scope and BM25 per scope."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lamina.store.sqlite import lexical_index
from lamina.store.sqlite.lexical_index import LexicalIndex
from lamina.store.sqlite.vector_index import VectorIndex
from lamina.text import analyze, decode_terms, encode_terms

A = ("t", "user", "alice")
B = ("t", "user", "bob")


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_vector_index_partitions_swap_remove_and_moves() -> None:
    stored = {pk: unit(1.0, pk / 10) for pk in range(20)} | {100: unit(1.0, 0.0)}

    def exact(pks: np.ndarray) -> np.ndarray:  # the store's float32 vectors (the file's)
        return np.array([stored.get(pk, [np.nan, np.nan]) for pk in pks.tolist()], np.float32)

    index = VectorIndex(2, exact)
    for pk in range(20):
        index.upsert(pk, A, stored[pk])
    index.upsert(100, B, stored[100])
    assert [pk for pk, _ in index.search(A, unit(1.0, 0.0), None, 3)] == [0, 1, 2]
    index.remove(0)
    index.remove(0)  # absent: no error
    assert [pk for pk, _ in index.search(A, unit(1.0, 0.0), None, 2)] == [1, 2]
    stored[1] = unit(0.0, 1.0)
    index.upsert(1, B, stored[1])  # moved to another scope
    assert 1 not in [pk for pk, _ in index.search(A, unit(1.0, 0.0), None, None)]
    assert len(index) == 20 and index.counts_by_layer("t") == {"user": 20}
    high = index.search(A, unit(1.0, 0.0), 0.99, None)
    assert all(score >= 0.99 for _, score in high)
    assert index.search(("t", "user", "nobody"), unit(1.0, 0.0), None, 5) == []
    assert 100 in index and 0 not in index
    # A vector gone from the store since the index caught up is left out (as its row would be).
    del stored[2]
    assert [pk for pk, _ in index.search(A, unit(1.0, 0.0), None, 2)] == [3]


def test_bm25_scores_match_the_formula() -> None:
    index = LexicalIndex()
    docs = {1: "dark mode editor", 2: "dark dark theme", 3: "light theme"}
    for pk, text in docs.items():
        index.upsert(pk, A, dict(analyze(text)))
    hits = dict(index.search(A, ["dark"], None))
    n, df, avg = 3, 2, 8 / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

    def bm25(tf: float, length: float) -> float:  # k1 0.9, b 0.4 (lamina.memory.scoring)
        return idf * tf * 1.9 / (tf + 0.9 * (0.6 + 0.4 * length / avg))

    assert math.isclose(hits[2], bm25(2, 3), rel_tol=1e-5)
    assert math.isclose(hits[1], bm25(1, 3), rel_tol=1e-5)
    assert list(dict(index.search(A, ["dark"], 1))) == [2]
    # The keyword part's denominator: every query term's IDF, absent terms included.
    scores = index.scores(A, ["dark", "absent"])
    unseen = math.log(1 + (n - 1 + 0.5) / 1.5)  # as if one document held it
    assert math.isclose(scores.idf_sum, idf + unseen, rel_tol=1e-9)
    assert scores.get(2) == hits[2] and scores.get(99) == 0.0


def test_lexical_updates_deletes_and_compaction() -> None:
    index = LexicalIndex()
    index.upsert(1, A, {"alpha": 1})
    index.upsert(2, B, {"alpha": 1})
    assert [pk for pk, _ in index.search(A, ["alpha"], None)] == [1]
    index.upsert(1, A, {"beta": 2})  # rewritten: the old posting is stale
    assert index.search(A, ["alpha"], None) == []
    assert [pk for pk, _ in index.search(A, ["beta"], None)] == [1]
    index.remove(1)
    assert index.search(A, ["beta"], None) == []
    index.upsert(5000, A, {"beta": 1})  # grows the per-document arrays
    index.compact()
    assert [pk for pk, _ in index.search(A, ["beta"], None)] == [5000]
    assert [pk for pk, _ in index.search(B, ["alpha"], None)] == [2]


def test_removed_documents_terms_are_compacted_away() -> None:
    # Each removal follows its document's upsert: once more postings are stale than live
    # (past the threshold), the terms only removed documents held leave memory.
    index = LexicalIndex()
    for pk in range(60_001):
        index.upsert(pk, A, {f"secret{pk}": 1})
    for pk in range(60_001):
        index.remove(pk)
    index.upsert(70_000, A, {"kept": 1})
    assert index.term_count == 1
    assert index.search(A, ["secret5"], None) == []
    assert [pk for pk, _ in index.search(A, ["kept"], None)] == [70_000]


def test_term_encoding_round_trips() -> None:
    counts = analyze("The editors' editor edits: C'est la vie! 東京 2024 rock'n'roll")
    assert decode_terms(encode_terms(counts)) == dict(counts)
    assert "the" not in counts and counts["editor"] == 2


def test_postgres_keyword_levels_go_from_all_words_to_any() -> None:
    from lamina.store.postgres.filters import MAX_KEYWORD_TERMS, keyword_levels

    assert keyword_levels(["a", "b", "c"]) == [
        "(a & b & c)",
        "(a & b) | (a & c) | (b & c)",
        "(a) | (b) | (c)",
    ]
    assert keyword_levels(["a", "a"]) == ["(a)"]
    many = keyword_levels([f"w{i}" for i in range(10)])
    assert len(many) == MAX_KEYWORD_TERMS and many[-1].count("|") == MAX_KEYWORD_TERMS - 1


def test_lexical_postings_merged_or_recent_score_as_a_fresh_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Writes, rewrites, moves and removals, searched between merges (recent postings),
    after them and after a compaction: the same hits and scores as an index built afresh
    from the documents left."""
    monkeypatch.setattr(lexical_index, "MERGE_MIN", 50)
    rng = np.random.default_rng(7)
    vocabulary = [f"w{i}" for i in range(60)]
    keys = [A, B]
    docs: dict[int, tuple[tuple[str, str, str], dict[str, float]]] = {}
    index = LexicalIndex()

    def check() -> None:
        fresh = LexicalIndex()
        for pk in sorted(docs):
            fresh.upsert(pk, *docs[pk])
        for _ in range(5):
            query = [str(t) for t in rng.choice(vocabulary, 3)]
            for key in keys:
                got, want = index.search(key, query, None), fresh.search(key, query, None)
                assert [pk for pk, _ in got] == [pk for pk, _ in want]
                for (_, a), (_, b) in zip(got, want, strict=True):
                    assert math.isclose(a, b, rel_tol=1e-6)

    for step in range(600):
        pk = int(rng.integers(0, 200))
        if rng.random() < 0.2:
            index.remove(pk)
            docs.pop(pk, None)
        else:
            terms = {str(t): float(rng.integers(1, 3)) for t in rng.choice(vocabulary, 4)}
            docs[pk] = (keys[int(rng.integers(0, 2))], terms)
            index.upsert(pk, *docs[pk])
        if step % 37 == 0:
            check()
    index.merge()
    check()
    index.compact()
    check()
    index.upsert(7, A, {"brand-new": 1.0})  # a term first seen after the compaction
    docs[7] = (A, {"brand-new": 1.0})
    assert [pk for pk, _ in index.search(A, ["brand-new"], None)] == [7]
    check()
