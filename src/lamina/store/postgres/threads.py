"""A2A threads and tasks (lamina.threads.ports) in PostgreSQL: the shared SQL under
row-level security on tenant_id; the cross-tenant cleanup and count run as SECURITY DEFINER
functions (migration 0006)."""

from __future__ import annotations

from lamina.store.postgres.db import POSTGRES, Database
from lamina.store.sql.program import Program, row
from lamina.store.sql.threads import SqlThreads
from lamina.threads.ports import FINAL_STATES, WAITING_STATES, CleanupCounts


class PostgresThreads(SqlThreads):
    def __init__(self, db: Database) -> None:
        super().__init__(db, POSTGRES)

    async def cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts:
        def sweep() -> Program[CleanupCounts]:
            found = yield row(
                "SELECT * FROM lamina_thread_cleanup(%s, %s, %s)", now, idle_ttl, retention
            )
            return CleanupCounts(int(found[0]), int(found[1]), int(found[2]), int(found[3]))

        return await self._exec.write(None, "cleanup", sweep())

    async def count_active(self, now: float, idle_ttl: float) -> int:
        def active() -> Program[int]:
            found = yield row("SELECT lamina_active_threads(%s, %s)", now, idle_ttl)
            return int(found[0])

        return await self._exec.read(None, "count_threads", active())

    async def trim(self, max_tasks: int, max_threads: int, max_bytes: int) -> tuple[int, int]:
        def trim() -> Program[tuple[int, int]]:
            found = yield row(
                "SELECT * FROM lamina_task_trim(%s, %s, %s, %s, %s)",
                max_tasks,
                max_bytes,
                max_threads,
                list(FINAL_STATES),
                list(WAITING_STATES),
            )
            return int(found[0]), int(found[1])

        return await self._exec.write(None, "trim", trim())
