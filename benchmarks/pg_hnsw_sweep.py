"""HNSW settings against recall and latency, on a database benchmarks/postgres_ops.py loaded.

For each ef_search value: semantic search latency through the store and recall@10 against
exact search on the same real embeddings. ``--rebuild m,ef_construction`` first rebuilds the
HNSW index with those build parameters (timed). Prints JSON.

    LAMINA_BENCH_POSTGRES_URL=postgresql://postgres@127.0.0.1:5432/lamina_bench \\
        .venv/bin/python -m benchmarks.pg_hnsw_sweep --size 1000000 --ef 100,200,400 \\
        [--rebuild 16,64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import numpy as np
import psycopg

from benchmarks.corpus import queries, sentences
from benchmarks.memory_ops import corpus_vectors
from benchmarks.postgres_ops import DEFAULT_URL, measure


def rebuild(url: str, m: int, ef_construction: int) -> float:
    start = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        conn.execute("DROP INDEX IF EXISTS memories_embedding")
        conn.execute(
            "CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) "
            f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})"
        )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--size", type=int, required=True, help="rows postgres_ops loaded")
    parser.add_argument("--ef", default="100,200,400")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rebuild", default=None, help="m,ef_construction")
    args = parser.parse_args()
    url = os.environ.get("LAMINA_BENCH_POSTGRES_URL", DEFAULT_URL)
    from lamina.embeddings.local import LocalEmbedder

    vectors = corpus_vectors(sentences(args.size, numbered=True))
    qvecs = LocalEmbedder().embed_sync(queries(args.queries))
    out: dict[str, Any] = {"benchmark": "pg_hnsw_sweep", "memories": args.size}
    if args.rebuild:
        m, efc = (int(x) for x in args.rebuild.split(","))
        out["index"] = {"m": m, "ef_construction": efc, "build_s": round(rebuild(url, m, efc))}
    out["ef_search"] = {}
    for ef in (int(x) for x in args.ef.split(",")):
        figures = asyncio.run(measure("postgresql", url, vectors, qvecs, ef_search=ef))
        out["ef_search"][ef] = figures
        print(json.dumps({ef: figures}), flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
