"""The A2A server under load, on 127.0.0.1. Prints JSON.

A store of ``--memories`` memories (vectors precomputed), then a ``lamina serve`` process
on it, and a load generator in this process (``--concurrency`` connections; the lean client
of ``benchmarks.http_load`` for search, add and get, httpx for the rest):

- ``search``: memory_search through JSON-RPC SendMessage (a direct tool call, new thread
  each), ``--requests`` requests at most and ``--seconds`` at most: sustained requests/s,
  p50 and p99 latency;
- ``add``: memory_add the same way (a new memory each, user layer);
- ``get``: memory_get of an id that does not exist (answers null): what the server itself
  costs per request (HTTP, gate, A2A, thread, task), with next to no tool work;
- ``sse``: SendStreamingMessage, time from sending to the first SSE event (median, p95);
- ``threads``: ``--threads`` new threads, server RSS before and after (memory per open
  thread) and the bytes each thread's state takes in the database.

With ``--database-url`` the store is PostgreSQL and ``--processes 1,2`` runs search and add
against one server process, then two (the load spread over them), in one run.
``--workers N`` starts each server as ``lamina serve --workers N`` (N processes on its one
address; CPU figures include them). ``--baseline PATH/src`` also starts the servers of that
source tree (a baseline checkout, ``git archive main src | tar -x -C PATH``) on a copy of the
store; search, add and get then run on both in turns, ``--rounds`` times (the order
reversed each round), each figure the median of the rounds (``baseline_processes_N``).

CPU per request is the steady state: each part first sends a warm-up search on every one of
its connections at once (so every worker process has loaded its model and indexes), then
waits until the servers are idle (their start-up, a worker's imports included, done), and
only then counts CPU and requests.

    uv run python -m benchmarks.server_load [--memories 10000] [--requests 2000]
        [--seconds 60] [--concurrency 8] [--threads 1000] [--only search,add,get]
        [--database-url postgresql://...] [--processes 1,2] [--workers 2]
        [--baseline /tmp/base/src] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from benchmarks.corpus import queries
from benchmarks.http_load import Connection
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


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process and its running children (the worker
    processes of ``serve --workers``) have used: a figure that the other work on a shared
    machine does not change, unlike requests/s."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(entry.name) == pid or int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


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


def _search_args(texts: list[str], i: int) -> dict[str, Any]:
    return {"query": texts[i % len(texts)], "user_id": "bench", "limit": 10}


def _add_args(texts: list[str], i: int) -> dict[str, Any]:
    return {"content": f"{texts[i % len(texts)]} (note {i})", "layer": "user", "user_id": "b2"}


def _get_args(texts: list[str], i: int) -> dict[str, Any]:
    return {"memory_id": f"missing-{i}"}


ARGUMENTS = {"memory_search": _search_args, "memory_add": _add_args, "memory_get": _get_args}


def _server_cpu(pids: list[int]) -> float:
    return sum(_cpu_s(pid) for pid in pids)


async def _quiet(pids: list[int]) -> None:
    """Wait (two minutes at most) until the servers use under 5 % of a core over half a
    second: a worker still starting (importing, opening the store) is not counted in the
    requests' CPU."""
    deadline = time.perf_counter() + 120.0
    while time.perf_counter() < deadline:
        before = _server_cpu(pids)
        await asyncio.sleep(0.5)
        if _server_cpu(pids) - before < 0.025:
            return


async def _tool_load(
    urls: list[str], pids: list[int], tool: str, n: int, seconds: float, concurrency: int
) -> dict[str, Any]:
    """``n`` calls of ``tool`` (at most ``seconds``) over ``concurrency`` connections, spread
    evenly over the servers at ``urls``; after the warm-up, the servers' CPU seconds
    (``server_cpu_s``) and this process's (``client_cpu_s``) while they ran. The requests
    go through ``benchmarks.http_load`` (httpx's bytes for a tenth of its CPU: the load
    generator shares the cores with the servers)."""
    texts = queries(max(50, min(n, 500)))
    if tool == "memory_add":  # new content in every run: never an exact duplicate of a past one
        run = uuid.uuid4().hex[:8]
        texts = [f"{text} [{run}]" for text in texts]
    arguments = ARGUMENTS[tool]
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    counter = iter(range(n))

    async def worker(connection: Connection) -> None:
        nonlocal errors
        for i in counter:
            if time.perf_counter() > deadline:
                return
            body = _envelope("SendMessage", _message(tool, arguments(texts, i)))
            started = time.perf_counter()
            status, answer = await connection.post("/", body)
            latencies.append(time.perf_counter() - started)
            if status != 200:
                errors += 1
                continue
            task = json.loads(answer).get("result", {}).get("task", {})
            if task.get("status", {}).get("state") != "TASK_STATE_COMPLETED":
                errors += 1

    connections = [Connection(urls[k % len(urls)], HEADERS) for k in range(concurrency)]
    try:
        await worker_warmup(connections)
        await _quiet(pids)
        server_before, client_before = _server_cpu(pids), time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(worker(connection) for connection in connections))
        elapsed = time.perf_counter() - started
        server_cpu = _server_cpu(pids) - server_before
        client_cpu = time.process_time() - client_before
    finally:
        for connection in connections:
            await connection.aclose()
    return {
        "requests": len(latencies),
        "errors": errors,
        "concurrency": concurrency,
        "servers": len(urls),
        "requests_per_s": round(len(latencies) / elapsed, 1),
        **_stats(latencies),
        "elapsed_s": elapsed,
        "server_cpu_s": server_cpu,
        "client_cpu_s": client_cpu,
    }


async def worker_warmup(connections: list[Connection]) -> None:
    """Two searches on each connection, all connections at once: every server process the
    connections reach (``serve --workers``) loads its model and indexes."""

    async def search(connection: Connection, text: str) -> None:
        body = _envelope(
            "SendMessage", _message("memory_search", {"query": text, "user_id": "bench"})
        )
        await connection.post("/", body)

    for text in ("warm up", "first query"):
        await asyncio.gather(*(search(connection, text) for connection in connections))


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


def _serve(
    data_dir: str, database_url: str | None, workers: int = 1, src: str | None = None
) -> subprocess.Popen[str]:
    """``lamina serve`` on ``data_dir``; ``src``: lamina's sources from that folder (a
    baseline checkout's ``src``) instead of this environment's."""
    extra = ["--database-url", database_url] if database_url else []
    serve = ["--workers", str(workers)] if workers > 1 else []
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lamina",
            "--data-dir",
            data_dir,
            *extra,
            "serve",
            *serve,
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
            **({"PYTHONPATH": src} if src else {}),
        },
    )


def _stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        process.communicate(timeout=60)


def _backend_cpu(database_url: str | None) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend serving the benchmark's database (none for
    SQLite): the database's share of a request, which server CPU leaves out."""
    if database_url is None:
        return {}
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
    out: dict[int, float] = {}
    for (pid,) in rows:
        with contextlib.suppress(OSError):  # ended meanwhile
            out[pid] = _cpu_s(pid)
    return out


#: A server (or several) under load: its label in the output, URLs and process ids.
Target = tuple[str, list[str], list[int]]


def _loads(targets: list[Target], args: argparse.Namespace, parts: set[str]) -> dict[str, Any]:
    """Each part's load on each target, the targets taking turns (``--rounds`` each, the
    order reversed every round); CPU per request of the servers, the load generator (this
    process, on the same cores) and the database backends, and the cores they kept busy
    together. With several rounds, each figure is the median of the rounds."""
    out: dict[str, Any] = {label: {} for label, _, _ in targets}
    for part, tool in (("search", "memory_search"), ("add", "memory_add"), ("get", "memory_get")):
        if part not in parts:
            continue
        rounds: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in targets}
        for r in range(args.rounds):
            for label, urls, pids in targets if r % 2 == 0 else targets[::-1]:
                rounds[label].append(_load(urls, pids, tool, args))
        for label, results in rounds.items():
            out[label][part] = _median(results)
    return out


def _load(urls: list[str], pids: list[int], tool: str, args: argparse.Namespace) -> dict[str, Any]:
    db_before = _backend_cpu(args.database_url)
    result = asyncio.run(
        _tool_load(urls, pids, tool, args.requests, args.seconds, args.concurrency)
    )
    elapsed = result.pop("elapsed_s")
    used, client = result.pop("server_cpu_s"), result.pop("client_cpu_s")
    db_after = _backend_cpu(args.database_url)
    # The database's figure includes the warm-up requests: a few in a thousand.
    database = sum(cpu - db_before.get(pid, 0.0) for pid, cpu in db_after.items())
    per = 1000 / result["requests"]
    result["server_cpu_ms_per_request"] = round(used * per, 2)
    result["client_cpu_ms_per_request"] = round(client * per, 2)
    if args.database_url:
        result["database_cpu_ms_per_request"] = round(database * per, 2)
    result["busy_cores"] = round((used + client + database) / elapsed, 2)
    return result


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One round's result as it is; several rounds' as the median of each figure, with
    each round's requests/s and server CPU per request."""
    if len(results) == 1:
        return results[0]
    out = {key: statistics.median(r[key] for r in results) for key in results[0]}
    out["rounds"] = [
        {k: r[k] for k in ("requests_per_s", "p50_ms", "server_cpu_ms_per_request")}
        for r in results
    ]
    return out


def _run(
    sources: dict[str, tuple[str, str | None]],
    count: int,
    args: argparse.Namespace,
    parts: set[str],
) -> dict[str, Any]:
    """``count`` servers of each source (label: data folder, src folder or None), loaded;
    the sse and threads parts on this checkout's server only."""
    started: dict[str, list[subprocess.Popen[str]]] = {}
    try:
        for label, (data_dir, src) in sources.items():
            started[label] = [
                _serve(data_dir, args.database_url, args.workers, src) for _ in range(count)
            ]
        targets: list[Target] = []
        for label, processes in started.items():
            urls = []
            for process in processes:
                assert process.stdout is not None
                urls.append(process.stdout.readline().strip().split()[-1].rstrip("/"))
            targets.append((label, urls, [p.pid for p in processes]))
        runs = {
            label: {"server_rss_mb_started": round(_rss_mb(pids[0]), 1)}
            for label, _, pids in targets
        }
        for label, figures in _loads(targets, args, parts).items():
            runs[label].update(figures)
        _, urls, pids = targets[-1]
        run, data_dir = runs[""], sources[""][0]
        if count == 1 and "sse" in parts:
            run["sse"] = asyncio.run(_sse(urls[0], args.streams))
        if count == 1 and "threads" in parts and not args.database_url:
            run["threads"] = asyncio.run(_threads(urls[0], pids[0], data_dir, args.threads))
    finally:
        for processes in started.values():
            _stop(processes)
    return {f"{label}processes_{count}": run for label, run in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1_000)
    parser.add_argument("--only", default="search,add,get,sse,threads")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--processes", default="1")
    parser.add_argument("--workers", type=int, default=1, help="serve --workers of each server")
    parser.add_argument(
        "--baseline",
        default=None,
        help="a baseline's src folder: its servers take turns with these (SQLite only; "
        "search, add and get), on a copy of the same store",
    )
    parser.add_argument("--rounds", type=int, default=1, help="turns of each part")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    if args.baseline and args.database_url:
        parser.error("--baseline compares on SQLite only")
    out: dict[str, Any] = {"benchmark": "server_load", "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as data_dir, tempfile.TemporaryDirectory() as copy:
        out["store"] = build_store(args.memories, data_dir, args.database_url)
        out["store"]["kind"] = "postgresql" if args.database_url else "sqlite"
        sources: dict[str, tuple[str, str | None]] = {"": (data_dir, None)}
        if args.baseline:
            shutil.copytree(data_dir, copy, dirs_exist_ok=True)
            sources = {"baseline_": (copy, args.baseline), **sources}
        for count in [int(n) for n in args.processes.split(",")]:
            out.update(_run(sources, count, args, parts))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
