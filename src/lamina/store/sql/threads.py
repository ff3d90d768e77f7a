"""A2A threads and tasks (lamina.threads.ports) in SQL, for both backends.

Only the cross-tenant sweep differs: SQLite runs it directly, PostgreSQL through SECURITY
DEFINER functions (row-level security hides other tenants' rows from lamina_app).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Unpack

from lamina.errors import ErrorCode, LaminaError
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.program import Executor, Program, count, first, row, rows
from lamina.store.sql.task_forgetting import delete_links, save_task
from lamina.store.sql.thread_seeds import decode, encode, find_seed, take_seed
from lamina.threads.packing import stored_text
from lamina.threads.ports import (
    CleanupCounts,
    ContextWrite,
    NewThread,
    StoredTask,
    StoredThread,
    TaskListing,
)

_THREAD = (
    "thread_id, created_at, updated_at, expired_at, context, context_expires_at, version, "
    "identifiers"
)
_TASK = "task_id, context_id, state, updated_ns, data, packed"


def _thread(values: Sequence[Any]) -> StoredThread:
    """A thread of its row (``_THREAD`` columns): a set ``expired_at`` means expired."""
    thread_id, created, updated, expired_at, context, expires, version, identifiers = values
    return StoredThread(
        thread_id, created, updated, expired_at is not None, context, expires, version, identifiers
    )


def _task(values: Sequence[Any]) -> StoredTask:
    task_id, context_id, state, updated_ns, data, packed = values
    return StoredTask(task_id, context_id, state, updated_ns, stored_text(data, packed))


class SqlThreads(ABC):
    """The ThreadStore protocol; a backend adds the cross-tenant ``cleanup`` and count."""

    def __init__(self, executor: Executor, dialect: Dialect) -> None:
        self._exec = executor
        self._d = dialect

    @abstractmethod
    async def cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts: ...

    @abstractmethod
    async def count_active(self, now: float, idle_ttl: float) -> int: ...

    async def open_thread(
        self, tenant_id: str, thread_id: str, now: float, idle_ttl: float
    ) -> tuple[StoredThread, bool]:
        return await self._exec.write(
            tenant_id, "open_thread", self._open(tenant_id, thread_id, now, idle_ttl)
        )

    def _open(
        self, tenant_id: str, thread_id: str, now: float, idle_ttl: float
    ) -> Program[tuple[StoredThread, bool]]:
        key = (tenant_id, thread_id)
        created = yield rows(
            "INSERT INTO a2a_threads (tenant_id, thread_id, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING thread_id",
            *key,
            now,
            now,
        )
        if created:
            # A one-shot call's thread, kept in its task until now, moves to this row.
            seeded = yield from take_seed(self._d, tenant_id, thread_id)
            if seeded is None:
                return StoredThread(thread_id, now, now, False, "{}", None, 0), True
            thread = seeded
        else:
            found = yield row(
                f"SELECT {_THREAD} FROM a2a_threads WHERE tenant_id = %s "  # noqa: S608
                f"AND thread_id = %s{self._d.for_update}",
                *key,
            )
            thread = _thread(found)
        if thread.expired:
            return thread, False
        if thread.updated_at + idle_ttl <= now:
            yield count(
                "UPDATE a2a_threads SET expired_at = %s, context = '{}', identifiers = '{}', "
                "context_expires_at = NULL, version = version + 1 "
                "WHERE tenant_id = %s AND thread_id = %s",
                now,
                *key,
            )
            return StoredThread(
                thread_id, thread.created_at, thread.updated_at, True, "{}", None, 0
            ), False
        yield count(
            "UPDATE a2a_threads SET updated_at = %s WHERE tenant_id = %s AND thread_id = %s",
            now,
            *key,
        )
        return replace(thread, updated_at=now), False

    async def get_thread(self, tenant_id: str, thread_id: str) -> StoredThread | None:
        return await self._exec.read(tenant_id, "get_thread", self._get(tenant_id, thread_id))

    def _get(self, tenant_id: str, thread_id: str) -> Program[StoredThread | None]:
        found = yield from first(
            _thread,
            f"SELECT {_THREAD} FROM a2a_threads WHERE tenant_id = %s AND thread_id = %s",  # noqa: S608
            tenant_id,
            thread_id,
        )
        if found is not None:
            return found
        seed = yield from find_seed(tenant_id, thread_id)
        return None if seed is None else decode(thread_id, *seed)

    async def save_context(
        self, tenant_id: str, thread_id: str, **write: Unpack[ContextWrite]
    ) -> bool:
        def save() -> Program[bool]:
            for attempt in range(2):
                changed = yield count(
                    "UPDATE a2a_threads SET context = %s, context_expires_at = %s, "
                    "identifiers = %s, version = version + 1 WHERE tenant_id = %s "
                    "AND thread_id = %s AND version = %s AND expired_at IS NULL",
                    write["context"],
                    write["expires_at"],
                    write.get("identifiers", "{}"),
                    tenant_id,
                    thread_id,
                    write["expected_version"],
                )
                # No row: the thread may be kept in its task still (thread_seeds).
                if (
                    changed
                    or attempt
                    or (yield from take_seed(self._d, tenant_id, thread_id)) is None
                ):
                    return bool(changed == 1)
            return False

        return await self._exec.write(tenant_id, "save_context", save())

    async def save_task(self, tenant_id: str, task: StoredTask) -> None:
        await self._exec.write(tenant_id, "save_task", save_task(self._d, tenant_id, task))

    async def create_thread(self, tenant_id: str, thread: NewThread, task: StoredTask) -> None:
        def create() -> Program[None]:
            # Kept in its task (thread_seeds); the id must be new.
            there = yield rows(
                "SELECT 1 FROM a2a_threads WHERE tenant_id = %s AND thread_id = %s",
                tenant_id,
                thread.thread_id,
            )
            seeded = yield from find_seed(tenant_id, thread.thread_id)
            if there or seeded is not None:
                raise LaminaError(
                    ErrorCode.CONFLICT,
                    f"thread {thread.thread_id!r} exists already",
                    details={"thread_id": thread.thread_id},
                )
            yield from save_task(self._d, tenant_id, task, encode(thread, task.task_id))

        await self._exec.write(tenant_id, "create_thread", create())

    async def get_task(self, tenant_id: str, task_id: str) -> StoredTask | None:
        get = first(
            _task,
            f"SELECT {_TASK} FROM a2a_tasks WHERE tenant_id = %s AND task_id = %s",  # noqa: S608
            tenant_id,
            task_id,
        )
        return await self._exec.read(tenant_id, "get_task", get)

    async def list_tasks(
        self, tenant_id: str, **listing: Unpack[TaskListing]
    ) -> tuple[list[StoredTask], int]:
        where: list[str] = ["tenant_id = %s"]
        args: list[Any] = [tenant_id]
        before = listing["before"]
        for condition, value in (
            ("context_id = %s", listing["context_id"]),
            ("state = %s", listing["state"]),
            ("updated_ns >= %s", listing["updated_after_ns"]),
        ):
            if value is not None:
                where.append(condition)
                args.append(value)

        def page() -> Program[tuple[list[StoredTask], int]]:
            total = yield row(
                f"SELECT count(*) FROM a2a_tasks WHERE {' AND '.join(where)}",  # noqa: S608
                *args,
            )
            if before is not None:
                where.append("(updated_ns, task_id) < (%s, %s)")
                args.extend(before)
            found = yield rows(
                f"SELECT {_TASK} FROM a2a_tasks WHERE {' AND '.join(where)} "  # noqa: S608
                "ORDER BY updated_ns DESC, task_id DESC LIMIT %s",
                *args,
                listing["limit"],
            )
            return [_task(r) for r in found], int(total[0])

        return await self._exec.read(tenant_id, "list_tasks", page(), snapshot=True)

    async def delete_task(self, tenant_id: str, task_id: str) -> None:
        def delete() -> Program[None]:
            yield from delete_links(tenant_id, task_id)
            yield count(
                "DELETE FROM a2a_tasks WHERE tenant_id = %s AND task_id = %s", tenant_id, task_id
            )

        await self._exec.write(tenant_id, "delete_task", delete())
