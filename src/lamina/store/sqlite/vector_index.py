"""An in-process vector index, partitioned by (tenant, layer, scope key).

A search only ever looks inside one scope, so each scope's vectors sit in one contiguous
float32 matrix and a query is a single matrix-vector product over that scope alone.
Vectors are unit length: the dot product is the cosine similarity.

A large scope (TWO_PASS_FROM vectors or more) is searched in two passes, because the exact
scan of its float32 matrix is bound by memory bandwidth (100k x 384 floats are 154 MB a
query). Each vector also has a binary code: one bit per dimension, set where the vector is
above the scope's mean vector (48 bytes at 384 dimensions, a 32nd of the floats). The first
pass counts the bits in which each code differs from the query's (Hamming distance,
``np.bitwise_count``) and keeps every vector within the smallest distance that holds at
least ``max(OVERSAMPLE x limit, FIRST_PASS_MIN)`` of them; the second pass scores those
exactly in float32 and keeps the best ``limit``. The result is the exact one unless a true
top-``limit`` vector lies outside that pool (at 100k memories of the benchmark corpus,
none did for 200 queries: docs/operations.md). Smaller scopes, searches without a limit and
searches with a minimum score are exact scans.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from lamina.embeddings.base import Vector

PartitionKey = tuple[str, str, str]
Codes = npt.NDArray[np.uint64]

#: Scopes with at least this many vectors are searched in two passes (module docstring).
TWO_PASS_FROM = 20_000
#: The first pass keeps at least OVERSAMPLE x limit vectors, and at least FIRST_PASS_MIN.
OVERSAMPLE = 20
FIRST_PASS_MIN = 1_000


class _Partition:
    __slots__ = ("center", "codes", "pks", "size", "vectors")

    def __init__(self, dim: int, capacity: int = 8) -> None:
        self.vectors: Vector = np.empty((capacity, dim), dtype=np.float32)
        self.pks: npt.NDArray[np.int64] = np.empty(capacity, dtype=np.int64)
        self.size = 0
        #: Binary codes, one column per slot (words x capacity), made by the first search
        #: that needs them and kept in step from then on; and the vector they are taken
        #: around (the mean vector of the scope when they were made).
        self.codes: Codes | None = None
        self.center: Vector | None = None

    def resize(self, capacity: int) -> None:
        vectors = np.empty((capacity, self.vectors.shape[1]), dtype=np.float32)
        vectors[: self.size] = self.vectors[: self.size]
        pks = np.empty(capacity, dtype=np.int64)
        pks[: self.size] = self.pks[: self.size]
        self.vectors, self.pks = vectors, pks
        if self.codes is not None:
            codes = np.empty((self.codes.shape[0], capacity), dtype=np.uint64)
            codes[:, : self.size] = self.codes[:, : self.size]
            self.codes = codes

    def set(self, slot: int, vector: Vector) -> None:
        self.vectors[slot] = vector
        if self.codes is not None and self.center is not None:
            self.codes[:, slot] = binary_codes(vector[None, :], self.center)[:, 0]

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
            self.vectors[slot] = self.vectors[last]
            self.pks[slot] = self.pks[last]
            if self.codes is not None:
                self.codes[:, slot] = self.codes[:, last]
            moved = int(self.pks[slot])
        self.size -= 1
        return moved

    def coded(self) -> tuple[Codes, Vector]:
        """The binary codes of every slot and their center, made now if need be."""
        if self.codes is None or self.center is None:
            live = self.vectors[: self.size]
            center: Vector = live.mean(axis=0, dtype=np.float32)
            codes = np.empty((_words(live.shape[1]), len(self.pks)), dtype=np.uint64)
            for start in range(0, self.size, 8192):  # bounded temporaries
                chunk = live[start : start + 8192]
                codes[:, start : start + len(chunk)] = binary_codes(chunk, center)
            self.codes, self.center = codes, center
        return self.codes, self.center

    def nearest_slots(self, query: Vector, want: int) -> npt.NDArray[np.intp]:
        """Slots of the first pass, ascending: every vector whose code is within the
        smallest Hamming distance of the query's that holds at least ``want`` of them."""
        codes, center = self.coded()
        mine = binary_codes(query[None, :], center)[:, 0]
        distance = np.bitwise_count(codes[0, : self.size] ^ mine[0]).astype(np.uint16)
        for word in range(1, len(mine)):
            distance += np.bitwise_count(codes[word, : self.size] ^ mine[word])
        within = np.cumsum(np.bincount(distance))
        radius = int(np.searchsorted(within, want))
        slots: npt.NDArray[np.intp] = np.flatnonzero(distance <= radius)
        return slots


def _words(dim: int) -> int:
    return (dim + 63) // 64


def binary_codes(vectors: Vector, center: Vector) -> Codes:
    """One bit per dimension (set: above ``center``), packed in 64-bit words, one column
    per vector (words x n: each word of every code is contiguous)."""
    bits = np.packbits(vectors > center, axis=1)
    padded = np.zeros((len(vectors), _words(vectors.shape[1]) * 8), dtype=np.uint8)
    padded[:, : bits.shape[1]] = bits
    return np.ascontiguousarray(padded.view(np.uint64).T)


class VectorIndex:
    """Not thread-safe by itself: the owning store serialises access."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._parts: dict[PartitionKey, _Partition] = {}
        self._where: dict[int, tuple[PartitionKey, int]] = {}

    def __len__(self) -> int:
        return len(self._where)

    def clear(self) -> None:
        self._parts.clear()
        self._where.clear()

    def reserve(self, key: PartitionKey, capacity: int) -> None:
        """Make room for ``capacity`` vectors in one scope (a bulk load sizes it exactly)."""
        part = self._parts.get(key)
        if part is None:
            self._parts[key] = _Partition(self.dim, capacity)
        elif len(part.pks) < capacity:
            part.resize(capacity)

    def upsert(self, pk: int, key: PartitionKey, vector: Vector) -> None:
        found = self._where.get(pk)
        if found is not None:
            old_key, slot = found
            if old_key == key:
                self._parts[key].set(slot, vector)
                return
            self.remove(pk)
        part = self._parts.get(key)
        if part is None:
            part = self._parts[key] = _Partition(self.dim)
        self._where[pk] = (key, part.append(pk, vector))

    def remove(self, pk: int) -> None:
        found = self._where.pop(pk, None)
        if found is None:
            return
        key, slot = found
        part = self._parts[key]
        moved = part.pop(slot)
        if moved is not None:
            self._where[moved] = (key, slot)
        if part.size == 0:
            del self._parts[key]

    def vector(self, pk: int) -> Vector | None:
        found = self._where.get(pk)
        if found is None:
            return None
        key, slot = found
        row: Vector = self._parts[key].vectors[slot].copy()
        return row

    def search(
        self, key: PartitionKey, query: Vector, min_score: float | None, limit: int | None
    ) -> list[tuple[int, float]]:
        """(pk, cosine) pairs, best first: at most ``limit``, none below ``min_score``."""
        part = self._parts.get(key)
        if part is None or part.size == 0:
            return []
        slots: npt.NDArray[np.intp] | None = None
        if min_score is None and limit is not None and part.size >= TWO_PASS_FROM:
            want = max(limit * OVERSAMPLE, FIRST_PASS_MIN)
            if want * 4 <= part.size:
                slots = part.nearest_slots(query, want)
        # np.vecdot, not the BLAS matrix product: BLAS spreads a product of this size over
        # threads that spin while they wait, which costs several times the product's own
        # CPU (and its wall time) when the cores are busy, as a server's are.
        rows = part.vectors[slots] if slots is not None else part.vectors[: part.size]
        scores = np.vecdot(rows, query)
        if min_score is not None:
            (candidates,) = np.nonzero(scores >= min_score)
        else:
            candidates = np.arange(len(scores))
        if limit is not None and len(candidates) > limit:
            top = np.argpartition(-scores[candidates], limit - 1)[:limit]
            candidates = candidates[top]
        ordered = candidates[np.argsort(-scores[candidates], kind="stable")]
        pks = part.pks[ordered if slots is None else slots[ordered]]
        return [(int(pk), float(s)) for pk, s in zip(pks, scores[ordered], strict=True)]

    def counts_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for (tenant, layer, _), part in self._parts.items():
            if tenant_id is None or tenant == tenant_id:
                counts[layer] += part.size
        return dict(counts)
