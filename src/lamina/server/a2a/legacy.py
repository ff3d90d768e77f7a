"""Legacy routes for A2A 0.1 clients: POST /tasks/send and GET /tasks/{id}/get, translated to
and from the 1.0 request handler (so they share tasks, threads, auth and limits)."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import RequestHandler
from a2a.types import GetTaskRequest, Message, Part, Role, SendMessageRequest, Task
from a2a.utils.errors import A2A_ERROR_MAPPING, JSON_RPC_ERROR_CODE_MAP, A2AError
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.struct_pb2 import Struct
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from lamina.checks import storable
from lamina.server.body import BadBody, read_json

log = logging.getLogger("lamina.server")

#: Namespace of the ids stored for tasks a 0.1 client names (see ``_own``).
_LEGACY_IDS = uuid.UUID("5b0c6f5e-8d0a-4c53-9d3e-6a1f4f1e2a77")
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_STATES = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
}


class LegacyError(ValueError):
    pass


def _struct(value: Any, target: Struct, name: str) -> None:
    if not isinstance(value, dict):
        raise LegacyError(f"{name} must be a JSON object, got {type(value).__name__}")
    try:
        ParseDict(value, target)
    except (ParseError, OverflowError) as exc:
        raise LegacyError(f"{name} cannot be read: {exc}") from None


def _part_in(part: Any) -> Part:
    if not isinstance(part, dict):
        raise LegacyError("each part must be an object")
    kind = part.get("type") or part.get("kind") or ("data" if "data" in part else "text")
    if kind == "text" and isinstance(part.get("text"), str):
        return Part(text=part["text"])
    if kind == "data":
        out = Part(media_type="application/json")
        _struct(part.get("data"), out.data, "a data part's data")
        return out
    raise LegacyError(f"unsupported part {kind!r}: use text or data parts")


def _part_out(part: dict[str, Any]) -> dict[str, Any]:
    if "text" in part:
        return {"type": "text", "text": part["text"]}
    if "data" in part:
        return {"type": "data", "data": part["data"]}
    return {"type": "file", **part}


def _message_out(message: dict[str, Any]) -> dict[str, Any]:
    role = "agent" if message.get("role") == "ROLE_AGENT" else "user"
    out = {"role": role, "parts": [_part_out(p) for p in message.get("parts", [])]}
    if message.get("metadata"):
        out["metadata"] = message["metadata"]
    return out


def _own(context: ServerCallContext, client_id: str) -> str:
    """The id a new task named ``client_id`` by a 0.1 client is stored under: derived from
    the tenant and the client's id, so two tenants choosing the same id never share a task
    (the SDK keeps live tasks by id alone, across tenants)."""
    return str(uuid.uuid5(_LEGACY_IDS, f"{context.state['lamina.tenant']}\x00{client_id}"))


async def _find(handler: RequestHandler, context: ServerCallContext, client_id: str) -> Task | None:
    """The caller's task that ``client_id`` names: one created through the 1.0 routes (under
    that id), or one a 0.1 client created (under the derived id)."""
    if not storable(client_id):
        return None
    for candidate in (client_id, _own(context, client_id)):
        try:
            task = await handler.on_get_task(GetTaskRequest(id=candidate), context)
        except A2AError:
            continue
        if task is not None:
            return task
    return None


def task_out(task: Task, shown_id: str | None = None) -> dict[str, Any]:
    """A 1.0 task in the 0.1 shape (id, sessionId, status.state, artifacts with typed parts),
    under the id the client knows it by."""
    raw = MessageToDict(task)
    status = raw.get("status", {})
    out: dict[str, Any] = {
        "id": shown_id or raw.get("id"),
        "sessionId": raw.get("contextId"),
        "status": {"state": _STATES.get(status.get("state", ""), "unknown")},
        "artifacts": [
            {
                "name": a.get("name"),
                "index": i,
                "parts": [_part_out(p) for p in a.get("parts", [])],
                **({"metadata": a["metadata"]} if a.get("metadata") else {}),
            }
            for i, a in enumerate(raw.get("artifacts", []))
        ],
        "history": [_message_out(m) for m in raw.get("history", [])],
    }
    if "message" in status:
        out["status"]["message"] = _message_out(status["message"])
    if "timestamp" in status:
        out["status"]["timestamp"] = status["timestamp"]
    return out


def _error(exc: A2AError, rpc_id: Any) -> JSONResponse:
    code = JSON_RPC_ERROR_CODE_MAP.get(type(exc), -32603)
    error: dict[str, Any] = {"code": code, "message": exc.message}
    if exc.data:
        error["data"] = exc.data
    mapping = A2A_ERROR_MAPPING.get(type(exc))
    status = mapping.http_code if mapping is not None else 500
    if rpc_id is not None:
        return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "error": error}, status_code=200)
    return JSONResponse({"error": error}, status_code=status)


def _bad(message: str, rpc_id: Any) -> JSONResponse:
    error = {"code": -32602, "message": message}
    if rpc_id is not None:
        return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "error": error})
    return JSONResponse({"error": error}, status_code=400)


def _reply(result: dict[str, Any], rpc_id: Any) -> JSONResponse:
    if rpc_id is not None:
        return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "result": result})
    return JSONResponse(result)


def legacy_routes(handler: RequestHandler, build_context: Any) -> list[Route]:
    async def send(request: Request) -> JSONResponse:
        try:
            body = read_json(await request.body())
        except BadBody as exc:
            return JSONResponse({"error": {"code": -32700, "message": str(exc)}}, status_code=400)
        if not isinstance(body, dict):
            return _bad("the body must be a JSON object", None)
        rpc_id = body.get("id") if body.get("jsonrpc") == "2.0" else None
        params = body.get("params") if "jsonrpc" in body else body
        if not isinstance(params, dict):
            return _bad("params must be an object", rpc_id)
        try:
            task_id = params.get("id")
            session = params.get("sessionId")
            for name, value in (("id", task_id), ("sessionId", session)):
                if value is not None and (not isinstance(value, str) or not _ID.match(value)):
                    raise LegacyError(f"{name} must be 1-128 characters of A-Z a-z 0-9 . _ : -")
            message = params.get("message")
            if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
                raise LegacyError("message with parts is required")
            out = Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                parts=[_part_in(p) for p in message["parts"]],
            )
            if session:
                out.context_id = session
            meta = params.get("metadata") or message.get("metadata")
            if meta is not None:
                _struct(meta, out.metadata, "metadata")
        except LegacyError as exc:
            log.info("POST /tasks/send: %s", exc)
            return _bad(str(exc), rpc_id)
        context: ServerCallContext = build_context(request)
        shown = task_id or str(uuid.uuid4())
        if task_id:
            found = await _find(handler, context, task_id)
            if found is not None:
                out.task_id = found.id
        if not out.task_id:
            # A new task under an id the client chose is stored under the tenant's own
            # derivation of it, so that no client id can name another tenant's (live) task.
            context.state["lamina.legacy_task_id"] = _own(context, shown) if task_id else shown
        try:
            result = await handler.on_message_send(SendMessageRequest(message=out), context)
        except A2AError as exc:
            return _error(exc, rpc_id)
        if isinstance(result, Task):
            return _reply(task_out(result, shown), rpc_id)
        return _reply({"message": _message_out(MessageToDict(result))}, rpc_id)

    async def get(request: Request) -> JSONResponse:
        task_id = request.path_params["task_id"]
        context: ServerCallContext = build_context(request)
        task = await _find(handler, context, task_id)
        if task is None:
            return JSONResponse(
                {"error": {"code": -32001, "message": "Task not found"}}, status_code=404
            )
        return JSONResponse(task_out(task, task_id))

    return [
        Route("/tasks/send", send, methods=["POST"]),
        Route("/tasks/{task_id}/get", get, methods=["GET"]),
    ]
