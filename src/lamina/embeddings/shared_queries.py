"""Query vectors shared by the processes of ``lamina serve --workers N``.

Each process keeps its own LRU of query vectors (``query_cache``); a query that reaches
another process would be embedded there again (measured: with 2 processes, twice as many
model runs for the same queries). This table, in memory that every process of one server
maps (made by the supervising process, given to each process it starts), holds the
vectors of recent queries for all of them.

Bounded: a fixed arena, ``slot = 32 + 4 x dimensions`` bytes each, four to a bucket, the
least recently used of a bucket replaced. Keyed by a hash of the tenant, the embedder (its
model and dimensions) and the query: a tenant never reads another's entry, and no query
text is kept (in memory only, gone when the server stops, like the per-process LRU). One
lock for every process, only ever tried (never waited for): a process that died holding it
leaves the others with their own LRUs, never blocked.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from lamina.embeddings.base import Vector

#: The arena's size: 8 MiB, ~5,300 vectors of 384 dimensions.
ARENA_BYTES = 8 << 20
_WAYS = 4
_HEADER = 8  # the use counter (uint64)
_KEY = 16
_STAMP_AT = 16
_VECTOR_AT = 32


def make_arena(context: Any, size: int = ARENA_BYTES) -> tuple[Any, Any]:
    """The shared memory and its lock, from a multiprocessing ``context``: given to each
    process at its start (``Process(args=...)``)."""
    return context.RawArray("B", size), context.Lock()


class SharedQueryVectors:
    """The table over one arena, for an embedder of ``dimensions`` named ``embedder``
    (every process of a server has the same, so they agree on the layout)."""

    def __init__(self, arena: Any, lock: Any, embedder: str, dimensions: int) -> None:
        self._lock = lock
        self._embedder = embedder.encode()
        self._dimensions = dimensions
        raw = np.frombuffer(arena, dtype=np.uint8)
        slot = -(-(_VECTOR_AT + 4 * dimensions) // 8) * 8
        self._buckets = max((len(raw) - _HEADER) // (slot * _WAYS), 1)
        slots = self._buckets * _WAYS
        self._counter = raw[:_HEADER].view(np.uint64)
        records = raw[_HEADER : _HEADER + slots * slot].reshape(slots, slot)
        self._keys = records[:, :_KEY]
        self._stamps = records[:, _STAMP_AT:_VECTOR_AT].view(np.uint64)[:, 0]
        self._vectors = records[:, _VECTOR_AT : _VECTOR_AT + 4 * dimensions].view(np.float32)

    def _key(self, tenant_id: str, query: str) -> bytes:
        digest = hashlib.blake2b(digest_size=_KEY)
        for part in (tenant_id.encode(), self._embedder, query.encode("utf-8", "surrogatepass")):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        return digest.digest()

    def _ways(self, key: bytes) -> range:
        first = int.from_bytes(key[:8], "little") % self._buckets * _WAYS
        return range(first, first + _WAYS)

    def _find(self, key: bytes) -> int | None:
        """The slot holding ``key`` (under the lock)."""
        wanted = np.frombuffer(key, dtype=np.uint8)
        for way in self._ways(key):
            if self._stamps[way] and np.array_equal(self._keys[way], wanted):
                return way
        return None

    def get(self, tenant_id: str, query: str) -> Vector | None:
        """A copy of the query's vector, or None (not held, or the lock is taken)."""
        key = self._key(tenant_id, query)
        if not self._lock.acquire(False):
            return None
        try:
            way = self._find(key)
            if way is not None:
                self._counter[0] += 1
                self._stamps[way] = self._counter[0]
                out: Vector = self._vectors[way].copy()
                return out
            return None
        finally:
            self._lock.release()

    def put(self, tenant_id: str, query: str, vector: Vector) -> None:
        """Hold the query's vector (in place of the bucket's least recently used); nothing
        when the lock is taken or the vector is not of the table's dimensions."""
        vector = np.asarray(vector, dtype=np.float32)
        if vector.shape != (self._dimensions,):
            return
        key = self._key(tenant_id, query)
        if not self._lock.acquire(False):
            return
        try:
            way = self._find(key)
            if way is None:
                way = min(self._ways(key), key=lambda w: int(self._stamps[w]))
            self._counter[0] += 1
            self._stamps[way] = 0  # invalid while it is written
            self._keys[way] = np.frombuffer(key, dtype=np.uint8)
            self._vectors[way] = vector
            self._stamps[way] = self._counter[0]
        finally:
            self._lock.release()
