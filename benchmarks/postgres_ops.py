"""PostgreSQL + pgvector store against the embedded store, measured in one run. Prints JSON.

For each size: bulk load into an empty database (embeddings precomputed; the HNSW index
built after the rows, index build included), bulk_add into the loaded database (index kept
row by row), semantic and hybrid search latency through the
library, HNSW recall@10 against exact search on the real embeddings, and throughput of 4
concurrent client processes. The embedded SQLite store is measured on the same data at the
sizes given in --compare (default 100000) and the ratio reported.

    LAMINA_BENCH_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/lamina_bench \\
        .venv/bin/python -m benchmarks.postgres_ops [--sizes 100000,1000000] [--compare 100000]

The database named by the URL is emptied first. The corpus vectors come from
~/.cache/lamina-bench/ (see memory_ops.py); a 1,000,000 corpus takes about 45 minutes to embed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from benchmarks.corpus import queries, sentences
from benchmarks.memory_ops import corpus_vectors, ms_stats

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/lamina_bench"
SCOPE = ("user", {"user_id": "bench"}, "bench")


def reset(url: str) -> None:
    dbname = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{dbname}"')


def make_store(kind: str, target: str, ef_search: int | None = None) -> Any:
    from lamina.embeddings.local import LocalEmbedder
    from lamina.store.postgres import PostgresStore
    from lamina.store.sqlite import SQLiteStore

    if kind == "postgresql":
        if ef_search is not None:
            return PostgresStore(target, LocalEmbedder(), pool_max=4, ef_search=ef_search)
        return PostgresStore(target, LocalEmbedder(), pool_max=4)
    return SQLiteStore(Path(target) / "lamina.db", LocalEmbedder())


def layer_search(vector: np.ndarray, limit: int = 10) -> Any:
    from lamina.memory.filters import MetadataFilter
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.models import SearchMode
    from lamina.memory.ports import LayerSearch, Scope

    scope = Scope(MemoryLayer(SCOPE[0]), SCOPE[1], SCOPE[2])
    return LayerSearch(
        "default", scope, SearchMode.SEMANTIC, "", vector, (), 0.0 - 1.0, limit, MetadataFilter()
    )


async def load(kind: str, target: str, texts: list[str], vectors: np.ndarray) -> float:
    """Bulk load into an empty store; on PostgreSQL the HNSW index is built after the rows."""
    from contextlib import AsyncExitStack

    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    store = make_store(kind, target)
    await store.initialize()
    scope = Scope(MemoryLayer(SCOPE[0]), SCOPE[1], SCOPE[2])
    start = time.perf_counter()
    async with AsyncExitStack() as stack:
        if kind == "postgresql":
            await stack.enter_async_context(store.bulk.bulk_loading(index_build_memory="4GB"))
        for lo in range(0, len(texts), 5000):
            await store.memories.writes.bulk_add(
                [
                    NewMemory(str(uuid.uuid4()), "default", scope, texts[i], {"i": i}, vectors[i])
                    for i in range(lo, min(len(texts), lo + 5000))
                ]
            )
    rate = len(texts) / (time.perf_counter() - start)
    await store.shutdown()
    if kind == "postgresql":  # fresh planner statistics, as autovacuum would leave them
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(
                "VACUUM ANALYZE memories, memory_terms, memory_postings, memory_scope_stats"
            )
    return rate


async def incremental_add(kind: str, target: str, count: int = 2000) -> float:
    """bulk_add into the loaded store, the index maintained row by row (a live database)."""
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    texts = sentences(count, seed=123, numbered=True)
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = make_store(kind, target)
    await store.initialize()
    scope = Scope(MemoryLayer(SCOPE[0]), {"user_id": "other"}, "other")
    start = time.perf_counter()
    for lo in range(0, count, 500):
        await store.memories.writes.bulk_add(
            [
                NewMemory(str(uuid.uuid4()), "default", scope, texts[i], {}, vectors[i])
                for i in range(lo, min(count, lo + 500))
            ]
        )
    rate = count / (time.perf_counter() - start)
    await store.shutdown()
    return rate


async def measure(
    kind: str,
    target: str,
    vectors: np.ndarray,
    qvecs: np.ndarray,
    ef_search: int | None = None,
) -> dict[str, Any]:
    store = make_store(kind, target, ef_search)
    await store.initialize()
    await store.memories.reads.search(
        layer_search(qvecs[0])
    )  # connections, caches, the in-process index
    times, recalls, tie_recalls = [], [], []
    for q in qvecs:
        start = time.perf_counter()
        hits = (await store.memories.reads.search(layer_search(q))).hits
        times.append(time.perf_counter() - start)
        scores = vectors @ q
        top = np.argsort(-scores)[:10]
        found = [int(h.entry.metadata["i"]) for h in hits]
        recalls.append(len(set(top.tolist()) & set(found)) / 10)
        # ANN-benchmarks style: a hit counts when it is as close as the 10th true neighbour
        # (the synthetic corpus repeats templates, so exact ties are common).
        tenth = float(scores[top[-1]]) - 1e-4
        tie_recalls.append(sum(float(scores[i]) >= tenth for i in found) / 10)
    await store.shutdown()
    return {
        "search_store": ms_stats(times),
        "recall_at_10": round(float(np.mean(recalls)), 3),
        "recall_at_10_with_ties": round(float(np.mean(tie_recalls)), 3),
    }


CLIENT = """
import asyncio, json, sys, time
import numpy as np
from benchmarks.postgres_ops import make_store, layer_search
kind, target, qfile, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
qvecs = np.load(qfile)
async def main():
    store = make_store(kind, target)
    await store.initialize()
    await store.memories.reads.search(layer_search(qvecs[0]))
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        await store.memories.reads.search(layer_search(qvecs[done % len(qvecs)]))
        done += 1
    await store.shutdown()
    print(json.dumps({"queries": done, "seconds": time.perf_counter() - start}))
asyncio.run(main())
"""


def throughput(kind: str, target: str, qvecs: np.ndarray, clients: int = 4) -> float:
    with tempfile.NamedTemporaryFile(suffix=".npy", delete=False) as f:
        np.save(f, qvecs)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLIENT, kind, target, f.name, "10"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(clients)
    ]
    results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    os.unlink(f.name)
    return round(sum(r["queries"] / r["seconds"] for r in results), 1)


def service_latency(url: str, n: int) -> dict[str, Any]:
    """Search through the library with default arguments, a query never seen before each
    time (its embedding included), in each mode."""
    from lamina import Lamina

    out: dict[str, Any] = {}
    with Lamina(database_url=url) as ms:
        for q in queries(20, seed=1):
            ms.memory.search(q, user_id="bench")
        for k, mode in enumerate(("semantic", "hybrid", "keyword")):
            times = []
            for i, q in enumerate(queries(n, seed=1000 + k)):
                start = time.perf_counter()
                ms.memory.search(f"{q} ({k}-{i})", user_id="bench", mode=mode)
                times.append(time.perf_counter() - start)
            out[f"search_{mode}_library"] = ms_stats(times)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--compare", default="100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    url = os.environ.get("LAMINA_BENCH_POSTGRES_URL", DEFAULT_URL)
    from lamina.embeddings.local import LocalEmbedder

    qvecs = LocalEmbedder().embed_sync(queries(args.queries))
    compare = {int(s) for s in args.compare.split(",") if s}
    result: dict[str, Any] = {"benchmark": "postgres_ops", "sizes": []}
    for size in (int(s) for s in args.sizes.split(",")):
        texts = sentences(size, numbered=True)
        vectors = corpus_vectors(texts)
        reset(url)
        figures: dict[str, Any] = {"memories": size}
        figures["bulk_load_per_s"] = round(asyncio.run(load("postgresql", url, texts, vectors)))
        figures.update(asyncio.run(measure("postgresql", url, vectors, qvecs)))
        figures.update(service_latency(url, args.queries))
        figures["throughput_4_clients_qps"] = throughput("postgresql", url, qvecs)
        figures["bulk_add_live_index_per_s"] = round(
            asyncio.run(incremental_add("postgresql", url))
        )
        if size in compare:
            with tempfile.TemporaryDirectory() as tmp:
                embedded: dict[str, Any] = {}
                embedded["bulk_load_per_s"] = round(
                    asyncio.run(load("sqlite", tmp, texts, vectors))
                )
                embedded.update(asyncio.run(measure("sqlite", tmp, vectors, qvecs)))
                embedded["throughput_4_clients_qps"] = throughput("sqlite", tmp, qvecs)
            figures["embedded_sqlite"] = embedded
            figures["ratio_postgres_over_sqlite"] = {
                "search_p50": round(
                    figures["search_store"]["p50_ms"] / embedded["search_store"]["p50_ms"], 2
                ),
                "throughput": round(
                    figures["throughput_4_clients_qps"] / embedded["throughput_4_clients_qps"], 2
                ),
                "bulk_load": round(figures["bulk_load_per_s"] / embedded["bulk_load_per_s"], 2),
            }
        del vectors
        result["sizes"].append(figures)
        print(json.dumps(figures), file=sys.stderr, flush=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
