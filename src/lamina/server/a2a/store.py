"""The SDK's TaskStore over lamina's thread store: tasks persist in the one database,
scoped to the tenant of the call (never to what the client claims)."""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor
from google.protobuf.json_format import MessageToJson, Parse

from lamina.checks import storable
from lamina.threads.ports import StoredTask, ThreadStore


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


def _task(row: StoredTask) -> Task:
    task = Task()
    Parse(row.data, task, ignore_unknown_fields=True)
    return task


class StoreTaskStore(TaskStore):
    def __init__(self, threads: ThreadStore) -> None:
        self._threads = threads

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._threads.save_task(tenant_of(context), _stored(task))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        if not storable(task_id):
            return None
        row = await self._threads.get_task(tenant_of(context), task_id)
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
        rows, total = await self._threads.list_tasks(
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
        await self._threads.delete_task(tenant_of(context), task_id)
