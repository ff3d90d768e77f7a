"""A2A threads and tasks (lamina.threads.ports) in the SQLite file: the shared SQL, and the
cross-tenant sweep run directly."""

from __future__ import annotations

from lamina.store.sql.program import Program, count, row
from lamina.store.sql.threads import SqlThreads
from lamina.store.sqlite.db import SQLITE, Database
from lamina.threads.ports import CleanupCounts


class SQLiteThreads(SqlThreads):
    def __init__(self, db: Database) -> None:
        super().__init__(db, SQLITE)

    async def cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts:
        return await self._exec.write(None, "cleanup", _cleanup(now, idle_ttl, retention))

    async def count_active(self, now: float, idle_ttl: float) -> int:
        def active() -> Program[int]:
            found = yield row(
                "SELECT count(*) FROM a2a_threads WHERE expired_at IS NULL "
                "AND updated_at + %s > %s",
                idle_ttl,
                now,
            )
            return int(found[0])

        return await self._exec.read(None, "count_threads", active())


def _cleanup(now: float, idle_ttl: float, retention: float) -> Program[CleanupCounts]:
    expired = yield count(
        "UPDATE a2a_threads SET expired_at = %s, context = '{}', identifiers = '{}', "
        "context_expires_at = NULL, version = version + 1 "
        "WHERE expired_at IS NULL AND updated_at + %s <= %s",
        now,
        idle_ttl,
        now,
    )
    states = yield count(
        "UPDATE a2a_threads SET context = '{}', context_expires_at = NULL, "
        "version = version + 1 "
        "WHERE context_expires_at IS NOT NULL AND context_expires_at <= %s",
        now,
    )
    purged = (
        "EXISTS (SELECT 1 FROM a2a_threads t WHERE t.tenant_id = k.tenant_id "
        "AND t.thread_id = k.context_id AND t.expired_at IS NOT NULL AND t.expired_at + %s <= %s)"
    )
    yield count(
        "DELETE FROM a2a_task_links WHERE (tenant_id, task) IN (SELECT k.tenant_id, "  # noqa: S608
        f"k.ref_key FROM a2a_tasks k WHERE {purged})",
        retention,
        now,
    )
    tasks = yield count(
        f"DELETE FROM a2a_tasks AS k WHERE {purged}",  # noqa: S608
        retention,
        now,
    )
    purged = yield count(
        "DELETE FROM a2a_threads WHERE expired_at IS NOT NULL AND expired_at + %s <= %s",
        retention,
        now,
    )
    return CleanupCounts(expired, states, purged, tasks)
