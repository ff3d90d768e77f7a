"""The web inspector's pages at 100k memories: server time of each page, rendered through
the real app (httpx's ASGI transport: no network, so the time is the server's), signed in
with an API key as a person would be. Prints JSON.

    uv run python -m benchmarks.ui_pages [--size 100000] [--runs 20]

The store holds ``size`` memories of one user (vectors precomputed as in memory_ops, cached
in ~/.cache/lamina-bench/), a session with messages, observations and reflections, and a
few knowledge items and policies. Target: every page ≤ 150 ms (issue 19).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.memory_ops import build_store, ms_stats
from lamina.observational.ports import NewNote

KEY = "ms_benchmark-key-0123456789abcdefghijklmnopqrstuvwxyz"


async def _seed(ms: Any) -> None:
    """A session, knowledge and policies beside the memories."""
    for i in range(200):
        role = "user" if i % 2 == 0 else "assistant"
        await ms.sessions.append("bench-chat", role, f"message {i} about dinner plans and tea")
    for i in range(30):
        await ms.store.sessions.add_note(
            "default",
            "bench-chat",
            NewNote(f"The user talked about plan {i}. " * 6, 40, 0, (0, 150)),
        )
    for i in range(3):
        await ms.store.sessions.add_note(
            "default", "bench-chat", NewNote(f"Summary {i}: dinner planning.", 8, 1, (0, 150))
        )
    for i in range(20):
        await ms.knowledge.create(
            "adr", f"Decision {i}", layer="company", status="accepted", body=f"We decided {i}."
        )
    await ms.knowledge.update("adr-0001", body="We decided again.")
    rule = {
        "id": "no-requests",
        "target": "dependency",
        "operator": "must_not_use",
        "value": "requests",
        "severity": "block",
    }
    await ms.knowledge.create(
        "policy", "No requests", layer="company", status="accepted", rules=[rule]
    )


async def measure(data_dir: str, runs: int) -> dict[str, Any]:
    from lamina.config import load_settings
    from lamina.runtime import AsyncLamina
    from lamina.server.app import LaminaServer
    from lamina.server.auth import hash_key

    keys = [{"key_hash": hash_key(KEY), "tenant_id": "default", "tier": "admin"}]
    tiers = {"admin": {"requests_per_minute": 1_000_000}}
    settings = load_settings(data_dir=data_dir, server={"api_keys": keys, "tiers": tiers})
    ms = AsyncLamina(settings)
    server = LaminaServer(ms)
    await server.start()
    out: dict[str, Any] = {}
    try:
        await _seed(ms)
        transport = httpx.ASGITransport(app=server.app)
        base = "http://127.0.0.1:8750"
        async with httpx.AsyncClient(
            transport=transport, base_url=base, headers={"origin": base}, timeout=120
        ) as client:
            form = await client.get("/ui/login")
            token = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert token is not None
            signed = await client.post("/ui/login", data={"key": KEY, "csrf": token.group(1)})
            assert signed.status_code == 303, signed.text
            first = await client.get("/ui/memories?user_id=bench&limit=25")
            ids = re.findall(r'href="/ui/memories/([0-9a-f-]{36})"', first.text)
            deep = "/ui/memories?user_id=bench&limit=25"
            for _ in range(20):  # 20 pages in: the keyset cursor keeps it as cheap
                page = await client.get(deep)
                found = re.search(r'href="(/ui/memories\?[^"]+)" rel="next"', page.text)
                assert found is not None
                deep = found.group(1).replace("&amp;", "&")
            pages = {
                "memories_overview": "/ui/memories",
                "memories_list_first_page": "/ui/memories?user_id=bench&limit=25",
                "memories_list_page_21": deep,
                "memories_list_100_per_page": "/ui/memories?user_id=bench&limit=100",
                "memories_list_metadata_filter": '/ui/memories?user_id=bench&metadata={"i":5}',
                "memories_list_time_range": (
                    "/ui/memories?user_id=bench&since=2000-01-01T00:00&until=2999-01-01T00:00"
                ),
                "search_hybrid": "/ui/search?user_id=bench&q=coffee+in+the+morning&threshold=0",
                "search_keyword": "/ui/search?user_id=bench&q=coffee&mode=keyword",
                "search_semantic": "/ui/search?user_id=bench&q=coffee&mode=semantic",
                "memory_detail": f"/ui/memories/{ids[0]}",
                "delete_all_count": "/ui/memories/delete-all?user_id=bench",
                "prompt_preview": (
                    "/ui/prompt?user_id=bench&session_key=bench-chat&q=what+about+dinner"
                ),
                "sessions": "/ui/sessions",
                "session": "/ui/sessions/bench-chat",
                "knowledge": "/ui/knowledge",
                "knowledge_item": "/ui/knowledge/adr-0001",
                "governance": "/ui/governance?layer=project&layer_id=api",
                "server": "/ui/server",
            }
            for name, path in pages.items():
                warm = await client.get(path)  # first use loads indexes and caches
                assert warm.status_code == 200, (name, warm.status_code, warm.text[:500])
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    response = await client.get(path)
                    times.append(time.perf_counter() - start)
                    assert response.status_code == 200
                out[name] = ms_stats(times)
            gov = await client.get("/ui/governance?layer=project&layer_id=api")
            token = re.search(r'name="csrf" value="([^"]+)"', gov.text)
            assert token is not None
            times = []
            for _ in range(runs):
                start = time.perf_counter()
                checked = await client.post(
                    "/ui/governance/validate",
                    data={
                        "csrf": token.group(1),
                        "layer": "project",
                        "layer_id": "api",
                        "dependencies": "requests",
                    },
                )
                times.append(time.perf_counter() - start)
                assert checked.status_code == 200
            out["governance_validate"] = ms_stats(times)
    finally:
        await server.stop()
        await ms.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = str(Path(tmp) / "data")
        built = build_store(args.size, data_dir)
        pages = asyncio.run(measure(data_dir, args.runs))
    worst = max(v["p95_ms"] for v in pages.values())
    report = {
        "benchmark": "ui_pages",
        **built,
        "runs_per_page": args.runs,
        "target_ms": 150,
        "worst_p95_ms": worst,
        "pages": pages,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
