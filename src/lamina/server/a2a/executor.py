"""The AgentExecutor: an A2A message → a ``Call`` for the dispatcher → task events.

A data part ``{"tool": name, "arguments": {...}}`` is a direct tool call; text parts are free
text. Identifiers (user_id, project_id, ...) come from the message metadata (or a data
part without ``tool``) and are kept by the thread.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a.server.agent_execution import (
    AgentExecutor,
    RequestContext,
    SimpleRequestContextBuilder,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import Part, SendMessageRequest, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict, ParseDict

from lamina.errors import ErrorCode, LaminaError
from lamina.server.a2a.numbers import whole
from lamina.server.skills import Call, Dispatcher, Outcome
from lamina.threads.service import IDENTIFIERS, Thread

log = logging.getLogger("lamina.server")
THREAD_KEY = "lamina.thread"
#: States a task never leaves: a message to it is refused (UnsupportedOperationError).
FINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def _state_name(state: int) -> str:
    """``TASK_STATE_COMPLETED`` → ``completed``."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower()


def data_part(value: Any) -> Part:
    part = Part(media_type="application/json")
    ParseDict(value, part.data)
    return part


def call_from(context: RequestContext, tenant: str) -> Call:
    """The tool call or text, and the identifiers, of the request's message."""
    message = context.message
    meta: Any = None
    parts: list[tuple[str, Any]] = []
    if message is not None:
        meta = whole(MessageToDict(message.metadata)) if message.HasField("metadata") else None
        for part in message.parts:
            kind = part.WhichOneof("content")
            if kind == "text":
                parts.append(("text", part.text))
            elif kind == "data":
                parts.append(("data", whole(MessageToDict(part.data))))
    return call_of(tenant, context.context_id or "", context.task_id or "", meta, parts)


def call_of(
    tenant: str, context_id: str, task_id: str, meta: Any, parts: list[tuple[str, Any]]
) -> Call:
    """The ``Call`` of a message given as plain JSON values: its metadata (or None) and its
    parts as ("text", str) or ("data", value) (other parts carry nothing for a call)."""
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    texts: list[str] = []
    identifiers: dict[str, str] = {}
    meta = meta if isinstance(meta, dict) else {}
    session = meta.get("session_context") is True
    identifiers.update({k: v for k, v in meta.items() if k in IDENTIFIERS and isinstance(v, str)})
    for kind, data in parts:
        if kind == "text":
            texts.append(data)
            continue
        if not isinstance(data, dict):
            raise LaminaError(
                ErrorCode.INVALID_ARGUMENT,
                'a data part must be a JSON object: {"tool": "<name>", "arguments": {...}}',
            )
        if "tool" in data:
            if tool is not None:
                raise LaminaError(ErrorCode.INVALID_ARGUMENT, "one tool call per message")
            if not isinstance(data["tool"], str) or not data["tool"]:
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT,
                    'the data part\'s "tool" must be a tool name (a string)',
                    details={"field": "tool"},
                )
            given = data.get("arguments", {})
            if not isinstance(given, dict):
                raise LaminaError(
                    ErrorCode.INVALID_ARGUMENT,
                    f'{data["tool"]}: "arguments" must be a JSON object',
                    details={"tool": data["tool"], "field": "arguments"},
                )
            tool = data["tool"]
            arguments = {**(arguments or {}), **given}
        else:
            # Identifiers, and arguments answering an input-required task.
            for key, value in data.items():
                if key in IDENTIFIERS and isinstance(value, str):
                    identifiers[key] = value
                else:
                    arguments = {**(arguments or {}), key: value}
    return Call(
        tenant=tenant,
        thread_id=context_id,
        task_id=task_id,
        tool=tool,
        arguments=arguments,
        text="\n".join(t for t in texts if t.strip()),
        identifiers=identifiers,
        session=session,
    )


class ThreadContextBuilder(SimpleRequestContextBuilder):
    """Opens (or creates) the thread of the request before any task exists, so that
    continuing an expired thread is a protocol error, not a failed task."""

    def __init__(self, dispatcher: Dispatcher, tasks: TaskStore) -> None:
        super().__init__()
        self._dispatcher = dispatcher
        self._tasks = tasks

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        task_id = task_id or context.state.get("lamina.legacy_task_id")
        if task_id:
            known = task if task is not None else await self._tasks.get(task_id, context)
            if known is not None and known.status.state in FINAL:
                # Refused before the SDK starts a task for it (it would leave that task's
                # queues pending, and their tracebacks in the log).
                raise UnsupportedOperationError(
                    message=f"task {known.id} is {_state_name(known.status.state)}: it takes "
                    "no more messages; send a new message without taskId (with this "
                    "contextId to stay in the thread)"
                )
            if known is not None and not context_id:
                # A reply to a task (input-required) belongs to the task's context: the
                # client need not repeat the contextId the task already names.
                context_id = known.context_id
        built = await super().build(context, params, task_id, context_id, task)
        tenant = context.state["lamina.tenant"]
        try:
            thread = await self._dispatcher.open_thread(tenant, built.context_id or "")
        except LaminaError as exc:
            raise InvalidParamsError(
                message=f"{exc.code.value}: {exc.message}", data=exc.to_dict()
            ) from None
        context.state[THREAD_KEY] = thread
        return built


class LaminaExecutor(AgentExecutor):
    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        tenant = context.call_context.state["lamina.tenant"]
        task_id, context_id = context.task_id or "", context.context_id or ""
        if context.current_task is None:
            first = Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
            )
            if context.message is not None:
                first.history.append(context.message)
            await event_queue.enqueue_event(first)
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        thread = context.call_context.state.get(THREAD_KEY)
        try:
            call = call_from(context, tenant)
        except LaminaError as exc:
            outcome = self._dispatcher.error_outcome("tasks", None, exc)
        else:
            outcome = await self._dispatcher.handle(
                call, thread if isinstance(thread, Thread) else None
            )
        await self._finish(updater, outcome)

    async def _finish(self, updater: TaskUpdater, outcome: Outcome) -> None:
        parts = [Part(text=outcome.message)] if outcome.message else []
        if outcome.state == "completed":
            await updater.add_artifact(
                [data_part(outcome.result)],
                name=outcome.tool or outcome.skill,
                metadata={"skill": outcome.skill, "tool": outcome.tool or ""},
            )
        if outcome.session_context is not None:
            await updater.add_artifact([data_part(outcome.session_context)], name="session_context")
        if outcome.error is not None:
            parts.append(data_part({"error": outcome.error}))
        message = updater.new_agent_message(parts) if parts else None
        if outcome.state == "completed":
            await updater.complete(message)
        elif outcome.state == "input-required":
            await updater.requires_input(message)
        elif outcome.state == "rejected":
            await updater.reject(message)
        else:
            await updater.failed(message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel(updater.new_agent_message([Part(text="cancelled by the client")]))
