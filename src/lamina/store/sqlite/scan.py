"""A scope of the vector index searched by scanning its compact codes (compact.py).

The scope's int8 codes sit in contiguous arrays, one row a vector. A search scores the codes,
then ranks exactly (ranking.py) the few that may belong to the exact result: with a limit,
the result is the exact scan's. Only when more than ``most_read(limit)`` might belong does
it keep the best of them by code (likely exact, no longer certain).

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

from collections.abc import Sequence

import numpy as np

from lamina.embeddings.base import Vector
from lamina.store.sqlite.compact import (
    Codes,
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
from lamina.store.sqlite.ranking import Exact, Pks, Ranking, most_read, ranked

#: Scopes with at least this many vectors are searched in two passes (module docstring).
TWO_PASS_FROM = 20_000
#: The first pass keeps at least OVERSAMPLE x limit vectors, and at least FIRST_PASS_MIN.
OVERSAMPLE = 20
FIRST_PASS_MIN = 1_000


class Partition:
    """One scope's codes, by slot; ``pks[slot]`` is the row a slot holds."""

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

    def search(
        self, query: Vector, min_score: float | None, limit: int | None, exact: Exact
    ) -> Sequence[tuple[int, float]]:
        """(pk, cosine) pairs, best first: at most ``limit``, none below ``min_score``;
        without either, a ``Ranking`` (module docstring)."""
        if self.size == 0:
            return []
        slots: Slots | None = None
        if min_score is None and limit is not None and self.size >= TWO_PASS_FROM:
            want = max(limit * OVERSAMPLE, FIRST_PASS_MIN)
            if want * 4 <= self.size:
                slots = self.nearest_slots(query, want)
        if slots is None:
            slots = np.arange(self.size)
            approx, off = approximate(self.int8[: self.size], self.scales[: self.size], query)
        else:
            approx, off = approximate(self.int8[slots], self.scales[slots], query)
        bound = slack(self.errors[slots], query, off)
        if min_score is not None:
            chosen: Slots = np.flatnonzero(approx + bound >= min_score)
        elif limit is None:
            return Ranking(self.pks[slots], approx, bound, exact, query)
        else:
            k = min(len(slots), limit)
            chosen = finalists(approx, bound, k, most_read(k))
        found = ranked(self.pks[np.sort(slots[chosen])], query, exact)
        if min_score is not None:
            return [(pk, s) for pk, s in found if s >= min_score]
        return found[:limit]
