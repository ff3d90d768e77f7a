"""The server: one AsyncLamina behind HTTP. Builds the tool registry, the dispatcher, the
thread service, the A2A adapter and the gate (its middleware, composed here in order), and
owns their lifecycles."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from importlib.metadata import version as package_version

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from lamina.errors import ErrorCode, LaminaError
from lamina.llm.base import ChatModel
from lamina.metrics import ServerMetrics
from lamina.runtime import AsyncLamina
from lamina.server.a2a import A2AAdapter
from lamina.server.a2a.numbers import WholeNumbers
from lamina.server.auth import KeyRing
from lamina.server.health import health, summary
from lamina.server.middleware import (
    A2A_GROUPS,
    ApiKeys,
    BodyLimit,
    BufferBody,
    HttpMetrics,
    JsonContentType,
    RateLimit,
    StrictJson,
    VersionWarning,
    route_group,
)
from lamina.server.ratelimit import RateLimiter
from lamina.server.router import LLMRouter
from lamina.server.skills import Dispatcher
from lamina.server.tools import ServerTool, all_tools
from lamina.server.tools.registry import ToolRegistry
from lamina.server.ui import Inspector, inspector_routes

log = logging.getLogger("lamina.server")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: KeyRing) -> None:
    """Without API keys the server serves one tenant to whoever connects: loopback only."""
    if not keys.enabled and not is_loopback(host):
        raise LaminaError(
            ErrorCode.CONFIGURATION_ERROR,
            f"refusing to listen on {host} without API keys: anyone who reaches it would read "
            "and change all memories. Configure server.api_keys (lamina keys new), or "
            "bind to 127.0.0.1.",
            details={"host": host},
        )


def gate_middleware(
    *,
    keys: KeyRing,
    default_tenant: str,
    limiter: RateLimiter,
    metrics: ServerMetrics,
    max_body: int,
    skill_for_tool: Callable[[str], str],
) -> list[Middleware]:
    """The gate in front of every route (of ``lamina serve`` and ``lamina mcp --transport
    http``), outermost first: the request metric counts every answer, refusals included; the
    body is read at most once (by the first check that needs it) and replayed; then API key
    (401, 403), the A2A version warning, body size (413), content type (415), rate limits
    (429) and strict JSON (400, -32700), in that order."""
    return [
        Middleware(HttpMetrics, metrics=metrics),
        Middleware(BufferBody, max_bytes=max_body),
        Middleware(ApiKeys, keys=keys, default_tenant=default_tenant),
        Middleware(VersionWarning),
        Middleware(BodyLimit),
        Middleware(JsonContentType),
        Middleware(RateLimit, limiter=limiter, metrics=metrics, skill_for_tool=skill_for_tool),
        Middleware(StrictJson),
    ]


class LaminaServer:
    def __init__(
        self,
        ms: AsyncLamina,
        *,
        router_model: ChatModel | None = None,
        close_runtime: bool = False,
    ) -> None:
        """``close_runtime``: close ``ms`` when the app stops (a worker process's own)."""
        self.ms = ms
        self._close_runtime = close_runtime
        settings = ms.settings.server
        self.settings = settings
        self.keys = KeyRing(settings.api_keys)
        self.registry = ToolRegistry(all_tools(ms))
        self.metrics = ms.metrics.server()
        self.threads = ms.thread_service(
            on_cleanup=lambda counts: self.metrics.record_cleanup(asdict(counts))
        )
        self.router = self._router(router_model)
        self.dispatcher = Dispatcher(ms, self.registry, self.threads, self.metrics, self.router)
        self.limiter = RateLimiter(settings)
        url = settings.public_url or f"http://{settings.host}:{settings.port}/"
        self.a2a = A2AAdapter(
            ms,
            self.dispatcher,
            url=url,
            auth=self.keys.enabled,
            version=package_version("lamina"),
            fixed_url=settings.public_url is not None,
        )
        self.inspector: Inspector | None = None
        ui_routes: list[BaseRoute] = []
        if settings.ui == "on" or (settings.ui == "auto" and is_loopback(settings.host)):
            self.inspector, ui_routes = inspector_routes(
                ms,
                self.keys,
                self.limiter,
                max_body=settings.max_body_bytes,
                threads=self.threads,
            )
        rpc, *a2a_routes = self.a2a.routes()
        self.app = Starlette(
            # JSON-RPC's POST / first: most requests take it, and each route tried before
            # the one that matches costs a regular expression (the inspector has 26). No
            # other route answers POST /, so the order changes nothing else.
            routes=[
                rpc,
                Route("/health", self._health, methods=["GET"]),
                Route("/metrics", self._metrics, methods=["GET"]),
                *ui_routes,
                *a2a_routes,
            ],
            middleware=[
                *gate_middleware(
                    keys=self.keys,
                    default_tenant=ms.settings.tenant_id,
                    limiter=self.limiter,
                    metrics=self.metrics,
                    max_body=settings.max_body_bytes,
                    skill_for_tool=self.registry.skill_of,
                ),
                Middleware(
                    WholeNumbers,
                    applies=lambda path, method: route_group(path, method) in A2A_GROUPS,
                ),
            ],
            lifespan=self._lifespan,
        )

    def _router(self, given: ChatModel | None) -> LLMRouter | None:
        if not self.settings.llm_router:
            return None
        if given is None:
            llm = self.ms.settings.llm
            if not (self.settings.router_model or llm.model):
                return None
            from lamina.llm import build_chat_model

            given = build_chat_model(
                llm.model_copy(update={"model": self.settings.router_model or llm.model})
            )
        return LLMRouter(given, self.registry.all)

    def register_tool(self, tool: ServerTool) -> None:
        """Offer one more tool: the card lists it from the next request on."""
        self.registry.register(tool)

    async def start(self) -> None:
        await self.ms.start()
        self.metrics.threads_active.set(await self.threads.recover())
        self.threads.start()
        if self.inspector is not None:
            self.inspector.start()

    async def stop(self) -> None:
        if self.inspector is not None:
            await self.inspector.stop()
        await self.threads.stop()
        await self.a2a.aclose()
        await self.limiter.aclose()
        if self.router is not None:
            await self.router.aclose()
        if self._close_runtime:
            await self.ms.close()

    @contextlib.asynccontextmanager
    async def _lifespan(self, _: Starlette) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()

    async def _health(self, request: Request) -> Response:
        report = await health(self.ms, self.threads.active)
        if not request.scope.get("lamina.health_detail", False):
            report = summary(report)
        return JSONResponse(report, status_code=200 if report["status"] == "up" else 503)

    async def _metrics(self, _: Request) -> Response:
        try:
            self.metrics.threads_active.set(await self.threads.active())
        except LaminaError as exc:
            log.warning("metrics: cannot count threads: %s", exc)
        return PlainTextResponse(
            self.ms.metrics_text(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )
