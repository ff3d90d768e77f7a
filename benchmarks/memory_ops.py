"""Memory operations on the embedded store: add, bulk_add, search latency, resident memory.

Each size is built, then searched by a fresh process, whose resident memory is reported
(the model, the store and its indexes, nothing of the benchmark's own data). Prints JSON.

    uv run python -m benchmarks.memory_ops [--sizes 10000,100000] [--queries 200]

Vectors of the synthetic corpus are computed with the local model once and kept in
~/.cache/lamina-bench/ (LAMINA_BENCH_CACHE) so that reruns skip the embedding time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import queries, sentences

#: Outside the checkout, so that a fresh clone on the same machine finds the vectors again.
CACHE = Path(os.environ.get("LAMINA_BENCH_CACHE", Path.home() / ".cache" / "lamina-bench"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms_stats(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 0.5) * 1000, 2),
        "p95_ms": round(percentile(values, 0.95) * 1000, 2),
    }


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def corpus_vectors(texts: list[str]) -> np.ndarray:
    from lamina.embeddings.local import LocalEmbedder

    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"corpus-{len(texts)}.npy"
    if path.is_file():
        return np.load(path)
    vectors = LocalEmbedder(batch_size=64).embed_sync(texts)
    np.save(path, vectors)
    return vectors


def build_store(size: int, data_dir: str, database_url: str | None = None) -> dict[str, Any]:
    """Fill a store with ``size`` memories of one user (vectors precomputed); the SQLite file
    in ``data_dir``, or PostgreSQL at ``database_url``."""
    from lamina import Lamina
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    texts = sentences(size, numbered=True)
    vectors = corpus_vectors(texts)
    with Lamina(data_dir=data_dir, database_url=database_url) as ms:
        store = ms.aio.store
        scope = Scope(MemoryLayer.USER, {"user_id": "bench"}, "bench")
        start = time.perf_counter()
        for lo in range(0, size, 5000):
            batch = [
                NewMemory(str(uuid.uuid4()), "default", scope, texts[i], {"i": i}, vectors[i])
                for i in range(lo, min(size, lo + 5000))
            ]
            ms._run(store.memories.writes.bulk_add(batch))
        rate = size / (time.perf_counter() - start)
    if database_url:  # as after a bulk load (the planner needs the new rows' statistics)
        import psycopg

        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("ANALYZE")
    return {"memories": size, "store_bulk_add_precomputed_per_s": round(rate)}


def run_searches(data_dir: str, n_queries: int) -> dict[str, Any]:
    """Open the store in this fresh process, search it, and report resident memory."""
    from lamina import Lamina

    out: dict[str, Any] = {}
    with Lamina(data_dir=data_dir) as ms:
        qs = queries(n_queries)
        start = time.perf_counter()
        ms.memory.search(qs[0], user_id="bench", mode="keyword")  # loads the indexes
        out["index_load_s"] = round(time.perf_counter() - start, 2)
        for q in qs:  # warm the query-embedding cache: the figures below are search alone
            ms.memory.search(q, user_id="bench")
        runs: dict[str, dict[str, Any]] = {
            "semantic_default_threshold": {},
            "semantic_threshold_0": {"threshold": 0.0},
            "hybrid": {"mode": "hybrid"},
            "keyword": {"mode": "keyword"},
        }
        for name, kwargs in runs.items():
            times = []
            for q in qs:
                start = time.perf_counter()
                ms.memory.search(q, user_id="bench", **kwargs)
                times.append(time.perf_counter() - start)
            out[f"search_{name}"] = ms_stats(times)
        for name, mode in (("semantic", "semantic"), ("hybrid", "hybrid")):
            times = []
            for q in queries(100, seed=5 if mode == "semantic" else 6):
                start = time.perf_counter()
                ms.memory.search(q + " lately", user_id="bench", mode=mode)
                times.append(time.perf_counter() - start)
            out[f"search_{name}_including_query_embedding"] = ms_stats(times)
        out["rss_mb"] = round(rss_mb(), 1)
    return out


def run_ops() -> dict[str, Any]:
    """Single add and service bulk_add, embeddings included (cache misses)."""
    from lamina import Lamina

    texts = sentences(3300, seed=11, numbered=True)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, Lamina(data_dir=tmp) as ms:
        ms.memory.add("warm-up", layer="user", user_id="u")
        times = []
        for text in texts[:300]:
            start = time.perf_counter()
            ms.memory.add(text, layer="user", user_id="u")
            times.append(time.perf_counter() - start)
        out["add_with_embedding"] = ms_stats(times)
        items = [{"content": t, "layer": "user", "user_id": "u"} for t in texts[300:]]
        rates = []
        for lo in range(0, len(items), 1000):
            chunk = items[lo : lo + 1000]
            start = time.perf_counter()
            ms.memory.bulk_add(chunk)
            rates.append(len(chunk) / (time.perf_counter() - start))
        out["bulk_add_with_embedding_per_s_median"] = round(statistics.median(rates))
        rates = []
        for lo in range(0, len(items), 1000):  # same contents again: the embedding cache hits
            chunk = items[lo : lo + 1000]
            start = time.perf_counter()
            ms.memory.bulk_add([{**item, "user_id": "v"} for item in chunk])
            rates.append(len(chunk) / (time.perf_counter() - start))
        out["bulk_add_cached_embeddings_per_s_median"] = round(statistics.median(rates))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--search-db", help=argparse.SUPPRESS)
    parser.add_argument("--ops", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.search_db:
        print(json.dumps(run_searches(args.search_db, args.queries)))
        return
    if args.ops:
        print(json.dumps(run_ops()))
        return
    me = [sys.executable, "-m", "benchmarks.memory_ops"]
    result: dict[str, Any] = {"benchmark": "memory_ops", "store": "sqlite (embedded)"}
    ops = subprocess.run([*me, "--ops"], capture_output=True, text=True, check=True)
    result.update(json.loads(ops.stdout))
    result["sizes"] = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            figures = build_store(size, tmp)
            proc = subprocess.run(
                [*me, "--search-db", tmp, "--queries", str(args.queries)],
                capture_output=True,
                text=True,
                check=True,
            )
            figures.update(json.loads(proc.stdout))
        result["sizes"].append(figures)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
