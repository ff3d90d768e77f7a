"""What time windows cost a search as memory grows. Prints JSON.

One scope of N memories (synthetic sentences from corpus.py, random unit vectors: no
embedding model in the loop) per store, once with every memory valid and once with a share
of them invalidated (``valid_until`` in the past) and a share expired. For each: search p50
through the store port (semantic, keyword, hybrid; the default window, and with
``include_invalid``), list p50, and on PostgreSQL the plans of the filtered HNSW scan and
of the expiry job's query (which indexes they use).

    .venv/bin/python -m benchmarks.lifecycle_ops [--sizes 20000,100000] [--queries 50] \\
        [--postgres URL]

The PostgreSQL database named by the URL is emptied first (default: none; SQLite only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from benchmarks.corpus import queries, sentences
from benchmarks.postgres_ops import make_store, reset
from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import SearchMode
from lamina.memory.ports import LayerSearch, NewMemory, Scope
from lamina.memory.scoring import QuerySignals
from lamina.memory.timing import Lifetime, TimeWindow
from lamina.text import analyze

SCOPE = Scope(MemoryLayer.USER, {"user_id": "bench"}, "bench")
DIMS = 384
BATCH = 2_000


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def lifetime(i: int, stale: float) -> Lifetime:
    """Every memory valid (stale 0), or a share ``stale`` invalidated and a tenth of that
    expired, spread evenly."""
    past = datetime.now(UTC) - timedelta(days=1)
    if stale and (i % int(1 / stale)) == 0:
        return Lifetime(valid_until=past)
    if stale and (i % int(10 / stale)) == 1:
        return Lifetime(expires_at=past)
    return Lifetime()


async def load(store: Any, size: int, stale: float) -> float:
    texts = sentences(size, seed=7)
    rng = np.random.default_rng(7)
    start = time.perf_counter()
    for at in range(0, size, BATCH):
        chunk = texts[at : at + BATCH]
        vectors = unit(rng, len(chunk))
        await store.memories.writes.bulk_add(
            [
                NewMemory(
                    str(uuid.uuid4()),
                    "default",
                    SCOPE,
                    t,
                    {},
                    vectors[j],
                    lifetime=lifetime(at + j, stale),
                )
                for j, t in enumerate(chunk)
            ]
        )
    return time.perf_counter() - start


async def searches(store: Any, n: int) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    out: dict[str, Any] = {}
    texts = queries(n, seed=11)
    vectors = unit(rng, n)
    for mode in SearchMode:
        for name, window in (("valid", None), ("include_invalid", True)):
            times = []
            for text, vector in zip(texts, vectors, strict=True):
                req = LayerSearch(
                    "default",
                    SCOPE,
                    mode,
                    text,
                    None if mode is SearchMode.KEYWORD else vector,
                    tuple(analyze(text)),
                    0.0,
                    10,
                    MetadataFilter(),
                    signals=QuerySignals.of(text),
                    window=TimeWindow(include_invalid=bool(window)),
                )
                start = time.perf_counter()
                await store.memories.reads.search(req)
                times.append((time.perf_counter() - start) * 1000)
            out[f"{mode.value}_{name}_p50_ms"] = round(statistics.median(times), 2)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        await store.memories.reads.list(
            "default", scopes=[SCOPE], flt=MetadataFilter(), limit=50, cursor=None
        )
        times.append((time.perf_counter() - start) * 1000)
    out["list_p50_ms"] = round(statistics.median(times), 2)
    return out


def analyze_table(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE memories")


def plans(url: str) -> dict[str, Any]:
    import psycopg

    vector = "[" + ",".join(["0.05"] * DIMS) + "]"
    now = datetime.now(UTC)
    with psycopg.connect(url) as conn:
        conn.execute("SET hnsw.ef_search = 200")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        semantic = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT id FROM memories "
            "WHERE tenant_id = 'default' AND layer = 'user' AND scope_key = 'bench' "
            "AND embedding IS NOT NULL AND (expires_at IS NULL OR expires_at > %s) "
            "AND (valid_from IS NULL OR valid_from <= %s) AND (valid_until IS NULL OR "
            "valid_until > %s) ORDER BY embedding <=> %s::vector LIMIT 40",
            (now, now, now, vector),
        ).fetchall()
        expiry = conn.execute(
            "EXPLAIN (COSTS OFF) SELECT id FROM memories WHERE tenant_id = 'default' "
            "AND expires_at <= %s ORDER BY expires_at LIMIT 500",
            (now,),
        ).fetchall()
        ranged = conn.execute(
            "EXPLAIN (COSTS OFF) SELECT id FROM memories WHERE tenant_id = 'default' "
            "AND layer = 'user' AND scope_key = 'bench' AND event_at >= %s AND event_at < %s",
            (now - timedelta(days=2), now - timedelta(days=1)),
        ).fetchall()

    def short(rows: list[Any]) -> list[str]:
        return [str(r[0]).replace(vector, "[…]") for r in rows]

    return {
        "semantic": short(semantic),
        "expiry_job": short(expiry),
        "event_range": short(ranged),
    }


async def measure(kind: str, target: str, size: int, stale: float, n: int) -> dict[str, Any]:
    store = make_store(kind, target)
    await store.initialize()
    try:
        seconds = await load(store, size, stale)
        if kind == "postgresql":
            analyze_table(target)  # as autovacuum would soon: the planner needs the row counts
        result: dict[str, Any] = {"load_s": round(seconds, 1), **(await searches(store, n))}
    finally:
        await store.shutdown()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--stale", type=float, default=0.5)
    parser.add_argument("--postgres", default=None)
    args = parser.parse_args()
    report: dict[str, Any] = {"benchmark": "lifecycle_ops", "stale_share": args.stale}
    for size in [int(s) for s in args.sizes.split(",")]:
        for stale in (0.0, args.stale):
            key = f"{size}_stale_{stale}"
            with tempfile.TemporaryDirectory() as tmp:
                report[f"sqlite_{key}"] = asyncio.run(
                    measure("sqlite", tmp, size, stale, args.queries)
                )
            if args.postgres:
                reset(args.postgres)
                report[f"postgresql_{key}"] = asyncio.run(
                    measure("postgresql", args.postgres, size, stale, args.queries)
                )
                report[f"postgresql_{key}_plans"] = plans(args.postgres)
            print(json.dumps({key: "done"}), file=sys.stderr)
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
