"""PostgreSQL search at scale: many tenants, or one large scope. Prints JSON.

``--tenants T --per-tenant N`` loads T x N memories (one user scope per tenant) into an empty
database, then searches through the library (``Lamina(database_url=…)``, default arguments
but the mode), a query never seen before each time (its embedding included), each time in a
tenant picked at random: p50/p95 per mode, with the plan of each statement of a search.

The vectors are generated, not embedded (1M memories would take about 45 minutes to embed
on this machine): memory i gets the synthetic corpus sentence i (benchmarks/corpus.py,
numbered) and the real embedding of the 10,000-sentence corpus entry i mod 10,000
(~/.cache/lamina-bench, see memory_ops.py) plus Gaussian noise of norm ~0.3, normalised.
The vector space thus has the structure of real embeddings (clusters by topic, queries near
their topic), not the uniform spread of random vectors, which is the worst case for HNSW.

The load uses ``PostgresStore.bulk.bulk_loading`` (the HNSW index built once after the rows, as
``lamina db copy`` does), 1,000 memories per ``bulk_add`` (one tenant per call); the load
time and rate are printed, index build included, and then ``VACUUM ANALYZE``.

    LAMINA_BENCH_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/lamina_bench_tenants \\
        .venv/bin/python -m benchmarks.pg_tenants --tenants 1000 --per-tenant 1000
    .venv/bin/python -m benchmarks.pg_tenants --tenants 1 --per-tenant 100000 --skip-load
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import time
import uuid
from typing import Any

import numpy as np
import psycopg

from benchmarks.corpus import queries, sentences
from benchmarks.memory_ops import corpus_vectors, ms_stats
from benchmarks.postgres_ops import make_store, reset

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/lamina_bench_tenants"
MODES = ("keyword", "hybrid", "semantic")


def generated_vectors(count: int, start: int, base: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = np.arange(start, start + count) % len(base)
    noise = rng.standard_normal((count, base.shape[1])).astype(np.float32)
    noise *= 0.3 / np.sqrt(base.shape[1])
    vectors = base[idx] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors.astype(np.float32)


async def load(url: str, tenants: int, per_tenant: int) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    base = corpus_vectors(sentences(10_000, numbered=True))
    texts = sentences(tenants * per_tenant, numbered=True)
    store = make_store("postgresql", url)
    await store.initialize()
    start = time.perf_counter()
    rows_done = 0
    async with AsyncExitStack() as stack:
        deferred = await stack.enter_async_context(
            store.bulk.bulk_loading(index_build_memory="2GB")
        )
        for t in range(tenants):
            scope = Scope(MemoryLayer.USER, {"user_id": "bench"}, "bench")
            for lo in range(0, per_tenant, 1000):
                n = min(1000, per_tenant - lo)
                first = t * per_tenant + lo
                vectors = generated_vectors(n, first, base, seed=first)
                await store.memories.writes.bulk_add(
                    [
                        NewMemory(
                            str(uuid.uuid4()),
                            f"tenant{t}",
                            scope,
                            texts[first + i],
                            {"i": first + i},
                            vectors[i],
                        )
                        for i in range(n)
                    ]
                )
                rows_done += n
        rows_seconds = time.perf_counter() - start
    seconds = time.perf_counter() - start
    await store.shutdown()
    vacuum_start = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    return {
        "memories": rows_done,
        "hnsw_deferred": deferred,
        "rows_seconds": round(rows_seconds, 1),
        "load_seconds_with_index": round(seconds, 1),
        "load_per_s": round(rows_done / seconds),
        "vacuum_analyze_seconds": round(time.perf_counter() - vacuum_start, 1),
    }


def plans(url: str, tenant: str, query: str) -> dict[str, list[str]]:
    """EXPLAIN of the statements a hybrid search runs, as the application role (row-level
    security on)."""
    from lamina.embeddings.local import LocalEmbedder
    from lamina.store.postgres.filters import to_pg_vector
    from lamina.text import analyze

    vector = to_pg_vector(LocalEmbedder().embed_sync([query])[0])
    terms = list(analyze(query))
    out: dict[str, list[str]] = {}
    with psycopg.connect(url) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        conn.execute("SET ROLE lamina_app")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        conn.execute("SELECT set_config('lamina.tenant_id', %s, false)", (tenant,))
        keyword = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "
            "SELECT s.docs, s.length, t.term, (SELECT string_agg(b.postings, ''::bytea "
            "ORDER BY b.block) FROM memory_postings b WHERE b.tenant_id = s.tenant_id "
            "AND b.layer = s.layer AND b.scope_key = s.scope_key AND b.term = t.term) "
            "FROM memory_scope_stats s CROSS JOIN unnest(%s::text[]) AS t(term) "
            "WHERE s.tenant_id = %s AND s.layer = 'user' AND s.scope_key = 'bench' "
            "AND s.docs > 0",
            (terms, tenant),
        ).fetchall()
        semantic = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) "
            "SELECT id, embedding <=> %s AS d FROM memories "
            "WHERE tenant_id = %s AND layer = 'user' AND scope_key = 'bench' "
            "AND embedding IS NOT NULL ORDER BY embedding <=> %s LIMIT 100",
            (vector, tenant, vector),
        ).fetchall()
    out["keyword_postings"] = [r[0] for r in keyword]
    # The query vector's 384 numbers say nothing about the plan.
    out["semantic_candidates"] = [re.sub(r"'\[[^']*\]'", "'[…]'", r[0]) for r in semantic]
    return out


def search(url: str, tenants: int, n: int) -> dict[str, Any]:
    from lamina import Lamina

    rng = random.Random(5)
    out: dict[str, Any] = {}
    with Lamina(database_url=url) as ms:
        for q in queries(20, seed=1):  # connections, the model, caches
            ms.memory.search(q, user_id="bench", tenant_id=f"tenant{rng.randrange(tenants)}")
        for k, mode in enumerate(MODES):
            times = []
            for i, q in enumerate(queries(n, seed=2000 + k)):
                tenant = f"tenant{rng.randrange(tenants)}"
                start = time.perf_counter()
                ms.memory.search(f"{q} ({k}-{i})", user_id="bench", mode=mode, tenant_id=tenant)
                times.append(time.perf_counter() - start)
            out[mode] = ms_stats(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--per-tenant", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--skip-load", action="store_true", help="search what is loaded")
    args = parser.parse_args()
    url = os.environ.get("LAMINA_BENCH_POSTGRES_URL", DEFAULT_URL)
    result: dict[str, Any] = {
        "benchmark": "pg_tenants",
        "tenants": args.tenants,
        "per_tenant": args.per_tenant,
        "cpus": os.cpu_count(),
    }
    if not args.skip_load:
        reset(url)
        result["load"] = asyncio.run(load(url, args.tenants, args.per_tenant))
    result["search_library"] = search(url, args.tenants, args.queries)
    result["plans"] = plans(url, "tenant0", queries(1, seed=3)[0])
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
