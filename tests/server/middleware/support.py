"""What the middleware tests share: the app behind the gate (it answers with what it was
given), gates built from the real middleware, and an httpx client over ASGI."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from lamina.config import ServerSettings
from lamina.metrics import Metrics
from lamina.server.app import gate_middleware
from lamina.server.auth import KeyRing, hash_key
from lamina.server.middleware import wrap
from lamina.server.middleware.request import HEALTH_DETAIL, PARSED_JSON, PRINCIPAL
from lamina.server.ratelimit import RateLimiter

KEYS = {"acme": "k-acme-0123456789", "root": "k-root-0123456789", "busy": "k-busy-0123456789"}
TOOL_SKILLS = {"memory_add": "memory", "policy_check": "governance"}


async def echo(scope: Scope, receive: Receive, send: Send) -> None:
    """The app behind the gate: answers 200 with the body it received (message by message)
    and what the gate left in the scope."""
    chunks: list[str] = []
    more = True
    while more:
        message = await receive()
        chunks.append(message.get("body", b"").decode("latin-1"))
        more = bool(message.get("more_body", False))
    principal = scope.get(PRINCIPAL)
    seen = {
        "chunks": chunks,
        "tenant": principal.tenant if principal else None,
        "tier": principal.tier if principal else None,
        "json": scope.get(PARSED_JSON, "absent"),
        "detail": scope.get(HEALTH_DETAIL, "absent"),
    }
    body = json.dumps(seen).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def settings(*, keys: bool = True, max_body: int = 1000, **tiers: Any) -> ServerSettings:
    """Keys: acme (tier default), root (admin), busy (tier busy); ``tiers`` beside those."""
    api_keys = [
        {"key_hash": hash_key(KEYS["acme"]), "tenant_id": "acme", "tier": "default"},
        {"key_hash": hash_key(KEYS["root"]), "tenant_id": "root", "tier": "admin"},
        {"key_hash": hash_key(KEYS["busy"]), "tenant_id": "busy", "tier": "busy"},
    ]
    return ServerSettings.model_validate(
        {
            "api_keys": api_keys if keys else [],
            "max_body_bytes": max_body,
            "tiers": {"default": {"requests_per_minute": 10_000}, **tiers},
        }
    )


class Gate:
    """The whole gate as ``lamina serve`` composes it (``gate_middleware``), before ``app``."""

    def __init__(self, settings: ServerSettings, app: ASGIApp = echo) -> None:
        self.registry = Metrics()
        self.metrics = self.registry.server()
        self.limiter = RateLimiter(settings)
        middleware = gate_middleware(
            keys=KeyRing(settings.api_keys),
            default_tenant="solo",
            limiter=self.limiter,
            metrics=self.metrics,
            max_body=settings.max_body_bytes,
            skill_for_tool=lambda tool: TOOL_SKILLS.get(tool, "knowledge"),
        )
        self.asgi = wrap(app, middleware)

    def count(self, name: str, **labels: str) -> float:
        """The sum of the samples called ``name`` with these labels (0 when there is none)."""
        return sum(
            s.value
            for s in self.registry.samples(name.removesuffix("_total"))
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )


def client(app: ASGIApp, *, raise_app_exceptions: bool = True) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app, raise_app_exceptions=raise_app_exceptions)
    return httpx.AsyncClient(transport=transport, base_url="http://gate.test")


def call(app: ASGIApp, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request to ``app`` over ASGI, on an event loop of its own."""

    async def scenario() -> httpx.Response:
        async with client(app) as c:
            return await c.request(method, path, **kwargs)

    return asyncio.run(scenario())


def stack(*middleware: Middleware, app: ASGIApp = echo) -> ASGIApp:
    """``app`` behind only the middleware named, the first outermost."""
    return wrap(app, list(middleware))


def auth(key: str) -> dict[str, str]:
    return {"x-api-key": KEYS[key]}


def rpc(rpc_id: Any = "r-1", tool: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"data": {"tool": tool}} if tool else {"text": "hello"}
    message = {"role": "ROLE_USER", "parts": [part], "messageId": "m-1"}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "SendMessage", "params": {"message": message}}


def seen(response: httpx.Response) -> dict[str, Any]:
    """What the app behind the gate was given (the request went through)."""
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found
