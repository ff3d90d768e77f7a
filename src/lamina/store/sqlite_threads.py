"""A2A threads and tasks (store/thread_base.py) in the SQLite file."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from lamina.store.sqlite_db import Database
from lamina.store.thread_base import CleanupCounts, StoredTask, StoredThread

Runner = Callable[..., Awaitable[Any]]
_GET_THREAD = (
    "SELECT thread_id, created_at, updated_at, expired_at, context, context_expires_at, version "
    "FROM a2a_threads WHERE tenant_id = ? AND thread_id = ?"
)
_THREAD = "thread_id, created_at, updated_at, expired_at, context, context_expires_at, version"
_TASK = "task_id, context_id, state, updated_ns, data"
_GET_TASK = (
    "SELECT task_id, context_id, state, updated_ns, data FROM a2a_tasks "
    "WHERE tenant_id = ? AND task_id = ?"
)


def _thread(row: Sequence[Any]) -> StoredThread:
    return StoredThread(row[0], row[1], row[2], row[3] is not None, row[4], row[5], row[6])


def _task(row: Sequence[Any]) -> StoredTask:
    return StoredTask(row[0], row[1], row[2], row[3], row[4])


class SQLiteThreads:
    def __init__(self, db: Database, run: Runner) -> None:
        self._db = db
        self._run = run

    async def open_thread(
        self, tenant_id: str, thread_id: str, now: float, idle_ttl: float
    ) -> tuple[StoredThread, bool]:
        out: tuple[StoredThread, bool] = await self._run(
            "open_thread", self._open, tenant_id, thread_id, now, idle_ttl
        )
        return out

    def _open(
        self, tenant_id: str, thread_id: str, now: float, idle_ttl: float
    ) -> tuple[StoredThread, bool]:
        key = (tenant_id, thread_id)
        with self._db.write() as conn:
            row = conn.execute(
                _GET_THREAD,
                key,
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO a2a_threads (tenant_id, thread_id, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?)",
                    (*key, now, now),
                )
                return StoredThread(thread_id, now, now, False, "{}", None, 0), True
            found = _thread(row)
            if found.expired:
                return found, False
            if found.updated_at + idle_ttl <= now:
                conn.execute(
                    "UPDATE a2a_threads SET expired_at = ?, context = '{}', "
                    "context_expires_at = NULL, version = version + 1 "
                    "WHERE tenant_id = ? AND thread_id = ?",
                    (now, *key),
                )
                return _thread(
                    (thread_id, found.created_at, found.updated_at, now, "{}", None, 0)
                ), False
            conn.execute(
                "UPDATE a2a_threads SET updated_at = ? WHERE tenant_id = ? AND thread_id = ?",
                (now, *key),
            )
            return _thread((*row[:2], now, *row[3:])), False

    async def get_thread(self, tenant_id: str, thread_id: str) -> StoredThread | None:
        out: StoredThread | None = await self._run("get_thread", self._get, tenant_id, thread_id)
        return out

    def _get(self, tenant_id: str, thread_id: str) -> StoredThread | None:
        row = (
            self._db.connection()
            .execute(
                _GET_THREAD,
                (tenant_id, thread_id),
            )
            .fetchone()
        )
        return None if row is None else _thread(row)

    async def save_context(
        self,
        tenant_id: str,
        thread_id: str,
        context: str,
        expires_at: float,
        expected_version: int,
    ) -> bool:
        out: bool = await self._run(
            "save_context",
            self._save_context,
            tenant_id,
            thread_id,
            context,
            expires_at,
            expected_version,
        )
        return out

    def _save_context(
        self, tenant_id: str, thread_id: str, context: str, expires_at: float, version: int
    ) -> bool:
        with self._db.write() as conn:
            cur = conn.execute(
                "UPDATE a2a_threads SET context = ?, context_expires_at = ?, "
                "version = version + 1 WHERE tenant_id = ? AND thread_id = ? AND version = ? "
                "AND expired_at IS NULL",
                (context, expires_at, tenant_id, thread_id, version),
            )
            return cur.rowcount == 1

    async def cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts:
        out: CleanupCounts = await self._run("cleanup", self._cleanup, now, idle_ttl, retention)
        return out

    def _cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts:
        with self._db.write() as conn:
            expired = conn.execute(
                "UPDATE a2a_threads SET expired_at = ?, context = '{}', "
                "context_expires_at = NULL, version = version + 1 "
                "WHERE expired_at IS NULL AND updated_at + ? <= ?",
                (now, idle_ttl, now),
            ).rowcount
            states = conn.execute(
                "UPDATE a2a_threads SET context = '{}', context_expires_at = NULL, "
                "version = version + 1 "
                "WHERE context_expires_at IS NOT NULL AND context_expires_at <= ?",
                (now,),
            ).rowcount
            tasks = conn.execute(
                "DELETE FROM a2a_tasks WHERE EXISTS (SELECT 1 FROM a2a_threads t "
                "WHERE t.tenant_id = a2a_tasks.tenant_id AND t.thread_id = a2a_tasks.context_id "
                "AND t.expired_at IS NOT NULL AND t.expired_at + ? <= ?)",
                (retention, now),
            ).rowcount
            purged = conn.execute(
                "DELETE FROM a2a_threads WHERE expired_at IS NOT NULL AND expired_at + ? <= ?",
                (retention, now),
            ).rowcount
        return CleanupCounts(expired, states, purged, tasks)

    async def count_active(self, now: float, idle_ttl: float) -> int:
        out: int = await self._run("count_threads", self._count, now, idle_ttl)
        return out

    def _count(self, now: float, idle_ttl: float) -> int:
        row = (
            self._db.connection()
            .execute(
                "SELECT count(*) FROM a2a_threads WHERE expired_at IS NULL AND updated_at + ? > ?",
                (idle_ttl, now),
            )
            .fetchone()
        )
        return int(row[0])

    async def save_task(self, tenant_id: str, task: StoredTask) -> None:
        await self._run("save_task", self._save_task, tenant_id, task)

    def _save_task(self, tenant_id: str, task: StoredTask) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO a2a_tasks (tenant_id, task_id, context_id, state, updated_ns, data) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, task_id) DO UPDATE SET "
                "context_id = excluded.context_id, state = excluded.state, "
                "updated_ns = excluded.updated_ns, data = excluded.data",
                (tenant_id, task.task_id, task.context_id, task.state, task.updated_ns, task.data),
            )

    async def get_task(self, tenant_id: str, task_id: str) -> StoredTask | None:
        out: StoredTask | None = await self._run("get_task", self._get_task, tenant_id, task_id)
        return out

    def _get_task(self, tenant_id: str, task_id: str) -> StoredTask | None:
        row = (
            self._db.connection()
            .execute(
                _GET_TASK,
                (tenant_id, task_id),
            )
            .fetchone()
        )
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
        out: tuple[list[StoredTask], int] = await self._run(
            "list_tasks",
            self._list,
            tenant_id,
            context_id,
            state,
            updated_after_ns,
            before,
            limit,
        )
        return out

    def _list(
        self,
        tenant_id: str,
        context_id: str | None,
        state: int | None,
        after_ns: int | None,
        before: tuple[int, str] | None,
        limit: int,
    ) -> tuple[list[StoredTask], int]:
        where: list[str] = ["tenant_id = ?"]
        args: list[Any] = [tenant_id]
        if context_id is not None:
            where.append("context_id = ?")
            args.append(context_id)
        if state is not None:
            where.append("state = ?")
            args.append(state)
        if after_ns is not None:
            where.append("updated_ns >= ?")
            args.append(after_ns)
        with self._db.snapshot() as conn:
            total = conn.execute(
                f"SELECT count(*) FROM a2a_tasks WHERE {' AND '.join(where)}",  # noqa: S608
                args,
            ).fetchone()[0]
            if before is not None:
                where.append("(updated_ns < ? OR (updated_ns = ? AND task_id < ?))")
                args.extend([before[0], before[0], before[1]])
            rows = conn.execute(
                f"SELECT {_TASK} FROM a2a_tasks WHERE {' AND '.join(where)} "  # noqa: S608
                "ORDER BY updated_ns DESC, task_id DESC LIMIT ?",
                [*args, limit],
            ).fetchall()
        return [_task(r) for r in rows], int(total)

    async def delete_task(self, tenant_id: str, task_id: str) -> None:
        await self._run("delete_task", self._delete_task, tenant_id, task_id)

    def _delete_task(self, tenant_id: str, task_id: str) -> None:
        with self._db.write() as conn:
            conn.execute(
                "DELETE FROM a2a_tasks WHERE tenant_id = ? AND task_id = ?", (tenant_id, task_id)
            )
