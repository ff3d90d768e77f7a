"""One-shot tool calls on the JSON-RPC route, answered without the SDK's request machinery.

A ``SendMessage`` whose message names a tool directly, starts a new thread and asks for
nothing else (no task or context id, no configuration, no extension) needs none of what the
SDK builds per request: the active-task registry, the event queue and its consumer, the task
manager saving the task at every event, and the conversions of the tool's result to protobuf
and back to JSON (then rewritten once more for whole numbers). Here the same Task is built
as plain JSON, in the form protobuf's JSON printer gives it (numbers through ``Struct``,
whole numbers as integers), written once, and sent. Every other request, and any message
this module does not recognise field by field, goes to the SDK unchanged.

``tests/server/test_direct.py`` holds the two paths to the same answers."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.types import TaskState
from a2a.utils.errors import A2AError, InternalError, InvalidParamsError
from google.protobuf.timestamp_pb2 import Timestamp

from lamina.errors import ErrorCode, LaminaError
from lamina.governance.builtin import any_secret, redact_secrets
from lamina.server.a2a.executor import call_of
from lamina.server.a2a.numbers import EXACT
from lamina.server.a2a.store import StoreTaskStore
from lamina.server.skills import Dispatcher, Outcome
from lamina.threads.ports import StoredTask

log = logging.getLogger("lamina.server")

STATES = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "input-required": TaskState.TASK_STATE_INPUT_REQUIRED,
    "rejected": TaskState.TASK_STATE_REJECTED,
    "failed": TaskState.TASK_STATE_FAILED,
}
_MESSAGE_KEYS = frozenset({"messageId", "contextId", "role", "parts", "metadata"})
_PART_KEYS = frozenset({"text", "data", "mediaType", "metadata"})
_JSON = "application/json"
#: How deep a request's data and metadata may nest to take this path; deeper goes to the SDK,
#: which answers what protobuf can hold and refuses the rest.
_REQUEST_DEPTH = 16


class NotWire(ValueError):
    """A value protobuf's ``Struct`` cannot hold."""


def wire(value: Any, depth: int = 40) -> Any:
    """``value`` as it comes back from a protobuf ``Value`` (every number a double) written
    with whole doubles as integers (``lamina.server.a2a.numbers``); NotWire when a ``Value``
    cannot hold it, or when it nests deeper than ``depth`` objects and lists (protobuf's
    parser stops at 100 messages, two per level)."""
    # A tool's result is plain JSON data, hundreds of values: the exact types take the short
    # way (strings, booleans and null, the most of them, without a call of their own), any
    # other (a subclass) the general one.
    kind = type(value)
    if kind is dict:
        if depth <= 0:
            raise NotWire("nested too deeply")
        if not _str_keys(value):
            raise NotWire("an object key that is not a string")
        return {k: v if type(v) in _AS_IS else wire(v, depth - 1) for k, v in value.items()}
    if kind is list:
        if depth <= 0:
            raise NotWire("nested too deeply")
        return [v if type(v) in _AS_IS else wire(v, depth - 1) for v in value]
    if kind in _AS_IS:
        return value
    if kind is float:
        return _wire_float(value)
    if kind is int and -EXACT <= value <= EXACT:
        return value
    return _wire_other(value, depth)


#: The types ``wire`` returns unchanged at any depth.
_AS_IS = frozenset({str, bool, type(None)})


def _str_keys(value: dict[Any, Any]) -> bool:
    kinds = set(map(type, value))
    return kinds <= {str} or all(isinstance(k, str) for k in value)


def _wire_float(value: float) -> float | int:
    if value != value or value in (float("inf"), float("-inf")):
        raise NotWire("NaN or Infinity")
    return int(value) if value.is_integer() and -EXACT <= value <= EXACT else value


def _wire_other(value: Any, depth: int) -> Any:
    """``wire`` of a value that is not exactly a str, bool, None, dict, list or float."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if -EXACT <= value <= EXACT:
            return value
        try:
            value = float(value)
        except OverflowError:
            raise NotWire("a number beyond a double") from None
    if isinstance(value, float):
        return _wire_float(value)
    if isinstance(value, dict | list | tuple) and depth <= 0:
        raise NotWire("nested too deeply")
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise NotWire("an object key that is not a string")
        return {k: wire(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [wire(v, depth - 1) for v in value]
    raise NotWire(f"a value of type {type(value).__name__}")


def _part(part: Any) -> dict[str, Any] | None:
    """A request part as protobuf prints it, or None when this module leaves it to the SDK."""
    if not isinstance(part, dict) or not part.keys() <= _PART_KEYS:
        return None
    if ("text" in part) == ("data" in part):
        return None
    out: dict[str, Any] = {}
    if "text" in part:
        if not isinstance(part["text"], str):
            return None
        out["text"] = part["text"]
    else:
        out["data"] = wire(part["data"], _REQUEST_DEPTH)
    if "metadata" in part:
        if not isinstance(part["metadata"], dict):
            return None
        out["metadata"] = wire(part["metadata"], _REQUEST_DEPTH)
    if "mediaType" in part:
        if not isinstance(part["mediaType"], str) or not part["mediaType"]:
            return None
        out["mediaType"] = part["mediaType"]
    return out


def one_shot(body: Any, headers: Any) -> dict[str, Any] | None:
    """The message of a JSON-RPC request this module answers (a 1.0 ``SendMessage`` naming a
    tool, in a new thread or a named one, for no task yet), as protobuf would print it; None
    for every other request."""
    if headers.get("a2a-version", "").strip() != "1.0" or "a2a-extensions" in headers:
        return None
    if not isinstance(body, dict) or body.keys() != {"jsonrpc", "id", "method", "params"}:
        return None
    rpc_id, params = body["id"], body["params"]
    if body["jsonrpc"] != "2.0" or body["method"] != "SendMessage":
        return None
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int):
        return None
    if not isinstance(params, dict) or params.keys() != {"message"}:
        return None
    message = params["message"]
    if not isinstance(message, dict) or not message.keys() <= _MESSAGE_KEYS:
        return None
    message_id, parts = message.get("messageId"), message.get("parts")
    if not isinstance(message_id, str) or not message_id or message.get("role") != "ROLE_USER":
        return None
    if (
        not isinstance(parts, list)
        or not parts
        or not isinstance(message.get("metadata", {}), dict)
    ):
        return None
    context_id = message.get("contextId")
    if context_id is not None and (not isinstance(context_id, str) or not context_id):
        return None
    try:
        printed = [_part(p) for p in parts]
        metadata = wire(message["metadata"], _REQUEST_DEPTH) if "metadata" in message else None
    except NotWire:
        return None
    if any(p is None for p in printed):
        return None
    if not any(isinstance(p.get("data"), dict) and "tool" in p["data"] for p in printed if p):
        return None  # free text: the SDK's path
    out: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": printed}
    if context_id is not None:
        out["contextId"] = context_id
    if metadata is not None:
        out["metadata"] = metadata
    return out


def _redact(messages: list[dict[str, Any]]) -> None:
    """Replace the secrets in the messages' texts and data values in place (as
    ``lamina.server.a2a.store.redact_history`` does on a protobuf Task)."""
    texts: list[str] = []
    for message in messages:
        for part in message["parts"]:
            if "text" in part:
                texts.append(part["text"])
            else:
                texts.extend(_values(part["data"]))
    if not any_secret(texts):
        return
    for message in messages:
        for part in message["parts"]:
            if "text" in part:
                part["text"] = redact_secrets(part["text"])
            else:
                part["data"] = _redacted(part["data"])


def _values(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _values(v)]
    if isinstance(value, list):
        return [s for v in value for s in _values(v)]
    return []


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: _redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v) for v in value]
    return value


def _data(value: Any) -> dict[str, Any]:
    return {"data": wire(value), "mediaType": _JSON}


def task_of(
    task_id: str, context_id: str, message: dict[str, Any], outcome: Outcome, ts: Timestamp
) -> dict[str, Any]:
    """The Task of a finished one-shot call, as the SDK's executor events would build it
    (``lamina.server.a2a.executor.LaminaExecutor._finish``) and protobuf print it."""
    artifacts: list[dict[str, Any]] = []
    if outcome.state == "completed":
        artifact: dict[str, Any] = {"artifactId": str(uuid.uuid4())}
        if outcome.tool or outcome.skill:
            artifact["name"] = outcome.tool or outcome.skill
        artifact["parts"] = [_data(outcome.result)]
        artifact["metadata"] = {"skill": outcome.skill, "tool": outcome.tool or ""}
        artifacts.append(artifact)
    if outcome.session_context is not None:
        artifacts.append(
            {
                "artifactId": str(uuid.uuid4()),
                "name": "session_context",
                "parts": [_data(outcome.session_context)],
            }
        )
    parts: list[dict[str, Any]] = [{"text": outcome.message}] if outcome.message else []
    if outcome.error is not None:
        parts.append(_data({"error": outcome.error}))
    status: dict[str, Any] = {"state": TaskState.Name(STATES[outcome.state])}
    if parts:
        status["message"] = {
            "messageId": str(uuid.uuid4()),
            "contextId": context_id,
            "taskId": task_id,
            "role": "ROLE_AGENT",
            "parts": parts,
        }
    status["timestamp"] = ts.ToJsonString()
    asked = {"messageId": message["messageId"], "contextId": context_id, "taskId": task_id}
    asked.update((k, v) for k, v in message.items() if k not in ("messageId", "contextId"))
    messages = [asked, status["message"]] if parts else [asked]
    _redact(messages)
    task: dict[str, Any] = {"id": task_id, "contextId": context_id, "status": status}
    if artifacts:
        task["artifacts"] = artifacts
    task["history"] = [asked]
    return task


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class DirectCalls:
    """Answers the requests ``one_shot`` recognises: the thread opened (a new one is only
    made in memory), the call dispatched, the final Task written once (a GetTask finds it),
    together with a new thread and its record (one transaction), and returned."""

    def __init__(self, dispatcher: Dispatcher, tasks: StoreTaskStore) -> None:
        self._dispatcher = dispatcher
        self._tasks = tasks

    async def answer(self, rpc_id: str | int, message: dict[str, Any], tenant: str) -> bytes:
        """The JSON-RPC response (UTF-8 JSON) to ``message`` from ``one_shot``: a result with
        whole numbers written as integers, or an error in the SDK's form."""
        try:
            task = await self._run(message, tenant)
        except A2AError as exc:
            return _dumps(build_error_response(rpc_id, exc)).encode()
        except Exception:
            log.exception("one-shot call failed (tenant %s)", tenant)
            internal = InternalError(message="internal error (see the server log)")
            return _dumps(build_error_response(rpc_id, internal)).encode()
        # {"result": {"task": task}, "id": ..., "jsonrpc": "2.0"}, the task's JSON as stored.
        return f'{{"result":{{"task":{task}}},"id":{_dumps(rpc_id)},"jsonrpc":"2.0"}}'.encode()

    async def _run(self, message: dict[str, Any], tenant: str) -> str:
        """The final Task, written, as JSON."""
        task_id = str(uuid.uuid4())
        threads = self._dispatcher.threads
        if "contextId" in message:
            context_id = message["contextId"]
            try:
                thread = await self._dispatcher.open_thread(tenant, context_id)
            except LaminaError as exc:  # as lamina.server.a2a.executor.ThreadContextBuilder
                raise InvalidParamsError(
                    message=f"{exc.code.value}: {exc.message}", data=exc.to_dict()
                ) from None
        else:
            # A new thread, written once at the end with the task: nobody can name it before
            # this answer gives its id.
            context_id = str(uuid.uuid4())
            thread = threads.fresh(tenant, context_id)
        parts = [
            ("text", p["text"]) if "text" in p else ("data", p["data"]) for p in message["parts"]
        ]
        try:
            call = call_of(tenant, context_id, task_id, message.get("metadata"), parts)
        except LaminaError as exc:
            outcome = self._dispatcher.error_outcome("tasks", None, exc)
        else:
            outcome = await self._dispatcher.handle(call, thread)
        new_thread = None if thread.stored else outcome.new_thread or threads.first_write(thread)
        ts = Timestamp()
        ts.FromDatetime(datetime.now(UTC))
        try:
            task = task_of(task_id, context_id, message, outcome, ts)
        except NotWire:
            log.exception("%s: a result protobuf cannot hold", outcome.tool or outcome.skill)
            internal = LaminaError(ErrorCode.INTERNAL_ERROR, "internal error")
            outcome = self._dispatcher.error_outcome(outcome.skill, outcome.tool, internal)
            task = task_of(task_id, context_id, message, outcome, ts)
        state = int(STATES[outcome.state])
        stored = StoredTask(task_id, context_id, state, ts.ToNanoseconds(), _dumps(task))
        await self._tasks.save_stored(tenant, stored, new_thread)
        return stored.data
