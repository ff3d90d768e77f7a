"""What forgetting costs on the embedded store. Prints JSON.

A SQLite store of N memories (synthetic sentences from corpus.py, random unit vectors: no
embedding model in the loop) and N A2A tasks referring to them (search results of 10 hits,
as the server stores them). Measured:

- ``delete_ms``: p50 of deleting one memory through the store (the row, its history's text,
  its cached vector, the tasks and thread records holding its text, and the write-ahead log
  checkpoint that follows) — and ``checkpoint_ms``, the checkpoint alone after a delete made
  without it;
- ``save_task_us``: p50 of saving one task (the row and its references);
- ``close_s``: closing the store after deletions (the file rebuilt, ``VACUUM``), and the file
  size it rebuilt.

    .venv/bin/python -m benchmarks.forgetting_cost [--sizes 10000,50000] [--deletes 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.corpus import sentences
from lamina.embeddings.local import LocalEmbedder
from lamina.memory.layers import MemoryLayer
from lamina.memory.ports import NewMemory, Scope
from lamina.store.sql.deletion import nothing_to_settle
from lamina.store.sql.memory_parts import MemoryParts
from lamina.store.sql.memory_writes import SqlMemoryWrites
from lamina.store.sqlite import SQLiteStore
from lamina.store.sqlite.db import SQLITE
from lamina.store.sqlite.memories import WalCheckpoint, metadata_filter
from lamina.threads.ports import StoredTask

TENANT = "bench"
SCOPE = Scope(MemoryLayer.USER, {"user_id": "bench"}, "bench")
DIMS = 384
BATCH = 2_000


def _task(task_id: str, hits: list[tuple[str, str]]) -> StoredTask:
    results = [{"memory": {"id": i, "content": c}, "score": 0.5} for i, c in hits]
    data = {
        "id": task_id,
        "contextId": "bench-thread",
        "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "a", "parts": [{"data": {"results": results}}]}],
        "history": [
            {
                "messageId": "m",
                "role": "ROLE_USER",
                "parts": [{"data": {"tool": "memory_search", "arguments": {"query": "q"}}}],
            }
        ],
    }
    return StoredTask(task_id, "bench-thread", 3, 1, json.dumps(data))


async def measure(size: int, deletes: int, root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    store = SQLiteStore(root / "lamina.db", LocalEmbedder())
    await store.initialize()
    texts = sentences(size)
    vectors = rng.standard_normal((size, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [str(uuid.uuid4()) for _ in range(size)]
    for start in range(0, size, BATCH):
        await store.memories.writes.bulk_add(
            [
                NewMemory(ids[i], TENANT, SCOPE, texts[i], {}, vectors[i].tolist())
                for i in range(start, min(size, start + BATCH))
            ]
        )
    saves = []
    for n in range(size):
        hits = [(ids[(n + k) % size], texts[(n + k) % size]) for k in range(10)]
        started = time.perf_counter()
        await store.threads.save_task(TENANT, _task(f"task-{n}", hits))
        saves.append(time.perf_counter() - started)
    timed = []
    for n in range(deletes):
        started = time.perf_counter()
        await store.memories.writes.delete(TENANT, ids[n * 7])
        timed.append(time.perf_counter() - started)
    # The store's writes but for the checkpoint after a delete, and that checkpoint alone.
    db = store._db
    parts = MemoryParts.build(
        db,
        SQLITE,
        store.embedder,
        store.embedding,
        metadata_filter=metadata_filter,
        settle=nothing_to_settle,
    )
    unsettled, checkpoint = SqlMemoryWrites(parts), WalCheckpoint(db)
    checkpoints = []
    for n in range(deletes):
        await unsettled.delete(TENANT, ids[n * 7 + 3])  # no checkpoint
        started = time.perf_counter()
        await checkpoint(1)  # the step measured alone
        checkpoints.append(time.perf_counter() - started)
    size_mb = (root / "lamina.db").stat().st_size / 1e6
    started = time.perf_counter()
    await store.shutdown()
    closed = time.perf_counter() - started
    return {
        "memories": size,
        "tasks": size,
        "file_mb": round(size_mb, 1),
        "save_task_us": round(statistics.median(saves) * 1e6),
        "delete_ms": round(statistics.median(timed) * 1e3, 2),
        "checkpoint_ms": round(statistics.median(checkpoints) * 1e3, 2),
        "close_s": round(closed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--deletes", type=int, default=50)
    args = parser.parse_args()
    out = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            out.append(asyncio.run(measure(size, args.deletes, Path(tmp))))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
