"""Candidate ANN libraries for the embedded store's large scopes, on the same vectors.

Each candidate indexes the benchmark corpus's vectors (benchmarks/corpus.py, the local
model; cached as memory_ops.py caches them) and answers the same queries (also embedded by
the model). Reported for each: recall@10 against the exact float32 scan, build time, query
p50 on one thread, the memory the index holds (resident memory grown while building, in a
fresh process each), the size of its file, and, on its own, recall@10 after an exact
float32 re-rank of its best 40 (what the store does with its finalists). Prints JSON.

    uv run --with usearch --with hnswlib --with faiss-cpu --with sqlite-vec --with apsw \\
        python -m benchmarks.ann_eval [--size 100000] [--queries 200]

The candidates are not dependencies of lamina (but for the one it uses): install them for
the evaluation only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import queries, sentences
from benchmarks.memory_ops import CACHE, corpus_vectors, rss_mb

CANDIDATES = ("usearch_i8", "usearch_f16", "hnswlib", "faiss_hnsw_sq8", "sqlite_vec_int8")
M, EF_ADD, EF_SEARCH, K, RERANK = 16, 128, 64, 10, 40


def data(size: int, n_queries: int) -> tuple[np.ndarray, np.ndarray]:
    vectors = corpus_vectors(sentences(size, numbered=True)).astype(np.float32)
    path = CACHE / f"queries-{n_queries}.npy"
    if path.is_file():
        qs = np.load(path)
    else:
        from lamina.embeddings.local import LocalEmbedder

        qs = LocalEmbedder().embed_sync(queries(n_queries, seed=5))
        np.save(path, qs)
    return vectors, qs.astype(np.float32)


def int8_codes(vectors: np.ndarray) -> np.ndarray:
    from lamina.store.sqlite.compact import quantize

    return quantize(vectors)[0]


def build(name: str, vectors: np.ndarray, path: str) -> Any:
    keys = np.arange(len(vectors), dtype=np.uint64)
    if name.startswith("usearch"):
        from usearch.index import Index

        dtype = name.split("_")[1]
        index = Index(
            ndim=vectors.shape[1],
            metric="cos",
            dtype=dtype,
            connectivity=M,
            expansion_add=EF_ADD,
            expansion_search=EF_SEARCH,
        )
        index.add(keys, int8_codes(vectors) if dtype == "i8" else vectors, threads=2)
        index.save(path)
        return index
    if name == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="ip", dim=vectors.shape[1])
        index.init_index(max_elements=len(vectors), M=M, ef_construction=EF_ADD)
        index.add_items(vectors, keys.astype(np.int64), num_threads=2)
        index.set_ef(EF_SEARCH)
        index.save_index(path)
        return index
    if name == "faiss_hnsw_sq8":
        import faiss

        faiss.omp_set_num_threads(2)
        index = faiss.IndexHNSWSQ(
            vectors.shape[1], faiss.ScalarQuantizer.QT_8bit, M, faiss.METRIC_INNER_PRODUCT
        )
        index.hnsw.efConstruction = EF_ADD
        index.train(vectors)
        index.add(vectors)
        index.hnsw.efSearch = EF_SEARCH
        faiss.write_index(index, path)
        faiss.omp_set_num_threads(1)
        return index
    import apsw
    import sqlite_vec

    conn = apsw.Connection(path)
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(
        f"CREATE VIRTUAL TABLE v USING vec0(embedding int8[{vectors.shape[1]}] "
        "distance_metric=cosine)"
    )
    codes = int8_codes(vectors)
    with conn:
        conn.executemany(
            "INSERT INTO v(rowid, embedding) VALUES (?, vec_int8(?))",
            ((i, codes[i].tobytes()) for i in range(len(codes))),
        )
    return conn


def search(name: str, index: Any, query: np.ndarray, k: int) -> np.ndarray:
    if name.startswith("usearch"):
        q = int8_codes(query[None, :])[0] if name.endswith("i8") else query
        return np.asarray(index.search(q, k, threads=1).keys, dtype=np.int64)
    if name == "hnswlib":
        labels, _ = index.knn_query(query[None, :], k=k, num_threads=1)
        return np.asarray(labels[0], dtype=np.int64)
    if name == "faiss_hnsw_sq8":
        _, labels = index.search(query[None, :], k)
        return np.asarray(labels[0], dtype=np.int64)
    q = int8_codes(query[None, :])[0].tobytes()
    found = index.execute(
        "SELECT rowid FROM v WHERE embedding MATCH vec_int8(?) AND k = ? ORDER BY distance", (q, k)
    ).fetchall()
    return np.array([r[0] for r in found], dtype=np.int64)


def evaluate(name: str, size: int, n_queries: int) -> dict[str, Any]:
    vectors, qs = data(size, n_queries)
    truth = [np.argsort(-(vectors @ q), kind="stable")[:K] for q in qs]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "index")
        before = rss_mb()
        start = time.perf_counter()
        index = build(name, vectors, path)
        built = time.perf_counter() - start
        grown = rss_mb() - before
        times, recall, reranked = [], [], []
        for q, true in zip(qs, truth, strict=True):
            start = time.perf_counter()
            found = search(name, index, q, K)
            times.append(time.perf_counter() - start)
            recall.append(len(set(found.tolist()) & set(true.tolist())) / K)
            wide = search(name, index, q, RERANK)
            best = wide[np.argsort(-(vectors[wide] @ q), kind="stable")[:K]]
            reranked.append(len(set(best.tolist()) & set(true.tolist())) / K)
        file_bytes = sum(p.stat().st_size for p in Path(tmp).iterdir())
    return {
        "candidate": name,
        "recall@10": round(float(np.mean(recall)), 4),
        f"recall@10_after_exact_rerank_of_{RERANK}": round(float(np.mean(reranked)), 4),
        "build_s": round(built, 1),
        "query_p50_ms": round(float(np.median(times)) * 1000, 3),
        "memory_grown_mb": round(grown, 1),
        "file_mb": round(file_bytes / 2**20, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--only", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(evaluate(args.only, args.size, args.queries)))
        return
    data(args.size, args.queries)  # cached before the candidates run, each in a new process
    out: dict[str, Any] = {"benchmark": "ann_eval", "size": args.size, "results": []}
    me = [sys.executable, "-m", "benchmarks.ann_eval", "--size", str(args.size)]
    for name in CANDIDATES:
        proc = subprocess.run(
            [*me, "--queries", str(args.queries), "--only", name],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode:
            out["results"].append({"candidate": name, "error": proc.stderr.strip()[-300:]})
        else:
            out["results"].append(json.loads(proc.stdout))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
