"""Disk per memory and per one-shot A2A request on the embedded store (issue 35). Prints JSON.

- ``store``: ``--memories`` memories stored as ``memory.add`` stores them (each text embedded
  through the store's ``generate_embedding``, which caches it, then written), the file
  checkpointed and measured with SQLite's ``dbstat``: bytes per memory split into the
  memories table (its vectors counted apart), its indexes, the history, the embedding cache
  and the rest.
- ``server``: a ``lamina serve`` process on that file; ``--requests`` one-shot tool calls of
  each kind through JSON-RPC SendMessage (a new thread each): ``memory_search`` (limit 10),
  ``memory_add``, ``memory_get`` (a memory that exists); the bytes the A2A tables and their
  indexes (threads, tasks, task references) grew by, per request.

``--baseline SRC`` runs the same measurements again with another checkout's ``src`` first on
the import path (the code before a change), in a child process, and prints both::

    .venv/bin/python -m benchmarks.disk --memories 10000 --requests 300 --baseline ../main/src
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from benchmarks.corpus import queries, sentences

HEADERS = {"A2A-Version": "1.0"}
_A2A = ("a2a_",)


def _sizes(path: Path) -> dict[str, int]:
    """Bytes of each table and index of the file (``dbstat``), after a checkpoint."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        found = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master").fetchall())
    out: dict[str, int] = {}
    for name, size in found:
        table = owner.get(name, name)
        if name.startswith("sqlite_autoindex_"):
            table = name.removeprefix("sqlite_autoindex_").rsplit("_", 1)[0]
        key = table if table == name else f"{table} (index {name})"
        out[key] = int(size)
    return out


def _vector_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(memories)")}
        parts = [
            f"coalesce(sum(length({c})), 0)"
            for c in ("embedding", "context_embedding")
            if c in columns
        ]
        return int(conn.execute(f"SELECT {' + '.join(parts)} FROM memories").fetchone()[0])  # noqa: S608


def _split(sizes: dict[str, int], vectors: int, n: int) -> dict[str, Any]:
    groups = {"memories_table": 0, "memories_indexes": 0, "history": 0, "cache": 0, "other": 0}
    for key, size in sizes.items():
        if key == "memories":
            groups["memories_table"] += size
        elif key.startswith("memories (index"):
            groups["memories_indexes"] += size
        elif key.startswith("memory_history"):
            groups["history"] += size
        elif key.startswith("embedding_cache"):
            groups["cache"] += size
        else:
            groups["other"] += size
    total = sum(sizes.values())
    per = {f"{k}_bytes_per_memory": round(v / n) for k, v in groups.items()}
    return {
        "bytes_per_memory": round(total / n),
        **per,
        "vectors_in_table_bytes_per_memory": round(vectors / n),
        "memories_table_without_vectors_bytes_per_memory": round(
            (groups["memories_table"] - vectors) / n
        ),
    }


def build(data_dir: str, n: int) -> dict[str, Any]:
    """``n`` memories of one user, each embedded through the store (cached) and written."""
    from lamina import Lamina
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope

    texts = sentences(n, numbered=True)
    scope = Scope(MemoryLayer.USER, {"user_id": "bench"}, "bench")
    with Lamina(data_dir=data_dir) as ms:
        store = ms.aio.store
        started = time.perf_counter()
        for lo in range(0, n, 500):
            part = texts[lo : lo + 500]
            vectors = ms._run(store.memories.embeddings.generate_embedding("default", part))
            batch = [
                NewMemory(str(uuid.uuid4()), "default", scope, t, {"i": lo + i}, vectors[i])
                for i, t in enumerate(part)
            ]
            ms._run(store.memories.writes.bulk_add(batch))
        seconds = time.perf_counter() - started
    path = Path(data_dir) / "lamina.db"
    out = _split(_sizes(path), _vector_bytes(path), n)
    return {"memories": n, "load_s": round(seconds, 1), "file_bytes": path.stat().st_size, **out}


def _serve(data_dir: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "lamina", "--data-dir", data_dir),
            *("serve", "--port", "0", "--log-level", "warning"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "LAMINA_SERVER__TIERS": '{"default": {"requests_per_minute": 10000000}}',
        },
    )


def _message(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"tool": tool, "arguments": arguments}}],
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def _calls(url: str, tool: str, n: int, memory_id: str) -> int:
    texts = queries(max(n, 50))
    arguments = {
        "memory_search": lambda i: {"query": texts[i], "user_id": "bench", "limit": 10},
        "memory_add": lambda i: {
            "content": f"{texts[i]} (a note {uuid.uuid4().hex[:6]})",
            "layer": "user",
            "user_id": "writer",
        },
        "memory_get": lambda i: {"memory_id": memory_id},
    }[tool]
    errors = 0
    async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=60) as client:
        for i in range(n):
            body = (await client.post("/", json=_message(tool, arguments(i)))).json()
            task = body.get("result", {}).get("task", {})
            errors += task.get("status", {}).get("state") != "TASK_STATE_COMPLETED"
    return errors


def server(data_dir: str, n: int) -> dict[str, Any]:
    path = Path(data_dir) / "lamina.db"
    with sqlite3.connect(path) as conn:
        (memory_id,) = conn.execute("SELECT id FROM memories LIMIT 1").fetchone()
    out: dict[str, Any] = {"requests_per_kind": n}
    for tool in ("memory_search", "memory_add", "memory_get"):
        before = _a2a(_sizes(path))
        process = _serve(data_dir)
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip().split()[-1].rstrip("/")
            errors = asyncio.run(_calls(url, tool, n, memory_id))
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
        after = _a2a(_sizes(path))
        grown = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        out[tool] = {
            "bytes_per_request": round(sum(grown.values()) / n),
            "by_table": {k: round(v / n) for k, v in sorted(grown.items()) if v},
            "not_completed": errors,
        }
    return out


def _a2a(sizes: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in sizes.items() if k.startswith(_A2A)}


def measure(memories: int, requests: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data_dir:
        out: dict[str, Any] = {"store": build(data_dir, memories)}
        if requests:
            out["server"] = server(data_dir, requests)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300, help="one-shot calls per kind")
    parser.add_argument("--baseline", help="another checkout's src directory (before)")
    parser.add_argument("--json-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    out: dict[str, Any] = {"benchmark": "disk"}
    if args.baseline:
        src = str(Path(args.baseline).resolve())
        child = subprocess.run(
            [
                *(sys.executable, "-m", "benchmarks.disk", "--json-only"),
                *("--memories", str(args.memories), "--requests", str(args.requests)),
            ],
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join([src, os.getcwd()]),
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            capture_output=True,
            text=True,
            check=True,
        )
        out["before"] = json.loads(child.stdout)
        out["before"]["src"] = src
    out["after" if args.baseline else "result"] = measure(args.memories, args.requests)
    print(json.dumps(out if not args.json_only else out["result"], indent=2))


if __name__ == "__main__":
    main()
