"""A2A threads and tasks (lamina.threads.ports) in the SQLite file: the shared SQL, and the
cross-tenant sweep run directly."""

from __future__ import annotations

from lamina.store.sql.program import Program, count, row, rows
from lamina.store.sql.threads import SqlThreads
from lamina.store.sqlite.db import SQLITE, Database
from lamina.threads.ports import FINAL_STATES, WAITING_STATES, CleanupCounts


class SQLiteThreads(SqlThreads):
    def __init__(self, db: Database) -> None:
        super().__init__(db, SQLITE)

    async def cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts:
        return await self._exec.write(None, "cleanup", _cleanup(now, idle_ttl, retention))

    async def count_active(self, now: float, idle_ttl: float) -> int:
        def active() -> Program[int]:
            found = yield row(
                "SELECT (SELECT count(*) FROM a2a_threads WHERE expired_at IS NULL "
                "AND updated_at + %s > %s) + (SELECT count(*) FROM a2a_tasks "
                "WHERE thread IS NOT NULL AND updated_ns > %s)",
                idle_ttl,
                now,
                int((now - idle_ttl) * 1e9),
            )
            return int(found[0])

        return await self._exec.read(None, "count_threads", active())

    async def trim(self, max_tasks: int, max_threads: int, max_bytes: int) -> tuple[int, int]:
        return await self._exec.write(None, "trim", _trim(max_tasks, max_threads, max_bytes))


#: Threads per statement of ``_trim`` (two parameters each); tasks read per statement.
_PAIRS = 250
_BATCH = 500


def _marks(values: tuple[int, ...]) -> str:
    return ", ".join(["%s"] * len(values))


_FINAL = f"state IN ({_marks(FINAL_STATES)})"


def _delete_tasks(rowids: list[int]) -> Program[int]:
    """Delete the tasks of these rowids with their links; returns how many went."""
    deleted = 0
    for start in range(0, len(rowids), _PAIRS):
        part = rowids[start : start + _PAIRS]
        doomed = f"SELECT tenant_id, ref_key FROM a2a_tasks WHERE rowid IN ({_marks(tuple(part))})"  # noqa: S608
        yield count(
            f"DELETE FROM a2a_task_links WHERE (tenant_id, task) IN ({doomed})",  # noqa: S608
            *part,
        )
        deleted += yield count(
            f"DELETE FROM a2a_tasks WHERE rowid IN ({_marks(tuple(part))})",  # noqa: S608
            *part,
        )
    return deleted


def _oldest_finished(excess_tasks: int, excess_bytes: int) -> Program[list[int]]:
    """The rowids of the oldest finished tasks (by status time): ``excess_tasks`` of them,
    or as many as hold ``excess_bytes`` bytes."""
    doomed: list[int] = []
    freed = 0
    after: tuple[int, int] = (-(2**63), -1)
    while len(doomed) < excess_tasks or freed < excess_bytes:
        found = yield rows(
            f"SELECT rowid, size, updated_ns FROM a2a_tasks WHERE {_FINAL} "  # noqa: S608
            "AND (updated_ns, rowid) > (%s, %s) ORDER BY updated_ns, rowid LIMIT %s",
            *FINAL_STATES,
            *after,
            _BATCH,
        )
        for rowid, size, updated_ns in found:
            if len(doomed) >= excess_tasks and freed >= excess_bytes:
                break
            doomed.append(int(rowid))
            freed += int(size)
            after = (int(updated_ns), int(rowid))
        if len(found) < _BATCH:
            break
    return doomed


def _trim(max_tasks: int, max_threads: int, max_bytes: int) -> Program[tuple[int, int]]:
    """``ThreadStore.trim``: the oldest finished tasks past ``max_tasks`` and ``max_bytes``,
    then the expired and least recently used threads past ``max_threads`` with their tasks."""
    total = yield row("SELECT count(*), coalesce(sum(size), 0) FROM a2a_tasks")
    excess_tasks, excess_bytes = int(total[0]) - max_tasks, int(total[1]) - max_bytes
    tasks = 0
    if excess_tasks > 0 or excess_bytes > 0:
        doomed = yield from _oldest_finished(excess_tasks, excess_bytes)
        tasks = yield from _delete_tasks(doomed)
    total = yield row(
        "SELECT (SELECT count(*) FROM a2a_threads) + "
        "(SELECT count(*) FROM a2a_tasks WHERE thread IS NOT NULL)"
    )
    excess = int(total[0]) - max_threads
    if excess <= 0:
        return tasks, 0
    doomed_threads = yield from _least_used(excess)
    if not doomed_threads:
        return tasks, 0
    for start in range(0, len(doomed_threads), _PAIRS):
        part = doomed_threads[start : start + _PAIRS]
        pairs = ", ".join(["(%s, %s)"] * len(part))
        keys = [value for pair in part for value in pair]
        yield count(
            "DELETE FROM a2a_task_links WHERE (tenant_id, task) IN (SELECT tenant_id, "  # noqa: S608
            f"ref_key FROM a2a_tasks WHERE (tenant_id, context_id) IN (VALUES {pairs}))",
            *keys,
        )
        tasks += yield count(
            f"DELETE FROM a2a_tasks WHERE (tenant_id, context_id) IN (VALUES {pairs})",  # noqa: S608
            *keys,
        )
        yield count(
            f"DELETE FROM a2a_threads WHERE (tenant_id, thread_id) IN (VALUES {pairs})",  # noqa: S608
            *keys,
        )
    return tasks, len(doomed_threads)


def _least_used(excess: int) -> Program[list[tuple[str, str]]]:
    """``excess`` threads (tenant, id) to delete: the expired ones (oldest expiry first),
    then the least recently used, rows and those kept in their task (thread_seeds) alike;
    never one with a task waiting on its client."""
    keep = (
        "NOT EXISTS (SELECT 1 FROM a2a_tasks k WHERE k.tenant_id = h.tenant_id AND "  # noqa: S608
        f"k.context_id = h.thread_id AND k.state IN ({_marks(WAITING_STATES)}))"
    )
    found = yield rows(
        "SELECT tenant_id, thread_id FROM a2a_threads h "  # noqa: S608
        f"WHERE expired_at IS NOT NULL AND {keep} ORDER BY expired_at LIMIT %s",
        *WAITING_STATES,
        excess,
    )
    doomed = [(str(r[0]), str(r[1])) for r in found]
    if len(doomed) >= excess:
        return doomed
    left = excess - len(doomed)
    stored = yield rows(
        "SELECT updated_at, tenant_id, thread_id FROM a2a_threads h "  # noqa: S608
        f"WHERE expired_at IS NULL AND {keep} ORDER BY updated_at LIMIT %s",
        *WAITING_STATES,
        left,
    )
    kept = yield rows(
        "SELECT updated_ns / 1e9, tenant_id, context_id FROM a2a_tasks "  # noqa: S608
        f"WHERE thread IS NOT NULL AND state NOT IN ({_marks(WAITING_STATES)}) "
        "ORDER BY updated_ns LIMIT %s",
        *WAITING_STATES,
        left,
    )
    idle = sorted([(float(r[0]), str(r[1]), str(r[2])) for r in [*stored, *kept]])
    return doomed + [(tenant, thread) for _, tenant, thread in idle[:left]]


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
    # The threads kept in their task (thread_seeds): idle since their call.
    seeds = "thread IS NOT NULL AND updated_ns <= %s"
    before_ns = int((now - idle_ttl - retention) * 1e9)
    yield count(
        "DELETE FROM a2a_task_links WHERE (tenant_id, task) IN (SELECT tenant_id, "  # noqa: S608
        f"ref_key FROM a2a_tasks WHERE {seeds})",
        before_ns,
    )
    seeded = yield count(f"DELETE FROM a2a_tasks WHERE {seeds}", before_ns)  # noqa: S608
    return CleanupCounts(expired, states, purged + seeded, tasks + seeded)
