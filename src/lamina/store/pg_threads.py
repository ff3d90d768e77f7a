"""A2A threads and tasks (store/thread_base.py) in PostgreSQL, row-level security on
tenant_id as everywhere; the cross-tenant cleanup and count run as SECURITY DEFINER
functions (migration 0006)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.store.pg_context import Transaction
from lamina.store.thread_base import CleanupCounts, StoredTask, StoredThread

_GET_THREAD = (
    "SELECT thread_id, created_at, updated_at, expired_at, context, context_expires_at, version "
    "FROM a2a_threads WHERE tenant_id = %s AND thread_id = %s"
)
_THREAD = "thread_id, created_at, updated_at, expired_at, context, context_expires_at, version"
_TASK = "task_id, context_id, state, updated_ns, data"
_GET_TASK = (
    "SELECT task_id, context_id, state, updated_ns, data FROM a2a_tasks "
    "WHERE tenant_id = %s AND task_id = %s"
)


def _thread(row: Sequence[Any]) -> StoredThread:
    return StoredThread(row[0], row[1], row[2], row[3] is not None, row[4], row[5], row[6])


def _task(row: Sequence[Any]) -> StoredTask:
    return StoredTask(row[0], row[1], row[2], row[3], row[4])


class PostgresThreads:
    def __init__(self, tx: Transaction) -> None:
        self._tx = tx

    async def open_thread(
        self, tenant_id: str, thread_id: str, now: float, idle_ttl: float
    ) -> tuple[StoredThread, bool]:
        async with self._tx(tenant_id, "open_thread") as conn:
            created = await (
                await conn.execute(
                    "INSERT INTO a2a_threads (tenant_id, thread_id, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING thread_id",
                    (tenant_id, thread_id, now, now),
                )
            ).fetchone()
            if created is not None:
                return StoredThread(thread_id, now, now, False, "{}", None, 0), True
            row = await (
                await conn.execute(
                    f"SELECT {_THREAD} FROM a2a_threads WHERE tenant_id = %s "  # noqa: S608
                    "AND thread_id = %s FOR UPDATE",
                    (tenant_id, thread_id),
                )
            ).fetchone()
            found = _thread(row)
            if found.expired:
                return found, False
            if found.updated_at + idle_ttl <= now:
                await conn.execute(
                    "UPDATE a2a_threads SET expired_at = %s, context = '{}', "
                    "context_expires_at = NULL, version = version + 1 "
                    "WHERE tenant_id = %s AND thread_id = %s",
                    (now, tenant_id, thread_id),
                )
                return StoredThread(
                    thread_id, found.created_at, found.updated_at, True, "{}", None, 0
                ), False
            await conn.execute(
                "UPDATE a2a_threads SET updated_at = %s WHERE tenant_id = %s AND thread_id = %s",
                (now, tenant_id, thread_id),
            )
            return _thread((*row[:2], now, *row[3:])), False

    async def get_thread(self, tenant_id: str, thread_id: str) -> StoredThread | None:
        async with self._tx(tenant_id, "get_thread") as conn:
            row = await (
                await conn.execute(
                    _GET_THREAD,
                    (tenant_id, thread_id),
                )
            ).fetchone()
        return None if row is None else _thread(row)

    async def save_context(
        self,
        tenant_id: str,
        thread_id: str,
        context: str,
        expires_at: float,
        expected_version: int,
    ) -> bool:
        async with self._tx(tenant_id, "save_context") as conn:
            cur = await conn.execute(
                "UPDATE a2a_threads SET context = %s, context_expires_at = %s, "
                "version = version + 1 WHERE tenant_id = %s AND thread_id = %s "
                "AND version = %s AND expired_at IS NULL",
                (context, expires_at, tenant_id, thread_id, expected_version),
            )
            return bool(cur.rowcount == 1)

    async def cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts:
        async with self._tx(None, "cleanup") as conn:
            row = await (
                await conn.execute(
                    "SELECT * FROM lamina_thread_cleanup(%s, %s, %s)",
                    (now, idle_ttl, retention),
                )
            ).fetchone()
        return CleanupCounts(int(row[0]), int(row[1]), int(row[2]), int(row[3]))

    async def count_active(self, now: float, idle_ttl: float) -> int:
        async with self._tx(None, "count_threads") as conn:
            row = await (
                await conn.execute("SELECT lamina_active_threads(%s, %s)", (now, idle_ttl))
            ).fetchone()
        return int(row[0])

    async def save_task(self, tenant_id: str, task: StoredTask) -> None:
        async with self._tx(tenant_id, "save_task") as conn:
            await conn.execute(
                "INSERT INTO a2a_tasks (tenant_id, task_id, context_id, state, updated_ns, data) "
                "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant_id, task_id) DO UPDATE SET "
                "context_id = excluded.context_id, state = excluded.state, "
                "updated_ns = excluded.updated_ns, data = excluded.data",
                (tenant_id, task.task_id, task.context_id, task.state, task.updated_ns, task.data),
            )

    async def get_task(self, tenant_id: str, task_id: str) -> StoredTask | None:
        async with self._tx(tenant_id, "get_task") as conn:
            row = await (
                await conn.execute(
                    _GET_TASK,
                    (tenant_id, task_id),
                )
            ).fetchone()
        return None if row is None else _task(row)

    async def list_tasks(
        self,
        tenant_id: str,
        *,
        context_id: str | None,
        state: int | None,
        updated_after_ns: int | None,
        before: tuple[int, str] | None,
        limit: int,
    ) -> tuple[list[StoredTask], int]:
        where: list[str] = ["tenant_id = %s"]
        args: list[Any] = [tenant_id]
        if context_id is not None:
            where.append("context_id = %s")
            args.append(context_id)
        if state is not None:
            where.append("state = %s")
            args.append(state)
        if updated_after_ns is not None:
            where.append("updated_ns >= %s")
            args.append(updated_after_ns)
        async with self._tx(tenant_id, "list_tasks") as conn:
            total = await (
                await conn.execute(
                    f"SELECT count(*) FROM a2a_tasks WHERE {' AND '.join(where)}",  # noqa: S608
                    args,
                )
            ).fetchone()
            if before is not None:
                where.append("(updated_ns, task_id) < (%s, %s)")
                args.extend(before)
            rows = await (
                await conn.execute(
                    f"SELECT {_TASK} FROM a2a_tasks WHERE {' AND '.join(where)} "  # noqa: S608
                    "ORDER BY updated_ns DESC, task_id DESC LIMIT %s",
                    [*args, limit],
                )
            ).fetchall()
        return [_task(r) for r in rows], int(total[0])

    async def delete_task(self, tenant_id: str, task_id: str) -> None:
        async with self._tx(tenant_id, "delete_task") as conn:
            await conn.execute(
                "DELETE FROM a2a_tasks WHERE tenant_id = %s AND task_id = %s",
                (tenant_id, task_id),
            )
