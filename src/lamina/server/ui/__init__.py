"""The web inspector at /ui (docs/ui.md): server-rendered pages over the same runtime, keys
and tenants as the API. ``inspector_routes`` is all the server needs."""

from __future__ import annotations

from starlette.routing import BaseRoute

from lamina.runtime import AsyncLamina
from lamina.server.auth import KeyRing
from lamina.server.ratelimit import RateLimiter
from lamina.server.ui import (
    knowledge,
    login,
    memories,
    memory,
    owners,
    prompt,
    search,
    sessions,
    static,
    status,
)
from lamina.server.ui.base import PREFIX, Inspector
from lamina.threads.service import ThreadService

__all__ = ["PREFIX", "Inspector", "inspector_routes"]


def inspector_routes(
    ms: AsyncLamina,
    keys: KeyRing,
    limiter: RateLimiter,
    *,
    max_body: int,
    threads: ThreadService,
) -> tuple[Inspector, list[BaseRoute]]:
    ui = Inspector(ms, keys, limiter, max_body=max_body, threads=threads)
    routes: list[BaseRoute] = [*static.routes(ui), *login.routes(ui)]
    for module in (memories, owners, memory, search, prompt, sessions, knowledge, status):
        routes += module.routes(ui)
    return ui, [*routes, *static.fallback(ui)]
