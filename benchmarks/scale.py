"""The embedded store at scale: resident memory, search latency, disk, recall. Prints JSON.

For each size, one store is filled (one user's scope, vectors precomputed: the benchmark
corpus embedded by the local model, cached as memory_ops.py caches it; past 100k the
vectors are made by a deterministic generator from those: each corpus vector moved by
seeded noise and renormalised, so that a 1M scope loads in minutes, not hours of
embedding), opened once to load its indexes and build the graph of a scope past
``GRAPH_FROM`` (``index_and_graph_build_s``; the graph is saved beside the file, as a
long-running process saves it), then searched by fresh processes: this checkout's code,
and with ``--before-src`` the code of another checkout on the same file, alternating. Each
search process reports:

- ``index_load_s``: the first search, which loads the indexes (or the saved graph);
- ``search_{semantic,hybrid}_p50_ms``: new queries, their embedding included;
- ``embed_query_p50_ms``: the model's own time on the same new queries (the ratio is the
  issue's figure);
- ``rss_mb``: resident memory after the load and 1,000 searches;
- ``recall@10``: the store's top 10 by vector against the exact float32 scan of the same
  vectors, over 200 queries.

    uv run python -m benchmarks.scale [--sizes 10000,100000,1000000] [--before-src PATH]
"""

from __future__ import annotations

import argparse
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

from benchmarks.corpus import CONTEXTS, NAMES, OBJECTS, sentences
from benchmarks.memory_ops import corpus_vectors, rss_mb

SEARCHES = 1_000
BASE = 100_000


def new_queries(count: int, seed: int) -> list[str]:
    """Distinct questions (none repeats: each is embedded anew)."""
    rng = np.random.default_rng(seed)
    return [
        f"what did {NAMES[rng.integers(len(NAMES))]} say about "
        f"{OBJECTS[rng.integers(len(OBJECTS))]} {CONTEXTS[rng.integers(len(CONTEXTS))]} ({i})"
        for i in range(count)
    ]


def vectors_for(size: int) -> np.ndarray:
    """The corpus vectors, or past ``BASE`` the generator's (module docstring)."""
    if size <= BASE:
        return corpus_vectors(sentences(size, numbered=True))
    base = corpus_vectors(sentences(BASE, numbered=True))
    out = np.empty((size, base.shape[1]), dtype=np.float32)
    out[:BASE] = base
    for lo in range(BASE, size, BASE):
        rng = np.random.default_rng(lo)
        hi = min(size, lo + BASE)
        moved = base[: hi - lo] + 0.25 * rng.standard_normal((hi - lo, base.shape[1])).astype(
            np.float32
        ) / np.sqrt(base.shape[1])
        out[lo:hi] = moved / np.linalg.norm(moved, axis=1, keepdims=True)
    return out


def fill(size: int, data_dir: str) -> dict[str, Any]:
    from lamina import Lamina
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    texts = sentences(size, numbered=True)
    vectors = vectors_for(size)
    scope = Scope(MemoryLayer.USER, {"user_id": "bench"}, "bench")
    start = time.perf_counter()
    with Lamina(data_dir=data_dir) as ms:
        for lo in range(0, size, 5000):
            batch = [
                NewMemory(str(uuid.uuid4()), "default", scope, texts[i], {"i": i}, vectors[i])
                for i in range(lo, min(size, lo + 5000))
            ]
            ms._run(ms.aio.store.memories.writes.bulk_add(batch))
    out: dict[str, Any] = {"memories": size, "bulk_load_s": round(time.perf_counter() - start, 1)}
    # A scope of GRAPH_FROM memories or more is searched through a graph, built in the
    # background by the first process that loads the indexes and saved at once; the searches
    # measured below are those of the steady state: a process that finds the graph saved.
    start = time.perf_counter()
    with Lamina(data_dir=data_dir) as ms:
        ms.memory.search("load the indexes", user_id="bench", mode="keyword")
        ms.aio.store._indexes.wait_for_builds()
    out["index_and_graph_build_s"] = round(time.perf_counter() - start, 1)
    return out


def disk_bytes(data_dir: str) -> int:
    return sum(p.stat().st_size for p in Path(data_dir).rglob("*") if p.is_file())


def recall_at_10(ms: Any, size: int, n: int = 200) -> float:
    """The store's top 10 by vector against the exact scan (pk order is insertion order)."""
    store = ms.aio.store
    vectors = vectors_for(size)
    queries = ms._run(store.embedder.embed(new_queries(n, seed=3)))
    first = store._db.connection().execute("SELECT min(pk) FROM memories").fetchone()[0]
    found = []
    for q in queries:
        hits = store._indexes.vector_hits(("default", "user", "bench"), q, None, 10)
        exact = np.argpartition(-(vectors @ q), 10)[:10] + first
        found.append(len({pk for pk, _ in hits} & set(exact.tolist())) / 10)
    return round(float(np.mean(found)), 4)


def search_run(data_dir: str, size: int, with_recall: bool) -> dict[str, Any]:
    from lamina import Lamina

    out: dict[str, Any] = {}
    with Lamina(data_dir=data_dir) as ms:
        start = time.perf_counter()
        ms.memory.search("warm up", user_id="bench", mode="keyword")
        out["index_load_s"] = round(time.perf_counter() - start, 2)
        embedder = ms.aio.store.embedder
        ms._run(embedder.embed(["warm up the model"]))
        texts = new_queries(SEARCHES + 400, seed=size)
        times: dict[str, list[float]] = {"semantic": [], "hybrid": [], "embed": []}
        for i, text in enumerate(texts[:SEARCHES]):
            mode = "semantic" if i % 2 else "hybrid"
            start = time.perf_counter()
            ms.memory.search(text, user_id="bench", mode=mode)
            times[mode].append(time.perf_counter() - start)
        for text in texts[SEARCHES:]:
            start = time.perf_counter()
            ms._run(embedder.embed([text]))
            times["embed"].append(time.perf_counter() - start)
        out["rss_mb"] = round(rss_mb(), 1)
        for name in ("semantic", "hybrid"):
            out[f"search_{name}_p50_ms"] = round(float(np.median(times[name])) * 1000, 2)
        out["embed_query_p50_ms"] = round(float(np.median(times["embed"])) * 1000, 2)
        out["hybrid_over_embedding"] = round(
            out["search_hybrid_p50_ms"] / out["embed_query_p50_ms"], 2
        )
        if with_recall:
            out["recall@10"] = recall_at_10(ms, size)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--before-src", help="src/ of the code to compare with")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--search", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.search:
        data_dir, size, recall = args.search
        print(json.dumps(search_run(data_dir, int(size), recall == "1")))
        return
    here = str(Path(__file__).resolve().parents[1])
    codes = {"after": os.path.join(here, "src")}
    if args.before_src:
        codes = {"before": args.before_src, **codes}
    result: dict[str, Any] = {"benchmark": "scale", "store": "sqlite (embedded)", "sizes": []}
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            figures: dict[str, Any] = fill(size, tmp)
            figures["runs"] = []
            for _ in range(args.rounds):
                for name, src in codes.items():
                    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, here])}
                    proc = subprocess.run(
                        [sys.executable, "-m", "benchmarks.scale", "--search", tmp, str(size),
                         "1" if name == "after" else "0"],
                        capture_output=True, text=True, check=True, env=env,
                    )  # fmt: skip
                    figures["runs"].append({"code": name, **json.loads(proc.stdout)})
            figures["disk_bytes_per_memory"] = round(disk_bytes(tmp) / size)
        result["sizes"].append(figures)
        print(json.dumps(figures), file=sys.stderr, flush=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
