"""GET /health: every dependency with its status and how long its check took."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lamina.errors import LaminaError
from lamina.runtime import AsyncLamina

PROBE_TENANT = "__health__"
TIMEOUT = 5.0


async def _check(fn: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        detail = await asyncio.wait_for(fn(), TIMEOUT)
        status = "down" if detail.pop("down", False) else "up"
    except TimeoutError:
        detail, status = {"error": f"no answer within {TIMEOUT:g} s"}, "down"
    except LaminaError as exc:
        detail, status = {"error": f"{exc.code.value}: {exc.message}"}, "down"
    except Exception as exc:  # a health check reports, it does not raise
        detail, status = {"error": type(exc).__name__}, "down"
    return {
        "status": status,
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        **detail,
    }


async def health(ms: AsyncLamina, active_threads: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    async def database() -> dict[str, Any]:
        status = await ms.check_database()
        return {"down": not status.healthy, "backend": ms.settings.store_kind(), **status.details}

    async def memory_store() -> dict[str, Any]:
        page = await ms.memory.list(user_id="probe", limit=1, tenant_id=PROBE_TENANT)
        return {"read": True, "probe_rows": page.total_count}

    async def knowledge_repository() -> dict[str, Any]:
        found = await ms.knowledge.check()
        found["repository"] = found.pop("status", None)
        return {"down": not found.get("healthy", False), **found}

    async def embedder() -> dict[str, Any]:
        vectors = await ms.embedder.embed(["health check"])
        return {"model": ms.embedder.model_id, "dimensions": len(vectors[0])}

    async def threads() -> dict[str, Any]:
        return {"active": await active_threads()}

    names = ("database", "memory_store", "knowledge_repository", "embedder", "threads")
    results = await asyncio.gather(
        *(_check(f) for f in (database, memory_store, knowledge_repository, embedder, threads))
    )
    checks = dict(zip(names, results, strict=True))
    healthy = all(c["status"] == "up" for c in checks.values())
    return {"status": "up" if healthy else "down", "checks": checks}


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """The report without its details (paths, counts across tenants, errors): what anyone
    may see, each check's status and latency."""
    return {
        "status": report["status"],
        "checks": {
            name: {"status": check["status"], "latency_ms": check["latency_ms"]}
            for name, check in report["checks"].items()
        },
    }
