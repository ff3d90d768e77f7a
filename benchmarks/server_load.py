"""The A2A server under load, on 127.0.0.1. Prints JSON.

A store of ``--memories`` memories (vectors precomputed), then a ``lamina serve`` process
on it, and a load generator in this process (httpx, ``--concurrency`` connections):

- ``search``: memory_search through JSON-RPC SendMessage (a direct tool call, new thread
  each), ``--requests`` requests at most and ``--seconds`` at most: sustained requests/s,
  p50 and p99 latency;
- ``sse``: SendStreamingMessage, time from sending to the first SSE event (median, p95);
- ``threads``: ``--threads`` new threads, server RSS before and after (memory per open
  thread) and the bytes each thread's state takes in the database.

    uv run python -m benchmarks.server_load [--memories 10000] [--requests 2000]
        [--seconds 60] [--concurrency 8] [--threads 1000]
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

from benchmarks.corpus import queries
from benchmarks.memory_ops import build_store, percentile

HEADERS = {"A2A-Version": "1.0"}


def _message(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"tool": tool, "arguments": arguments}}],
    }


def _envelope(method: str, message: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(values, 0.5) * 1000, 2),
        "p95_ms": round(percentile(values, 0.95) * 1000, 2),
        "p99_ms": round(percentile(values, 0.99) * 1000, 2),
    }


async def _search_load(url: str, n: int, seconds: float, concurrency: int) -> dict[str, Any]:
    texts = queries(max(50, min(n, 500)))
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    counter = iter(range(n))

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal errors
        for i in counter:
            if time.perf_counter() > deadline:
                return
            body = _envelope(
                "SendMessage",
                _message(
                    "memory_search",
                    {"query": texts[i % len(texts)], "user_id": "bench", "limit": 10},
                ),
            )
            started = time.perf_counter()
            response = await client.post("/", json=body, headers=HEADERS)
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                errors += 1
                continue
            task = response.json().get("result", {}).get("task", {})
            if task.get("status", {}).get("state") != "TASK_STATE_COMPLETED":
                errors += 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        await worker_warmup(client)
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return {
        "requests": len(latencies),
        "errors": errors,
        "concurrency": concurrency,
        "requests_per_s": round(len(latencies) / elapsed, 1),
        **_stats(latencies),
    }


async def worker_warmup(client: httpx.AsyncClient) -> None:
    for text in ("warm up", "first query"):
        await client.post(
            "/",
            json=_envelope(
                "SendMessage", _message("memory_search", {"query": text, "user_id": "bench"})
            ),
            headers=HEADERS,
        )


async def _sse(url: str, n: int) -> dict[str, Any]:
    firsts: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for i in range(n):
            body = _envelope(
                "SendStreamingMessage",
                _message("memory_search", {"query": f"stream {i}", "user_id": "bench"}),
            )
            started = time.perf_counter()
            async with client.stream(
                "POST", "/", json=body, headers={**HEADERS, "Accept": "text/event-stream"}
            ) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data:"):
                        firsts.append(time.perf_counter() - started)
                        break
                else:
                    raise RuntimeError(f"stream {i} ended without an event ({r.status_code})")
    return {"streams": n, "time_to_first_event": _stats(firsts)}


async def _threads(url: str, pid: int, data_dir: str, n: int) -> dict[str, Any]:
    before = _rss_mb(pid)
    limits = httpx.Limits(max_connections=8)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        sem = asyncio.Semaphore(8)

        async def one(i: int) -> None:
            async with sem:
                message = _message("memory_list", {"limit": 1})
                message["metadata"] = {"user_id": f"user-{i}", "project_id": f"p-{i % 50}"}
                await client.post("/", json=_envelope("SendMessage", message), headers=HEADERS)

        await asyncio.gather(*(one(i) for i in range(n)))
    after = _rss_mb(pid)
    with sqlite3.connect(Path(data_dir) / "lamina.db") as conn:
        count, size = conn.execute(
            "SELECT count(*), sum(length(context)) FROM a2a_threads"
        ).fetchone()
    return {
        "threads": n,
        "server_rss_mb_before": round(before, 1),
        "server_rss_mb_after": round(after, 1),
        "rss_kb_per_open_thread": round((after - before) * 1024 / n, 2),
        "state_bytes_per_thread_in_db": round(size / count),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1_000)
    args = parser.parse_args()
    out: dict[str, Any] = {"benchmark": "server_load", "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as data_dir:
        out["store"] = build_store(args.memories, data_dir)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lamina",
                "--data-dir",
                data_dir,
                "serve",
                "--port",
                "0",
                "--log-level",
                "warning",
            ],
            stdout=subprocess.PIPE,
            text=True,
            # A load test is not a tenant to protect the server from: lift the rate limit.
            env={
                **os.environ,
                "LAMINA_SERVER__TIERS": '{"default": {"requests_per_minute": 100000000}}',
            },
        )
        try:
            assert process.stdout is not None
            url = process.stdout.readline().strip().split()[-1].rstrip("/")
            out["server_rss_mb_started"] = round(_rss_mb(process.pid), 1)
            out["search"] = asyncio.run(
                _search_load(url, args.requests, args.seconds, args.concurrency)
            )
            out["sse"] = asyncio.run(_sse(url, args.streams))
            out["threads"] = asyncio.run(_threads(url, process.pid, data_dir, args.threads))
        finally:
            process.send_signal(signal.SIGTERM)
            process.communicate(timeout=60)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
