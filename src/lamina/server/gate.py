"""The HTTP gate in front of every route: body size limit (413), API key → tenant (401),
rate limits per tenant and skill (429 with Retry-After), the A2A version warning, and the
HTTP request metric. A pure ASGI middleware: the body is read once, checked, and replayed."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from lamina.metrics import ServerMetrics
from lamina.server.auth import KeyRing, Principal, presented_key
from lamina.server.ratelimit import RateLimiter

log = logging.getLogger("lamina.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC = {"/health", "/.well-known/agent-card.json"}
SUPPORTED_VERSION = (1, 0)


def route_group(path: str, method: str) -> str:
    if path == "/.well-known/agent-card.json":
        return "card"
    if path in ("/health", "/metrics"):
        return path[1:]
    if path == "/tasks/send" or (path.startswith("/tasks/") and path.endswith("/get")):
        return "legacy"
    if path == "/" and method == "POST":
        return "jsonrpc"
    return "rest"


def _parts(body: Any) -> list[Any]:
    if not isinstance(body, dict):
        return []
    holder = body.get("params") if isinstance(body.get("params"), dict) else body
    message = holder.get("message") if isinstance(holder, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    return parts if isinstance(parts, list) else []


def skill_of(raw: bytes, skill_for_tool: Callable[[str], str]) -> str:
    """The skill a request body asks for: the tool's skill, "search" for free text,
    "tasks" for everything else (GetTask, ListTasks, CancelTask, ...)."""
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        return "tasks"
    parts = _parts(body)
    for part in parts:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and isinstance(data.get("tool"), str):
            return skill_for_tool(data["tool"])
    return "search" if parts else "tasks"


def _version(header: str) -> tuple[int, int] | None:
    try:
        major, _, minor = header.strip().partition(".")
        return int(major), int(minor.split(".")[0] or 0)
    except ValueError:
        return None


class Gate:
    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: KeyRing,
        default_tenant: str,
        limiter: RateLimiter,
        metrics: ServerMetrics,
        max_body: int,
        skill_for_tool: Callable[[str], str],
    ) -> None:
        self.app = app
        self.keys = keys
        self.default = Principal(default_tenant, "default")
        self.limiter = limiter
        self.metrics = metrics
        self.max_body = max_body
        self.skill_for_tool = skill_for_tool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        group = route_group(path, method)
        status_seen: list[int] = []

        async def counted_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_seen.append(int(message["status"]))
            await send(message)

        try:
            await self._handle(scope, receive, counted_send, path, method)
        finally:
            self.metrics.http.labels(group, str(status_seen[0] if status_seen else 0)).inc()

    async def _handle(
        self, scope: Scope, receive: Receive, send: Send, path: str, method: str
    ) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if path in PUBLIC and method in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        principal = self.default
        if self.keys.enabled:
            found = self.keys.resolve(
                presented_key(headers.get("authorization"), headers.get("x-api-key"))
            )
            if found is None:
                await _json(
                    send,
                    401,
                    "UNAUTHORIZED",
                    "a valid API key is required: Authorization: Bearer <key> or X-API-Key: <key>",
                    {"www-authenticate": 'Bearer realm="lamina"'},
                )
                return
            principal = found
            if path == "/metrics" and principal.tier != "admin":
                await _json(send, 403, "UNAUTHORIZED", "/metrics needs a key of tier admin")
                return
        declared = headers.get("a2a-version")
        if declared:
            version = _version(declared)
            if version is not None and version > SUPPORTED_VERSION:
                log.warning(
                    "client declares A2A version %s, newer than the supported %d.%d (%s %s)",
                    declared,
                    *SUPPORTED_VERSION,
                    method,
                    path,
                )
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await self._too_large(send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._too_large(send)
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        if path != "/metrics":
            skill = skill_of(body, self.skill_for_tool) if method == "POST" else "tasks"
            wait = await self.limiter.check(principal.tenant, principal.tier, skill)
            if wait is not None:
                self.metrics.rate_limited.labels(principal.tenant, skill).inc()
                await _json(
                    send,
                    429,
                    "RATE_LIMITED",
                    f"rate limit of tier {principal.tier!r} reached for {skill}: "
                    f"retry in {int(wait)} s",
                    {"retry-after": str(int(wait))},
                    details={"skill": skill},
                )
                return
        scope["lamina.principal"] = principal
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, send: Send) -> None:
        await _json(
            send,
            413,
            "PAYLOAD_TOO_LARGE",
            f"the request body is over the limit of {self.max_body} bytes",
            details={"max_bytes": self.max_body},
        )


async def _json(
    send: Send,
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    body = json.dumps(
        {"error": {"code": code, "message": message, "details": details or {}}}
    ).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
