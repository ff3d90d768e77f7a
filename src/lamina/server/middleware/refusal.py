"""A refusal of the gate, rendered in the route's own protocol (docs/server.md, "Error
formats"): a JSON-RPC 2.0 error envelope on ``POST /`` (with the request's id when its body
could be read), the HTTP+JSON binding's error (google.rpc.Status with an ErrorInfo) on the
REST routes, the legacy routes' ``{"error": {code, message, data}}``, and lamina's own
``{"error": {code, message, details}}`` on the others (MCP, the card, health, metrics). The
HTTP status and headers are the same on all. Every check answers through here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Scope, Send

from lamina.server.middleware.buffer import ClientGone, RequestBody, TooLarge
from lamina.server.middleware.request import group_of

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
# A JSON-RPC parse error: what a body that is not strict JSON gets on POST /.
PARSE_ERROR = -32700


@dataclass(frozen=True)
class Refusal:
    """One refusal, whatever the route: ``reason`` is the ErrorInfo reason (and the error
    code on non-A2A routes), ``rpc_code`` the JSON-RPC code, ``grpc`` the google.rpc status
    name of the HTTP+JSON error."""

    status: int
    reason: str
    rpc_code: int
    grpc: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    domain: str = "lamina"


def rpc_id(body: Any) -> str | int | float | None:
    """The id of a JSON-RPC request, when it is one a response may carry (string or number)."""
    found = body.get("id") if isinstance(body, dict) else None
    if isinstance(found, bool) or not isinstance(found, str | int | float):
        return None
    return found


def render(group: str, refusal: Refusal, request_id: Any) -> Any:
    """The JSON a refusal is answered with on a route of ``group``."""
    data = {"reason": refusal.reason, **refusal.data}
    if group == "jsonrpc":
        error = {"code": refusal.rpc_code, "message": refusal.message, "data": data}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    if group == "legacy":
        return {"error": {"code": refusal.rpc_code, "message": refusal.message, "data": data}}
    if group == "rest":
        info = {
            "@type": ERROR_INFO,
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
        return {"error": error}
    # card, health, metrics, MCP: lamina's own error shape
    return {"error": {"code": refusal.reason, "message": refusal.message, "details": refusal.data}}


async def refuse(scope: Scope, send: Send, refusal: Refusal) -> None:
    """Answer with ``refusal`` in the route's protocol. On ``POST /`` the envelope carries the
    request's id, read from the body when it fits the limit (null when it does not, or is not
    JSON); a client that left while it was read gets no answer."""
    group = group_of(scope)
    request_id = None
    if group == "jsonrpc":
        try:
            request_id = rpc_id((await RequestBody.of(scope).parsed()).value)
        except TooLarge:
            pass
        except ClientGone:
            return
    await send_json(send, refusal.status, render(group, refusal, request_id), refusal.headers)


async def refuse_unreadable(scope: Scope, send: Send, message: str) -> None:
    """Tell the client its body (or query) cannot be read the way its route speaks: a
    JSON-RPC parse error (HTTP 200, as the SDK answers one), the HTTP+JSON binding's 400,
    the legacy routes' 400."""
    group = group_of(scope)
    if group == "jsonrpc":
        error = {"code": PARSE_ERROR, "message": message}
        await send_json(send, 200, {"jsonrpc": "2.0", "id": None, "error": error}, {})
        return
    if group == "legacy":
        await send_json(send, 400, {"error": {"code": PARSE_ERROR, "message": message}}, {})
        return
    info = {"@type": ERROR_INFO, "reason": "INVALID_REQUEST", "domain": "a2a-protocol.org"}
    error = {"code": 400, "status": "INVALID_ARGUMENT", "message": message, "details": [info]}
    await send_json(send, 400, {"error": error}, {})


async def send_json(send: Send, status: int, payload: Any, headers: dict[str, str]) -> None:
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
