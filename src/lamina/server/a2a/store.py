"""The SDK's TaskStore over lamina's task service (``lamina.threads.tasks``): tasks persist
in the one database, scoped to the tenant of the call (never to what the client claims),
read and written through the service's tenant checks, retries and metrics.

Writes are batched: the SDK saves a task at every event (submitted, working, each artifact,
the final status); only a state a client waits on (input-required, auth-required) or a final
one is written to the database. The steps between are held in this process (a ``get`` here
sees them) and, beyond ``MAX_HELD`` tasks in flight, written through. What is stored holds no
secret: the messages of the history are redacted (``redact_secrets``)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Message, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor
from google.protobuf.json_format import MessageToJson, Parse
from google.protobuf.struct_pb2 import Value

from lamina.checks import storable
from lamina.governance.builtin import any_secret, redact_secrets
from lamina.threads.ports import NewThread, StoredTask
from lamina.threads.tasks import TaskService

#: States worth a database write: a client waits on them or they are final.
WRITTEN = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_INPUT_REQUIRED,
        TaskState.TASK_STATE_AUTH_REQUIRED,
    }
)
MAX_HELD = 10_000


def tenant_of(context: ServerCallContext) -> str:
    tenant = context.state.get("lamina.tenant")
    if not isinstance(tenant, str) or not tenant:
        # The HTTP gate sets it on every request that reaches the SDK; a call without it is
        # a wiring bug, never a reason to fall back to some tenant.
        raise RuntimeError("no tenant on the server call context")
    return tenant


def _stored(task: Task) -> StoredTask:
    ns = task.status.timestamp.ToNanoseconds() if task.status.HasField("timestamp") else 0
    return StoredTask(
        task.id, task.context_id, int(task.status.state), ns, MessageToJson(task, indent=None)
    )


def _values(value: Value) -> Iterator[tuple[Any, str]]:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        yield value, "string_value"
    elif kind == "struct_value":
        for item in value.struct_value.fields.values():
            yield from _values(item)
    elif kind == "list_value":
        for item in value.list_value.values:
            yield from _values(item)


def _strings(messages: list[Message]) -> Iterator[tuple[Any, str]]:
    """Where each string of the messages sits: (the protobuf holding it, its field)."""
    for message in messages:
        for part in message.parts:
            kind = part.WhichOneof("content")
            if kind == "text":
                yield part, "text"
            elif kind == "data":
                yield from _values(part.data)


def redact_history(task: Task) -> None:
    """Replace the secrets in the task's messages (texts and data parts) in place."""
    messages = list(task.history)
    if task.status.HasField("message"):
        messages.append(task.status.message)
    strings = list(_strings(messages))
    if not any_secret(getattr(holder, name) for holder, name in strings):
        return
    for holder, name in strings:
        text = getattr(holder, name)
        clean = redact_secrets(text)
        if clean != text:
            setattr(holder, name, clean)


def _task(row: StoredTask) -> Task:
    task = Task()
    Parse(row.data, task, ignore_unknown_fields=True)
    return task


class StoreTaskStore(TaskStore):
    def __init__(self, tasks: TaskService) -> None:
        self._tasks = tasks
        #: Tasks between two written states, by (tenant, task id), oldest first.
        self._held: OrderedDict[tuple[str, str], Task] = OrderedDict()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        tenant = tenant_of(context)
        redact_history(task)
        key = (tenant, task.id)
        if task.status.state not in WRITTEN:
            held = Task()
            held.CopyFrom(task)
            self._held[key] = held
            self._held.move_to_end(key)
            while len(self._held) > MAX_HELD:
                (old_tenant, _), oldest = self._held.popitem(last=False)
                await self._tasks.save(old_tenant, _stored(oldest))
            return
        self._held.pop(key, None)
        await self._tasks.save(tenant, _stored(task))

    async def save_stored(
        self, tenant: str, task: StoredTask, thread: NewThread | None = None
    ) -> None:
        """Write a final task built without the SDK (``lamina.server.a2a.direct``): its
        messages already redacted, its JSON the SDK's; with ``thread``, create the task's
        thread in the same transaction."""
        self._held.pop((tenant, task.task_id), None)
        if thread is None:
            await self._tasks.save(tenant, task)
        else:
            await self._tasks.save_with_thread(tenant, task, thread)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if not storable(task_id):
            return None
        tenant = tenant_of(context)
        held = self._held.get((tenant, task_id))
        if held is not None:
            found = Task()
            found.CopyFrom(held)
            return found
        row = await self._tasks.get(tenant, task_id)
        return None if row is None else _task(row)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        before: tuple[int, str] | None = None
        if params.page_token:
            cursor = decode_list_tasks_cursor(params.page_token)
            if (
                cursor is None
                or not storable(cursor.task_id)
                or not 0 <= (cursor.timestamp_ns or 0) < 2**63
            ):
                raise InvalidParamsError(message="invalid pageToken: pass back a nextPageToken")
            before = (cursor.timestamp_ns or 0, cursor.task_id)
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        if not storable(params.context_id):
            return ListTasksResponse(page_size=size)
        rows, total = await self._tasks.list(
            tenant_of(context),
            context_id=params.context_id or None,
            state=int(params.status) or None,
            updated_after_ns=(
                params.status_timestamp_after.ToNanoseconds()
                if params.HasField("status_timestamp_after")
                else None
            ),
            before=before,
            limit=size + 1,
        )
        page = rows[:size]
        token = None
        if len(rows) > size:
            last = page[-1]
            token = encode_list_tasks_cursor(
                ListTasksCursor(timestamp_ns=last.updated_ns or None, task_id=last.task_id)
            )
        return ListTasksResponse(
            tasks=[_task(r) for r in page],
            next_page_token=token,
            total_size=total,
            page_size=size,
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        if not storable(task_id):
            return
        self._held.pop((tenant_of(context), task_id), None)
        await self._tasks.delete(tenant_of(context), task_id)
