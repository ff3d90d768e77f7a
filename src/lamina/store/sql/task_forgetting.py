"""Forgetting reaches the A2A tasks, for both backends: a task is indexed by the memories and
sessions it refers to when it is saved (``a2a_task_links``: each reference's 64-bit key and
the task's key, deleted with the task), and the tasks and thread records of a forgotten
memory or session are rewritten in the transaction that forgets it
(lamina.threads.forgetting says what they keep). A task saved after a memory it names was
deleted is saved rewritten. A task's JSON is stored packed (lamina.threads.packing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lamina.store.sql.dialect import Dialect
from lamina.store.sql.program import Lock, Program, count, many, row, rows
from lamina.store.sql.thread_seeds import decode, find_seed, rewrite_seed
from lamina.threads.forgetting import (
    MEMORY,
    SESSION,
    link_key,
    references,
    scrub_task,
    scrub_thread,
)
from lamina.threads.packing import pack, stored_text
from lamina.threads.ports import StoredTask

#: The lock space of ``forgetting_lock``.
_FORGET_LOCK = 3


def forgetting_lock(tenant_id: str, *, shared: bool = False) -> Lock:
    """Taken first by a transaction deleting memories (exclusive) and by one saving a task
    that names memories (shared): a task saved while a memory it names is deleted either
    sees the delete's history or is seen by the delete (PostgreSQL reads what committed
    before each statement; SQLite's write transactions take turns anyway)."""
    return Lock(tenant_id, _FORGET_LOCK, shared=shared)


def save_task(
    d: Dialect, tenant_id: str, task: StoredTask, thread: bytes | None = None
) -> Program[None]:
    """Save the task and index it by what it refers to; ``thread``: its new thread, kept
    with it (lamina.store.sql.thread_seeds). A task naming a memory deleted
    already (a call that read it finishing after the delete) is saved as forgetting would
    have rewritten it, its thread's record of it too."""
    found = references(task.data)
    memories = sorted(ref for kind, ref in found if kind == MEMORY)
    if memories:
        yield forgetting_lock(tenant_id, shared=True)
    gone: list[str] = []
    for chunk, params in d.any_of_chunks("memory_id", memories):
        # Deleted and not back (an import keeps ids).
        deleted = yield rows(
            "SELECT DISTINCT memory_id FROM memory_history h WHERE tenant_id = %s "  # noqa: S608
            f"AND {chunk} AND operation = 'delete' AND NOT EXISTS (SELECT 1 FROM memories m "
            "WHERE m.tenant_id = h.tenant_id AND m.id = h.memory_id)",
            tenant_id,
            *params,
        )
        gone += [str(r[0]) for r in deleted]
    scrubbed = scrub_task(task.data, gone, ()) if gone else None
    packed = pack(task.data if scrubbed is None else scrubbed)
    yield count(
        "INSERT INTO a2a_tasks (tenant_id, task_id, context_id, state, updated_ns, data, packed, "
        "thread, size) VALUES (%s, %s, %s, %s, %s, '', %s, %s, %s) ON CONFLICT (tenant_id, "
        "task_id) DO UPDATE SET context_id = excluded.context_id, state = excluded.state, "
        "updated_ns = excluded.updated_ns, data = excluded.data, packed = excluded.packed, "
        "thread = coalesce(excluded.thread, a2a_tasks.thread), size = length(excluded.packed) "
        "+ coalesce(length(coalesce(excluded.thread, a2a_tasks.thread)), 0)",
        tenant_id,
        task.task_id,
        task.context_id,
        task.state,
        task.updated_ns,
        packed,
        thread,
        len(packed) + len(thread or b""),
    )
    kept = sorted(r for r in found if r[1] not in gone)
    if kept:
        key = yield row(
            "SELECT ref_key FROM a2a_tasks WHERE tenant_id = %s AND task_id = %s",
            tenant_id,
            task.task_id,
        )
        yield many(
            "INSERT INTO a2a_task_links (tenant_id, ref, task) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            sorted({(tenant_id, link_key(kind, ref), int(key[0])) for kind, ref in kept}),
        )
    if scrubbed is not None:
        yield from _scrub_threads(d, tenant_id, {task.context_id: {task.task_id}}, gone)


def delete_links(tenant_id: str, task_id: str) -> Program[None]:
    """Delete the links of the tenant's task ``task_id`` (before the task itself)."""
    yield count(
        "DELETE FROM a2a_task_links WHERE tenant_id = %s AND task = (SELECT ref_key "
        "FROM a2a_tasks WHERE tenant_id = %s AND task_id = %s)",
        tenant_id,
        tenant_id,
        task_id,
    )


def forget_in_tasks(
    d: Dialect, tenant_id: str, *, memories: Sequence[str] = (), sessions: Sequence[str] = ()
) -> Program[int]:
    """Rewrite the tenant's tasks referring to ``memories`` or ``sessions`` and their
    threads' records of them, and drop those references; returns how many tasks held
    their text."""
    found: set[int] = set()
    for kind, refs in ((MEMORY, list(dict.fromkeys(memories))), (SESSION, sorted(set(sessions)))):
        keys = sorted({link_key(kind, ref) for ref in refs})
        for chunk, params in d.any_of_chunks("ref", keys):
            # Two statements by the primary key, no join (the planner of either backend may
            # scan the tasks for one).
            named = yield rows(
                f"SELECT task FROM a2a_task_links WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                tenant_id,
                *params,
            )
            found.update(int(r[0]) for r in named)
            yield count(
                f"DELETE FROM a2a_task_links WHERE tenant_id = %s AND {chunk}",  # noqa: S608
                tenant_id,
                *params,
            )
    threads: dict[str, set[str]] = {}
    for chunk, params in d.any_of_chunks("ref_key", sorted(found)):
        tasks = yield rows(
            "SELECT task_id, context_id, data, packed FROM a2a_tasks "  # noqa: S608
            f"WHERE tenant_id = %s AND {chunk}{d.for_update}",
            tenant_id,
            *params,
        )
        scrubbed = [(scrub_task(stored_text(r[2], r[3]), memories, sessions), r) for r in tasks]
        changed = [(data, r) for data, r in scrubbed if data is not None]
        if changed:
            packed = [(pack(data), r[0]) for data, r in changed]
            yield many(
                "UPDATE a2a_tasks SET data = '', packed = %s, size = %s + "
                "coalesce(length(thread), 0) WHERE tenant_id = %s AND task_id = %s",
                [(blob, len(blob), tenant_id, task_id) for blob, task_id in packed],
            )
        for _, r in changed:
            threads.setdefault(str(r[1]), set()).add(str(r[0]))
    yield from _scrub_threads(d, tenant_id, threads, memories)
    return sum(len(t) for t in threads.values())


def _scrub_threads(
    d: Dialect, tenant_id: str, threads: dict[str, set[str]], memories: Sequence[str]
) -> Program[None]:
    """The records of the tasks ``threads`` names (thread id -> task ids) in those threads,
    and the forgotten ``memories`` in their session contexts (lamina.threads.forgetting)."""
    for thread_id in sorted(threads):
        thread = yield rows(
            "SELECT context FROM a2a_threads WHERE tenant_id = %s "  # noqa: S608
            f"AND thread_id = %s{d.for_update}",
            tenant_id,
            thread_id,
        )
        if not thread:
            yield from _scrub_seed(d, tenant_id, thread_id, threads[thread_id], memories)
            continue
        changed = scrub_thread(thread[0][0], threads[thread_id], memories)
        if changed is not None:
            # A new version: a request holding the old context writes again on top of this.
            yield count(
                "UPDATE a2a_threads SET context = %s, version = version + 1 "
                "WHERE tenant_id = %s AND thread_id = %s",
                changed,
                tenant_id,
                thread_id,
            )


def _scrub_seed(
    d: Dialect, tenant_id: str, thread_id: str, task_ids: set[str], memories: Sequence[str]
) -> Program[None]:
    """``_scrub_threads`` for a thread kept in its task (lamina.store.sql.thread_seeds)."""
    seed = yield from find_seed(tenant_id, thread_id, d.for_update)
    if seed is None:
        return
    thread = decode(thread_id, *seed)
    changed = scrub_thread(thread.context, task_ids, memories)
    if changed is not None:
        yield from rewrite_seed(
            seed[0],
            tenant_id,
            seed[1],
            replace(thread, context=changed, version=thread.version + 1),
        )
