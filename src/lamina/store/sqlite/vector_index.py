"""An in-process exact vector index, partitioned by (tenant, layer, scope key).

A search only ever looks inside one scope, so each scope's vectors sit in one contiguous
float32 matrix and a query is a single matrix-vector product over that scope alone.
Vectors are unit length: the dot product is the cosine similarity.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt

from lamina.embeddings.base import Vector

PartitionKey = tuple[str, str, str]


class _Partition:
    __slots__ = ("pks", "size", "vectors")

    def __init__(self, dim: int, capacity: int = 8) -> None:
        self.vectors: Vector = np.empty((capacity, dim), dtype=np.float32)
        self.pks: npt.NDArray[np.int64] = np.empty(capacity, dtype=np.int64)
        self.size = 0

    def resize(self, capacity: int) -> None:
        vectors = np.empty((capacity, self.vectors.shape[1]), dtype=np.float32)
        vectors[: self.size] = self.vectors[: self.size]
        pks = np.empty(capacity, dtype=np.int64)
        pks[: self.size] = self.pks[: self.size]
        self.vectors, self.pks = vectors, pks

    def append(self, pk: int, vector: Vector) -> int:
        if self.size == len(self.pks):
            self.resize(max(8, self.size + self.size // 2))
        slot = self.size
        self.vectors[slot] = vector
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
            moved = int(self.pks[slot])
        self.size -= 1
        return moved


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
                self._parts[key].vectors[slot] = vector
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
        scores = part.vectors[: part.size] @ query
        if min_score is not None:
            (candidates,) = np.nonzero(scores >= min_score)
        else:
            candidates = np.arange(part.size)
        if limit is not None and len(candidates) > limit:
            top = np.argpartition(-scores[candidates], limit - 1)[:limit]
            candidates = candidates[top]
        ordered = candidates[np.argsort(-scores[candidates], kind="stable")]
        pks = part.pks[ordered]
        return [(int(pk), float(s)) for pk, s in zip(pks, scores[ordered], strict=True)]

    def counts_by_layer(self, tenant_id: str | None = None) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for (tenant, layer, _), part in self._parts.items():
            if tenant_id is None or tenant == tenant_id:
                counts[layer] += part.size
        return dict(counts)
