"""Forgetting reaches the A2A tasks, for both backends: a task is indexed by the memories and
sessions it refers to when it is saved (``a2a_task_refs``, deleted with the task), and the
tasks and thread records of a forgotten memory or session are rewritten in the transaction
that forgets it (lamina.threads.forgetting says what they keep)."""

from __future__ import annotations

from collections.abc import Sequence

from lamina.store.sql.dialect import Dialect
from lamina.store.sql.program import Program, Step, count, many, rows
from lamina.threads.forgetting import MEMORY, SESSION, references, scrub_task, scrub_thread

#: References per statement where a statement lists them.
_CHUNK = 500


def index_task(tenant_id: str, task_id: str, data: str) -> Step | None:
    """The step indexing a task being saved by what it refers to (None: nothing)."""
    found = references(data)
    if not found:
        return None
    return many(
        "INSERT INTO a2a_task_refs (tenant_id, kind, ref, task_id) VALUES (%s, %s, %s, %s) "
        "ON CONFLICT DO NOTHING",
        [(tenant_id, kind, ref, task_id) for kind, ref in sorted(found)],
    )


def forget_in_tasks(
    d: Dialect, tenant_id: str, *, memories: Sequence[str] = (), sessions: Sequence[str] = ()
) -> Program[int]:
    """Rewrite the tenant's tasks referring to ``memories`` or ``sessions`` and their
    threads' records of them, and drop those references; returns how many tasks."""
    found: set[str] = set()
    for kind, refs in ((MEMORY, list(dict.fromkeys(memories))), (SESSION, sorted(set(sessions)))):
        for start in range(0, len(refs), _CHUNK):
            chunk, params = d.any_of("ref", refs[start : start + _CHUNK])
            # Two statements by the primary key, no join (the planner of either backend may
            # scan the tasks for one).
            named = yield rows(
                "SELECT task_id FROM a2a_task_refs "  # noqa: S608
                f"WHERE tenant_id = %s AND kind = %s AND {chunk}",
                tenant_id,
                kind,
                *params,
            )
            found.update(str(r[0]) for r in named)
            yield count(
                f"DELETE FROM a2a_task_refs WHERE tenant_id = %s AND kind = %s AND {chunk}",  # noqa: S608
                tenant_id,
                kind,
                *params,
            )
    threads: dict[str, set[str]] = {}
    ids = sorted(found)
    for start in range(0, len(ids), _CHUNK):
        chunk, params = d.any_of("task_id", ids[start : start + _CHUNK])
        tasks = yield rows(
            "SELECT task_id, context_id, data FROM a2a_tasks "  # noqa: S608
            f"WHERE tenant_id = %s AND {chunk}{d.for_update}",
            tenant_id,
            *params,
        )
        if tasks:
            yield many(
                "UPDATE a2a_tasks SET data = %s WHERE tenant_id = %s AND task_id = %s",
                [(scrub_task(r[2], memories, sessions), tenant_id, r[0]) for r in tasks],
            )
        for r in tasks:
            threads.setdefault(str(r[1]), set()).add(str(r[0]))
    for thread_id in sorted(threads):
        thread = yield rows(
            "SELECT context FROM a2a_threads WHERE tenant_id = %s "  # noqa: S608
            f"AND thread_id = %s{d.for_update}",
            tenant_id,
            thread_id,
        )
        changed = scrub_thread(thread[0][0], threads[thread_id], memories) if thread else None
        if changed is not None:
            # A new version: a request holding the old context writes again on top of this.
            yield count(
                "UPDATE a2a_threads SET context = %s, version = version + 1 "
                "WHERE tenant_id = %s AND thread_id = %s",
                changed,
                tenant_id,
                thread_id,
            )
    return len(found)
