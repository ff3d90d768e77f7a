"""The HTTP gate in front of every route: API key → tenant (401), body size limit (413),
JSON content type (415), rate limits per tenant and skill (429 with Retry-After), the A2A
version warning, and the HTTP request metric. A pure ASGI middleware: the body is read once,
checked, and replayed.

Its refusals speak the route's protocol (docs/server.md, "Error formats"): a JSON-RPC 2.0
error envelope on ``POST /`` (with the request's id when the body could be read), the
HTTP+JSON binding's error (google.rpc.Status with an ErrorInfo) on the REST routes, the legacy
routes' ``{"error": {code, message, data}}``; the HTTP status and headers are the same on all."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from lamina.metrics import ServerMetrics
from lamina.server.auth import KeyRing, Principal, presented_key
from lamina.server.body import BadBody, bad_query, read_json
from lamina.server.ratelimit import Limited, RateLimiter

log = logging.getLogger("lamina.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC = {"/health", "/.well-known/agent-card.json"}
SUPPORTED_VERSION = (1, 0)
# Media types a JSON body may be sent as (parameters such as charset aside): JSON, and the
# HTTP+JSON binding's own type.
JSON_TYPES = ("application/json", "application/a2a+json")
# The A2A groups: refusals in their protocol, bodies must be JSON.
A2A_GROUPS = ("jsonrpc", "rest", "legacy")


def route_group(path: str, method: str) -> str:
    if path == "/.well-known/agent-card.json":
        return "card"
    if path in ("/health", "/metrics"):
        return path[1:]
    if path == "/tasks/send" or (path.startswith("/tasks/") and path.endswith("/get")):
        return "legacy"
    if path == "/" and method == "POST":
        return "jsonrpc"
    if path == "/mcp" or path.startswith("/mcp/"):
        return "mcp"
    if path == "/ui" or path.startswith("/ui/"):
        return "ui"
    return "rest"


def _parts(body: Any) -> list[Any]:
    if not isinstance(body, dict):
        return []
    holder = body.get("params") if isinstance(body.get("params"), dict) else body
    message = holder.get("message") if isinstance(holder, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    return parts if isinstance(parts, list) else []


def _mcp_tool(body: Any) -> str | None:
    """The tool an MCP ``tools/call`` request (or the first of a batch) names."""
    for message in body if isinstance(body, list) else [body]:
        if isinstance(message, dict) and message.get("method") == "tools/call":
            params = message.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            if isinstance(name, str):
                return name
    return None


def skill_of(body: Any, skill_for_tool: Callable[[str], str]) -> str:
    """The skill a request body (its JSON value) asks for: the tool's skill (an A2A data
    part's, or an MCP ``tools/call``'s), "search" for free text, "tasks" for everything else
    (GetTask, ListTasks, CancelTask, MCP's initialize and tools/list, ...)."""
    tool = _mcp_tool(body)
    if tool is not None:
        return skill_for_tool(tool)
    parts = _parts(body)
    for part in parts:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and isinstance(data.get("tool"), str):
            return skill_for_tool(data["tool"])
    return "search" if parts else "tasks"


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type header names JSON (``application/json; charset=utf-8`` does)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media in JSON_TYPES


def _rpc_id(body: Any) -> str | int | float | None:
    """The id of a JSON-RPC request, when it is one a response may carry (string or number)."""
    rpc_id = body.get("id") if isinstance(body, dict) else None
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int | float):
        return None
    return rpc_id


def _version(header: str) -> tuple[int, int] | None:
    try:
        major, _, minor = header.strip().partition(".")
        return int(major), int(minor.split(".")[0] or 0)
    except ValueError:
        return None


@dataclass(frozen=True)
class Refusal:
    """One gate refusal, whatever the route: rendered by ``_refuse`` in the route's protocol.
    ``reason`` is the ErrorInfo reason (and the error code on non-A2A routes), ``rpc_code``
    the JSON-RPC code, ``grpc`` the google.rpc status name of the HTTP+JSON error."""

    status: int
    reason: str
    rpc_code: int
    grpc: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    domain: str = "lamina"


# JSON-RPC codes of the refusals A2A names no error for: implementation-defined server errors,
# at the far end of the -32000..-32099 range from A2A's own (-32001 upwards).
UNAUTHENTICATED_CODE = -32090
PAYLOAD_TOO_LARGE_CODE = -32091
RATE_LIMITED_CODE = -32092
CONTENT_TYPE_NOT_SUPPORTED_CODE = -32005  # A2A ContentTypeNotSupportedError


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


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
        if group == "ui":
            # The web inspector signs people in with a session cookie and checks its own
            # forms (CSRF, Origin, body size, rate limits): lamina.server.ui.base.
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if path in PUBLIC and method in ("GET", "HEAD"):
            if path == "/health":
                # Public: up or down. What is behind it (database path, row and thread counts
                # across tenants, errors) only for an admin key, or when no keys are set.
                key = presented_key(headers.get("authorization"), headers.get("x-api-key"))
                caller = self.keys.resolve(key) if self.keys.enabled else None
                scope["lamina.health_detail"] = not self.keys.enabled or (
                    caller is not None and caller.tier == "admin"
                )
            await self.app(scope, receive, send)
            return
        principal = self.default
        if self.keys.enabled:
            found = self.keys.resolve(
                presented_key(headers.get("authorization"), headers.get("x-api-key"))
            )
            if found is None:
                refusal = Refusal(
                    401,
                    "UNAUTHORIZED",
                    UNAUTHENTICATED_CODE,
                    "UNAUTHENTICATED",
                    "a valid API key is required: Authorization: Bearer <key> or X-API-Key: <key>",
                    headers={"www-authenticate": 'Bearer realm="lamina"'},
                )
                rpc_id = None
                if group == "jsonrpc":  # answer with the request's id if its body tells it
                    try:
                        rpc_id = _rpc_id(_parse(await self._read(receive, headers)))
                    except _TooLarge:
                        pass
                    except _Gone:
                        return
                await _refuse(send, group, refusal, rpc_id)
                return
            principal = found
            if path == "/metrics" and principal.tier != "admin":
                message = "/metrics needs a key of tier admin"
                refusal = Refusal(403, "UNAUTHORIZED", 0, "PERMISSION_DENIED", message)
                await _refuse(send, group, refusal, None)
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
        try:
            body = await self._read(receive, headers)
        except _Gone:
            return
        except _TooLarge:
            await _refuse(send, group, self._too_large(), None)
            return
        parsed: Any = None
        bad: BadBody | None = None
        if method == "POST" and body:
            try:
                parsed = read_json(body)
            except BadBody as exc:
                bad = exc
        rpc_id = _rpc_id(parsed) if group == "jsonrpc" else None
        content_type = headers.get("content-type")
        if body and group in A2A_GROUPS and not is_json(content_type):
            log.info("%s %s: body of type %r refused", method, path, content_type)
            refusal = Refusal(
                415,
                "CONTENT_TYPE_NOT_SUPPORTED",
                CONTENT_TYPE_NOT_SUPPORTED_CODE,
                "INVALID_ARGUMENT",
                "the request body must be JSON (Content-Type: application/json), "
                f"not {content_type or 'untyped'}",
                data={"contentType": content_type or "", "supported": list(JSON_TYPES)},
                domain="a2a-protocol.org",
            )
            await _refuse(send, group, refusal, rpc_id)
            return
        if path != "/metrics":
            skill = skill_of(parsed, self.skill_for_tool)
            limited = await self.limiter.check(principal.tenant, principal.tier, skill)
            if limited is not None:
                self.metrics.rate_limited.labels(principal.tenant, skill).inc()
                await _refuse(send, group, _rate_limited(limited, principal.tier, skill), rpc_id)
                return
        if bad is None and group in A2A_GROUPS and (query := bad_query(scope["query_string"])):
            bad = BadBody(query)
        if bad is not None and group in A2A_GROUPS:
            log.info(
                "%s %s: unreadable body from tenant %s: %s", method, path, principal.tenant, bad
            )
            await _bad_body(send, group, str(bad))
            return
        scope["lamina.principal"] = principal
        scope["lamina.json"] = parsed  # read once: the A2A adapter's direct path uses it
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive, headers: dict[str, str]) -> bytes:
        """The whole body; _TooLarge past ``max_body`` (declared or counted), _Gone if the
        client left."""
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _TooLarge
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        return b"".join(chunks)

    def _too_large(self) -> Refusal:
        return Refusal(
            413,
            "PAYLOAD_TOO_LARGE",
            PAYLOAD_TOO_LARGE_CODE,
            "INVALID_ARGUMENT",
            f"the request body is over the limit of {self.max_body} bytes",
            data={"maxBytes": self.max_body},
        )


def _parse(body: bytes) -> Any:
    try:
        return read_json(body) if body else None
    except BadBody:
        return None


def _rate_limited(limited: Limited, tier: str, skill: str) -> Refusal:
    wait = int(limited.retry_after)
    if limited.scope == "total":
        what = f"{limited.limit} requests per minute for all of the tenant's requests"
    else:
        what = f"{limited.limit} requests per minute for skill {skill!r}"
    message = f"rate limit of tier {tier!r} reached: {what}; retry in {wait} s"
    return Refusal(
        429,
        "RATE_LIMITED",
        RATE_LIMITED_CODE,
        "RESOURCE_EXHAUSTED",
        message,
        data={
            "limit": limited.scope,
            "requestsPerMinute": limited.limit,
            "skill": skill,
            "retryAfterSeconds": wait,
        },
        headers={"retry-after": str(wait)},
    )


_ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


async def _refuse(send: Send, group: str, refusal: Refusal, rpc_id: Any) -> None:
    """A gate refusal in the route's protocol, with the refusal's HTTP status and headers."""
    data = {"reason": refusal.reason, **refusal.data}
    payload: Any
    if group == "jsonrpc":
        error = {"code": refusal.rpc_code, "message": refusal.message, "data": data}
        payload = {"jsonrpc": "2.0", "id": rpc_id, "error": error}
    elif group == "legacy":
        payload = {"error": {"code": refusal.rpc_code, "message": refusal.message, "data": data}}
    elif group == "rest":
        info = {
            "@type": _ERROR_INFO,
            "reason": refusal.reason,
            "domain": refusal.domain,
            # google.rpc.ErrorInfo metadata is a map of strings.
            "metadata": {
                k: v if isinstance(v, str) else json.dumps(v) for k, v in refusal.data.items()
            },
        }
        error = {
            "code": refusal.status,
            "status": refusal.grpc,
            "message": refusal.message,
            "details": [info],
        }
        payload = {"error": error}
    else:  # card, health, metrics, MCP: lamina's own error shape
        error = {"code": refusal.reason, "message": refusal.message, "details": refusal.data}
        payload = {"error": error}
    await _send(send, refusal.status, payload, refusal.headers)


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
