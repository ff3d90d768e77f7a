"""A one-shot call's thread, stored with its task (issue 35): for both backends.

A call that names no thread (no contextId) gets a new one, which its client may continue
(its identifiers are the defaults of the calls that follow) but most never do. Its row is
therefore not written: the thread (its times, context, version and identifiers) is kept
packed (lamina.threads.packing) in the ``thread`` column of the call's task, about 200
bytes instead of a row and three index entries. The first write to the thread (a call
continuing it, a context written) moves it to its row (``take_seed``), and from then on it
is a thread like any other. Reads see it where it is; forgetting rewrites it in its task;
the cleanup counts it, expires it with its task (``thread_ttl`` after its call, then
``expired_retention``) and the size cap deletes it with its task (the SQLite and PostgreSQL
sweeps of each backend do this).
"""

from __future__ import annotations

import json
from typing import Any

from lamina.store.sql.dialect import Dialect
from lamina.store.sql.program import Program, count, rows
from lamina.threads.packing import pack_with, unpack
from lamina.threads.ports import NewThread, StoredThread


def _words(thread_id: str, task_id: str) -> str:
    """What the packed thread is compressed against: the ids its record of the call names."""
    return f'{{"task":"{task_id}","contextId":"{thread_id}"'


def encode(thread: NewThread, task_id: str) -> bytes:
    """The thread as its task's (``task_id``) ``thread`` column holds it."""
    fields: dict[str, Any] = {
        "created_at": thread.created_at,
        "context": thread.context,
        "context_expires_at": thread.context_expires_at,
        "version": thread.version,
        "identifiers": thread.identifiers,
    }
    text = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return pack_with(text, _words(thread.thread_id, task_id))


def decode(thread_id: str, task_id: str, data: bytes) -> StoredThread:
    """The thread of the ``thread`` column of task ``task_id`` (idle since it was created)."""
    fields = json.loads(unpack(bytes(data), _words(thread_id, task_id)))
    created = float(fields["created_at"])
    return StoredThread(
        thread_id,
        created,
        created,
        False,
        str(fields["context"]),
        fields["context_expires_at"],
        int(fields["version"]),
        str(fields["identifiers"]),
    )


def find_seed(
    tenant_id: str, thread_id: str, for_update: str = ""
) -> Program[tuple[str, bytes] | None]:
    """The task (its id) keeping the thread ``thread_id`` and the packed thread, if any
    (``for_update``: the dialect's row lock, or none)."""
    found = yield rows(
        "SELECT task_id, thread FROM a2a_tasks WHERE tenant_id = %s AND context_id = %s "  # noqa: S608
        f"AND thread IS NOT NULL{for_update}",
        tenant_id,
        thread_id,
    )
    return None if not found else (str(found[0][0]), bytes(found[0][1]))


def take_seed(d: Dialect, tenant_id: str, thread_id: str) -> Program[StoredThread | None]:
    """Move the thread kept in a task to its row (created or overwritten) and return it;
    None when no task keeps it."""
    found = yield from find_seed(tenant_id, thread_id, d.for_update)
    if found is None:
        return None
    task_id, data = found
    thread = decode(thread_id, task_id, data)
    yield count(
        "INSERT INTO a2a_threads (tenant_id, thread_id, created_at, updated_at, context, "
        "context_expires_at, version, identifiers) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (tenant_id, thread_id) DO UPDATE SET created_at = excluded.created_at, "
        "updated_at = excluded.updated_at, context = excluded.context, "
        "context_expires_at = excluded.context_expires_at, version = excluded.version, "
        "identifiers = excluded.identifiers, expired_at = NULL",
        tenant_id,
        thread_id,
        thread.created_at,
        thread.updated_at,
        thread.context,
        thread.context_expires_at,
        thread.version,
        thread.identifiers,
    )
    yield count(
        "UPDATE a2a_tasks SET thread = NULL, size = size - %s WHERE tenant_id = %s "
        "AND task_id = %s",
        len(data),
        tenant_id,
        task_id,
    )
    return thread


def rewrite_seed(task_id: str, tenant_id: str, old: bytes, thread: StoredThread) -> Program[None]:
    """Write ``thread`` (its context changed) back into the task keeping it."""
    data = encode(
        NewThread(
            thread.thread_id,
            thread.created_at,
            thread.context,
            thread.context_expires_at,
            thread.version,
            thread.identifiers,
        ),
        task_id,
    )
    yield count(
        "UPDATE a2a_tasks SET thread = %s, size = size - %s + %s WHERE tenant_id = %s "
        "AND task_id = %s",
        data,
        len(old),
        len(data),
        tenant_id,
        task_id,
    )
