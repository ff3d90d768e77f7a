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
from lamina.server.body import BadBody, read_json
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


def skill_of(body: Any, skill_for_tool: Callable[[str], str]) -> str:
    """The skill a request body (its JSON value) asks for: the tool's skill, "search" for
    free text, "tasks" for everything else (GetTask, ListTasks, CancelTask, ...)."""
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
            await self._handle(scope, receive, counted_send, path, method, group)
        finally:
            self.metrics.http.labels(group, str(status_seen[0] if status_seen else 0)).inc()

    async def _handle(
        self, scope: Scope, receive: Receive, send: Send, path: str, method: str, group: str
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
        parsed: Any = None
        bad: BadBody | None = None
        if method == "POST" and body:
            try:
                parsed = read_json(body)
            except BadBody as exc:
                bad = exc
        if path != "/metrics":
            skill = skill_of(parsed, self.skill_for_tool)
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
        if bad is not None and group in ("jsonrpc", "rest", "legacy"):
            log.info(
                "%s %s: unreadable body from tenant %s: %s", method, path, principal.tenant, bad
            )
            await _bad_body(send, group, str(bad))
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


_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


async def _bad_body(send: Send, group: str, message: str) -> None:
    """Tell the client its body is not JSON the way its route speaks: a JSON-RPC parse error
    (HTTP 200, as the SDK answers one), the HTTP+JSON binding's 400, the legacy routes' 400."""
    if group == "jsonrpc":
        error = {"code": -32700, "message": message}
        await _send(send, 200, {"jsonrpc": "2.0", "id": None, "error": error}, {})
        return
    if group == "legacy":
        await _send(send, 400, {"error": {"code": -32700, "message": message}}, {})
        return
    info = {"@type": _ERROR_INFO, "reason": "INVALID_REQUEST", "domain": "a2a-protocol.org"}
    error = {"code": 400, "status": "INVALID_ARGUMENT", "message": message, "details": [info]}
    await _send(send, 400, {"error": error}, {})


async def _send(send: Send, status: int, payload: Any, headers: dict[str, str]) -> None:
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _json(
    send: Send,
    status: int,
    code: str,
    message: str,
    headers: dict[str, str] | None = None,
    details: dict[str, Any] | None = None,
) -> None:
    payload = {"error": {"code": code, "message": message, "details": details or {}}}
    await _send(send, status, payload, headers or {})
