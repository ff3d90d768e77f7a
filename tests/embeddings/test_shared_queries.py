"""Query vectors shared by the processes of one server (lamina.embeddings.shared_queries):
a vector one process embedded is found by another, never by another tenant, within a
fixed arena, and a taken lock never blocks."""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.embeddings.base import Vector
from lamina.embeddings.local import LocalEmbedder
from lamina.embeddings.query_cache import QueryVectors
from lamina.embeddings.shared_queries import SharedQueryVectors, make_arena
from lamina.retry import RetryPolicy

DIMS = 384


def _put_in_child(arena: Any, lock: Any, tenant: str, query: str, value: float) -> None:
    table = SharedQueryVectors(arena, lock, "model/384", DIMS)
    table.put(tenant, query, np.full(DIMS, value, dtype=np.float32))


def test_a_vector_put_by_one_process_is_found_by_another_of_the_same_tenant() -> None:
    context = multiprocessing.get_context("spawn")
    arena, lock = make_arena(context, 1 << 20)
    child = context.Process(target=_put_in_child, args=(arena, lock, "acme", "what now", 0.5))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    table = SharedQueryVectors(arena, lock, "model/384", DIMS)
    found = table.get("acme", "what now")
    assert found is not None and np.array_equal(found, np.full(DIMS, 0.5, np.float32))
    assert table.get("other", "what now") is None  # another tenant's
    assert table.get("acme", "what then") is None
    # Another embedder (model or dimensions) never reads these vectors.
    assert SharedQueryVectors(arena, lock, "model-2/384", DIMS).get("acme", "what now") is None


def test_the_arena_bounds_the_vectors_kept_and_the_recently_used_stay() -> None:
    arena, lock = make_arena(multiprocessing.get_context("spawn"), 64 << 10)
    table = SharedQueryVectors(arena, lock, "m/384", DIMS)
    slots = (64 << 10) // (32 + 4 * DIMS) // 4 * 4  # 40 vectors of 384 dimensions
    table.put("t", "kept", np.ones(DIMS, np.float32))
    for i in range(10 * slots):
        assert table.get("t", "kept") is not None  # used again and again: never replaced
        table.put("t", f"q{i}", np.full(DIMS, i, np.float32))
    held = sum(table.get("t", f"q{i}") is not None for i in range(10 * slots))
    assert 0 < held < slots
    assert table.get("t", "kept") is not None
    table.put("t", "short", np.ones(DIMS - 1, np.float32))  # not of its dimensions: not kept
    assert table.get("t", "short") is None


def test_a_taken_lock_is_not_waited_for() -> None:
    arena, lock = make_arena(multiprocessing.get_context("spawn"), 1 << 20)
    table = SharedQueryVectors(arena, lock, "m/384", DIMS)
    table.put("t", "q", np.ones(DIMS, np.float32))
    with lock:  # as held by a process that died holding it
        assert table.get("t", "q") is None
        table.put("t", "p", np.ones(DIMS, np.float32))
    assert table.get("t", "q") is not None
    assert table.get("t", "p") is None


def test_query_vectors_embed_a_query_another_process_embedded_once() -> None:
    """Two QueryVectors (two server processes) over one arena: the second takes the first's
    vector of a query instead of running the model; a tenant gets only its own."""
    embedder = LocalEmbedder()
    calls: list[tuple[str, list[str]]] = []

    async def embed(tenant: str, texts: Sequence[str]) -> Vector:
        calls.append((tenant, list(texts)))
        return await embedder.embed(texts)

    asyncio.run(_two_processes(embed, calls, embedder.model_id))


async def _two_processes(embed: Any, calls: list[tuple[str, list[str]]], model: str) -> None:
    arena, lock = make_arena(multiprocessing.get_context("spawn"))
    first, second = (QueryVectors(embed, RetryPolicy()) for _ in range(2))
    for each in (first, second):
        each.shared = SharedQueryVectors(arena, lock, f"{model}/{DIMS}", DIMS)
    one = await first.get("acme", "where is the invoice")
    again = await second.get("acme", "where is the invoice")
    assert np.array_equal(one, again)
    assert calls == [("acme", ["where is the invoice"])]
    await second.get("beta", "where is the invoice")
    assert calls[-1] == ("beta", ["where is the invoice"])
    assert len(calls) == 2
    both = await asyncio.gather(first.get("acme", "new one"), first.get("acme", "new one"))
    assert np.array_equal(both[0], both[1]) and len(calls) == 3
