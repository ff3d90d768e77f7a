"""The embedding cache and pending embeddings of memories in SQL, for both backends: vectors
by content hash per model, the memories still waiting for a vector, and dropping the cached
vectors of texts no memory holds any more.

The cache holds no second copy of a stored memory's vector: a text a memory holds (with a
vector of the store's model) is looked up through that memory (the ``memories_content_prefix``
index, then compared whole), and storing a memory's vector drops the cached row of its text
(``drop_held``). What the cache keeps is texts no memory holds: texts embedded before their
memory is written, contexts items' texts, pending texts."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from lamina.embeddings.base import Vector
from lamina.store.sql.dialect import CHUNK, Dialect
from lamina.store.sql.memory_rows import MemoryRows
from lamina.store.sql.program import Program, count, every, many, rows

#: The indexed expression finding the memories holding a text (migrations 0008 / 0010).
_PREFIX = "substr(content, 1, 64)"


def content_hash(text: str) -> str:
    """The embedding cache's key of a text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """generate_embedding, unembedded and set_embeddings, and the cache's upkeep (a part
    the embeddings repository, writes and deletes hold)."""

    def __init__(self, rows: MemoryRows) -> None:
        self._exec = rows.executor
        self._d = rows.dialect
        self.embedder = rows.embedder
        self.embedding = rows.embedding

    async def generate_embedding(
        self, tenant_id: str, texts: Sequence[str], *, cache: bool = True
    ) -> Vector:
        if not cache:
            return await self.embedder.embed(list(texts))
        hashes = [content_hash(t) for t in texts]
        unique = dict(zip(hashes, texts, strict=True))
        cached = await self._exec.read(
            tenant_id, "embedding cache", self._cached(tenant_id, unique)
        )
        missing = [h for h in unique if h not in cached]
        if missing:
            vectors = await self.embedder.embed([unique[h] for h in missing])
            fresh = dict(zip(missing, vectors, strict=True))
            await self._exec.write(tenant_id, "embedding cache", self._cache(tenant_id, fresh))
            cached.update(fresh)
        out = np.empty((len(texts), self.embedder.dimensions), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = cached[h]
        return out

    def _cached(self, tenant_id: str, texts: dict[str, str]) -> Program[dict[str, Vector]]:
        """The vectors of ``texts`` (by hash) the cache holds, then those of the rest that a
        memory holds (the store's model and dimensions)."""
        found: dict[str, Vector] = {}
        dims = self.embedder.dimensions
        for chunk, params in self._d.any_of_chunks("content_hash", list(texts)):
            for h, blob in (
                yield rows(
                    "SELECT content_hash, vector FROM embedding_cache WHERE tenant_id = %s "  # noqa: S608
                    f"AND model = %s AND length(vector) = %s AND {chunk}",
                    tenant_id,
                    self.embedder.model_id,
                    4 * dims,  # one model id, several dimensions (OpenAI)
                    *params,
                )
            ):
                found[h] = np.frombuffer(blob, dtype=np.float32)
        rest = {t: h for h, t in texts.items() if h not in found}
        prefixes = sorted({t[:64] for t in rest})
        for chunk, params in self._d.any_of_chunks(_PREFIX, prefixes):
            held = yield rows(
                "SELECT content, embedding FROM memories WHERE tenant_id = %s "  # noqa: S608
                f"AND {chunk} AND embedding IS NOT NULL AND embedding_model = %s",
                tenant_id,
                *params,
                self.embedder.model_id,
            )
            for content, value in held:
                h = rest.get(content)
                if h is None or h in found:
                    continue
                vector = self._d.from_vector(value)
                if vector is not None and len(vector) == dims:
                    found[h] = np.asarray(vector, dtype=np.float32)
        return found

    def _cache(self, tenant_id: str, vectors: dict[str, Vector]) -> Program[None]:
        now = self._d.time(datetime.now(UTC))
        model = self.embedder.model_id
        yield many(
            # A vector of other dimensions under the same model id is replaced.
            "INSERT INTO embedding_cache VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (tenant_id, model, content_hash) DO UPDATE SET vector = excluded.vector, "
            "created_at = excluded.created_at WHERE length(embedding_cache.vector) <> "
            "length(excluded.vector)",
            [
                (tenant_id, model, h, v.astype(np.float32).tobytes(), now)
                for h, v in vectors.items()
            ],
        )

    async def unembedded(self, tenant_id: str, limit: int) -> list[tuple[str, str]]:
        read = every(
            lambda r: (str(r[0]), str(r[1])),
            "SELECT id, content FROM memories WHERE tenant_id = %s AND embedding IS NULL "  # noqa: S608
            f"ORDER BY {self._d.seq} LIMIT %s",
            tenant_id,
            limit,
        )
        return await self._exec.read(tenant_id, "unembedded", read)

    async def set_embeddings(self, tenant_id: str, items: Sequence[tuple[str, str, Vector]]) -> int:
        if self.embedding.stale:  # pending until ``reembed``, which embeds them too
            return 0
        model = self.embedder.model_id

        def write() -> Program[int]:
            done = 0
            for memory_id, content, vector in items:
                done += yield count(
                    "UPDATE memories SET embedding = %s, embedding_model = %s WHERE "
                    "tenant_id = %s AND id = %s AND content = %s AND embedding IS NULL",
                    self._d.vector(vector),
                    model,
                    tenant_id,
                    memory_id,
                    content,
                )
            yield from drop_held(self._d, tenant_id, model, [c for _, c, _ in items])
            return done

        return await self._exec.write(tenant_id, "set embeddings", write())

    def drop_vectors(self, tenant_id: str, texts: set[str]) -> Program[None]:
        """Drop the cached vectors of ``texts`` that no memory of the tenant holds (found by
        the ``memories_content_prefix`` index, then compared whole)."""
        ordered = sorted(texts)
        for start in range(0, len(ordered), CHUNK):
            part = ordered[start : start + CHUNK]
            prefix, params = self._d.any_of(_PREFIX, list({t[:64] for t in part}))
            kept = yield rows(
                f"SELECT content FROM memories WHERE tenant_id = %s AND {prefix}",  # noqa: S608
                tenant_id,
                *params,
            )
            still = {r[0] for r in kept}
            unused = [content_hash(t) for t in part if t not in still]
            if unused:
                hashes, values = self._d.any_of("content_hash", unused)
                yield count(
                    f"DELETE FROM embedding_cache WHERE tenant_id = %s AND {hashes}",  # noqa: S608
                    tenant_id,
                    *values,
                )


def drop_held(d: Dialect, tenant_id: str, model: str, texts: Sequence[str]) -> Program[None]:
    """Drop the cached ``model`` vectors of ``texts``, which memories now hold with their
    vectors (written in the same transaction): the cache keeps no second copy."""
    hashes = sorted({content_hash(t) for t in texts})
    for chunk, params in d.any_of_chunks("content_hash", hashes):
        yield count(
            f"DELETE FROM embedding_cache WHERE tenant_id = %s AND model = %s AND {chunk}",  # noqa: S608
            tenant_id,
            model,
            *params,
        )
