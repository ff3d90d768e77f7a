"""Large scopes are searched in two passes (binary codes, then the int8 codes, then exact
float32 rescoring of the finalists): the results must be those of the exact scan, and the
codes must follow every change.

The index keeps no float32 copy: it reads the finalists' vectors from the store, here a dict
(``Stored``), as the embedded store reads them from its SQLite file."""

from __future__ import annotations

import numpy as np
import pytest

from lamina.store.sqlite import ranking, scan
from lamina.store.sqlite.compact import binary_codes
from lamina.store.sqlite.scan import TWO_PASS_FROM
from lamina.store.sqlite.vector_index import VectorIndex

KEY = ("t", "user", "big")
DIM = 384


class Stored(dict[int, np.ndarray]):
    """The float32 vectors "on disk", read by the index for its finalists (counted)."""

    reads = 0

    def __call__(self, pks: np.ndarray) -> np.ndarray:
        self.reads += len(pks)
        out = np.full((len(pks), DIM), np.nan, dtype=np.float32)
        for i, pk in enumerate(pks.tolist()):
            if pk in self:
                out[i] = self[pk]
        return out


def corpus(n: int, seed: int = 3) -> np.ndarray:
    """Unit vectors shaped like sentence embeddings: a shared direction (they are not
    centred), topics, and noise."""
    rng = np.random.default_rng(seed)
    common = rng.standard_normal(DIM).astype(np.float32)
    topics = rng.standard_normal((40, DIM)).astype(np.float32)
    vectors = (
        0.8 * common
        + topics[rng.integers(0, 40, n)]
        + 0.9 * rng.standard_normal((n, DIM)).astype(np.float32)
    )
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def assert_exact(
    found: list[tuple[int, float]], vectors: dict[int, np.ndarray], query: np.ndarray, limit: int
) -> None:
    """``found`` is the exact top ``limit``: the best cosines, best first, each the
    memory's own. (Cosines within float rounding of each other may come in either order.)"""
    # Every cosine in one product (a loop of ``v @ query`` took seconds a search).
    every = np.stack(list(vectors.values())) @ query
    cosines = dict(zip(vectors, every.tolist(), strict=True))
    best = np.sort(every)[::-1][:limit]
    assert len(found) == len(best)
    scores = np.array([score for _, score in found], dtype=np.float64)
    own = np.array([cosines[pk] for pk, _ in found], dtype=np.float64)
    assert np.abs(scores - own).max(initial=0.0) <= 1e-6, (found, own)
    assert np.abs(scores - best).max(initial=0.0) <= 1e-6, (found, best)


def queries(vectors: np.ndarray, count: int, seed: int = 5) -> np.ndarray:
    """Paraphrase-like queries: stored vectors moved by noise, renormalised."""
    rng = np.random.default_rng(seed)
    picked = vectors[rng.integers(0, len(vectors), count)]
    moved = picked + 0.05 * rng.standard_normal(picked.shape).astype(np.float32)
    return (moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32)


def test_a_large_scope_gives_the_exact_results() -> None:
    n = TWO_PASS_FROM + 5_000
    vectors = corpus(n)
    stored = Stored(enumerate(vectors))
    index = VectorIndex(DIM, stored)
    index.reserve(KEY, n)
    for pk, vector in enumerate(vectors):
        index.upsert(pk, KEY, vector)
    for query in queries(vectors, 30):
        for limit in (10, 50, 100):
            stored.reads = 0
            assert_exact(index.search(KEY, query, None, limit), stored, query, limit)
            # Only the finalists' float32 vectors were read.
            assert stored.reads <= ranking.most_read(limit)
    assert index._parts[KEY].codes is not None  # the two-pass search did run


def test_codes_follow_inserts_updates_moves_and_removals() -> None:
    n = TWO_PASS_FROM + 1_000
    vectors = corpus(n + 3_000, seed=11)
    stored = Stored({pk: vectors[pk] for pk in range(n)})
    index = VectorIndex(DIM, stored)
    for pk in range(n):
        index.upsert(pk, KEY, vectors[pk])
    first = queries(vectors[:n], 1)[0]
    assert_exact(index.search(KEY, first, None, 10), stored, first, 10)
    rng = np.random.default_rng(2)

    def pick(among: dict[int, np.ndarray]) -> int:
        """One of the keys, uniformly (``rng.choice`` of the list made an array of it)."""
        keys = list(among)
        return keys[int(rng.integers(0, len(keys)))]

    # After the codes exist: appends (growing the matrix), rewrites, swap-removals and
    # moves to another scope must keep each slot's code that of its vector.
    here = dict(stored)  # the vectors of scope KEY (``stored`` keeps the moved ones too)
    for step, pk in enumerate(range(n, n + 3_000)):
        index.upsert(pk, KEY, vectors[pk])
        stored[pk] = here[pk] = vectors[pk]
        if step % 3 == 0:
            victim = pick(here)
            index.remove(victim)
            del stored[victim], here[victim]
        if step % 5 == 0:
            target = pick(here)
            stored[target] = here[target] = vectors[int(rng.integers(0, len(vectors)))]
            index.upsert(target, KEY, stored[target])
        if step % 7 == 0:
            moved = pick(here)
            index.upsert(moved, ("t", "user", "other"), here.pop(moved))
    part = index._parts[KEY]
    assert part.codes is not None and part.center is not None
    # Each slot's binary code is that of its vector as the int8 codes give it.
    assert np.array_equal(part.codes[:, : part.size], binary_codes(part.live(), part.center))
    assert sorted(int(pk) for pk in part.pks[: part.size]) == sorted(here)
    for query in queries(np.stack(list(here.values())), 20, seed=8):
        assert_exact(index.search(KEY, query, None, 20), here, query, 20)


def test_small_scopes_unlimited_and_thresholded_searches_are_exact_scans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vectors = corpus(3_000, seed=4)
    stored = Stored(enumerate(vectors))
    index = VectorIndex(DIM, stored)
    for pk, vector in enumerate(vectors):
        index.upsert(pk, KEY, vector)
    query = queries(vectors, 1)[0]
    assert_exact(index.search(KEY, query, None, 10), stored, query, 10)
    assert index._parts[KEY].codes is None  # below TWO_PASS_FROM: one exact scan
    monkeypatch.setattr(scan, "TWO_PASS_FROM", 1_000)
    monkeypatch.setattr(scan, "FIRST_PASS_MIN", 200)
    # A limit whose first pass would hold a quarter of the scope or more: exact scan.
    index.search(KEY, query, None, 100)
    assert index._parts[KEY].codes is None
    # A minimum score, or no limit: exact scan, every vector at or above it.
    high = index.search(KEY, query, 0.5, None)
    assert {pk for pk, _ in high} == {pk for pk, v in stored.items() if float(v @ query) >= 0.5}
    unlimited = index.search(KEY, query, None, None)
    assert len(unlimited) == len(vectors)
    assert_exact(unlimited[: ranking.UNLIMITED_EXACT], stored, query, 200)
    # Read on (as a filtered search does), it stays exact, down to the last.
    assert_exact(list(unlimited[:2_500]), stored, query, 2_500)
    assert_exact(list(index.search(KEY, query, None, None)), stored, query, len(vectors))
    assert index._parts[KEY].codes is None
    # Past the (lowered) size, a limited search takes two passes, with the same answer.
    assert_exact(index.search(KEY, query, None, 10), stored, query, 10)
    assert index._parts[KEY].codes is not None
