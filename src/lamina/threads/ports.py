"""The threads port: what A2A threads (contextId) and tasks need stored, and their records.

A thread row holds who owns it (tenant_id), when it was created and last used, and its
conversation context: a JSON object the server keeps per thread, with its own expiry and a
version for compare-and-swap writes. A task row holds one A2A task as JSON, with the
columns ListTasks filters and sorts on. Times are seconds since the epoch (floats).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NotRequired, Protocol, TypedDict, Unpack


@dataclass(frozen=True)
class StoredThread:
    thread_id: str
    created_at: float
    updated_at: float
    expired: bool
    #: The conversation context as JSON text ("{}" when none or expired).
    context: str
    #: When the conversation context expires (None: there is none).
    context_expires_at: float | None
    version: int
    #: The identifiers the client gave (user_id, project_id, ...) as a JSON object: they
    #: live as long as the thread, not only as long as its conversation context.
    identifiers: str = "{}"


@dataclass(frozen=True)
class StoredTask:
    task_id: str
    context_id: str
    #: The A2A TaskState number.
    state: int
    #: Sort key of ListTasks: the status timestamp in nanoseconds (0 when absent).
    updated_ns: int
    #: The task as JSON text.
    data: str


@dataclass(frozen=True)
class NewThread:
    """A thread written once its first call has finished, together with that call's task
    (``ThreadStore.create_thread``): one transaction instead of opening the thread, saving
    its context and saving the task. Only for thread ids the server made (no other request
    can know them before the answer)."""

    thread_id: str
    #: Also its last activity: the thread was opened when the call began.
    created_at: float
    context: str = "{}"
    context_expires_at: float | None = None
    #: 0 for a thread created without a context (as ``open_thread`` creates one); 1 with.
    version: int = 0
    identifiers: str = "{}"


#: The A2A TaskState numbers of the states a task never leaves (completed, failed, canceled,
#: rejected): the size cap deletes only such tasks.
FINAL_STATES = (3, 4, 5, 7)
#: The states in which a task waits on its client (input-required, auth-required): the size
#: cap keeps them and their threads.
WAITING_STATES = (6, 8)


@dataclass(frozen=True)
class CleanupCounts:
    threads_expired: int
    states_removed: int
    threads_purged: int
    tasks_purged: int
    #: Deleted past the size caps (``trim``).
    tasks_trimmed: int = 0
    threads_trimmed: int = 0


class ContextWrite(TypedDict):
    """What ``save_context`` writes: the context (a JSON object) expiring at ``expires_at``,
    and the identifiers (absent: none), if the thread's version is still ``expected_version``."""

    context: str
    expires_at: float
    expected_version: int
    identifiers: NotRequired[str]


class TaskListing(TypedDict):
    """The page of tasks ``list_tasks`` reads: filters (None: any), cursor, size."""

    context_id: str | None
    state: int | None
    updated_after_ns: int | None
    before: tuple[int, str] | None
    limit: int


class ThreadStore(Protocol):
    async def open_thread(
        self, tenant_id: str, thread_id: str, now: float, idle_ttl: float
    ) -> tuple[StoredThread, bool]:
        """Create the thread (True) or record activity on it (False). A thread marked
        expired, or idle for ``idle_ttl`` seconds or more, is (marked) expired and returned
        unchanged with ``expired`` set."""
        ...

    async def get_thread(self, tenant_id: str, thread_id: str) -> StoredThread | None: ...

    async def save_context(
        self, tenant_id: str, thread_id: str, **write: Unpack[ContextWrite]
    ) -> bool:
        """Replace the conversation context (expiring at ``expires_at``) and the thread's
        identifiers (expiring with the thread) if the version is still ``expected_version``
        (then it becomes expected_version + 1); False when another writer came first."""
        ...

    async def cleanup(self, now: float, idle_ttl: float, retention: float) -> CleanupCounts:
        """Across tenants: mark threads idle past ``idle_ttl`` expired (clearing their
        context and identifiers), clear conversation contexts past their expiry (keeping the
        identifiers), and delete threads expired
        for ``retention`` seconds together with their tasks."""
        ...

    async def count_active(self, now: float, idle_ttl: float) -> int:
        """Threads, across tenants, neither expired nor idle past ``idle_ttl``."""
        ...

    async def trim(self, max_tasks: int, max_threads: int, max_bytes: int) -> tuple[int, int]:
        """Across tenants: past ``max_tasks`` tasks, then past ``max_bytes`` bytes of them
        (each task's stored size: its packed JSON), delete the oldest (by status time) in a
        ``FINAL_STATES``; past ``max_threads`` threads, delete the expired ones (oldest
        expiry first), then the least recently used, each with its tasks, never a thread
        with a task in a ``WAITING_STATES``. Returns how many tasks and threads went."""
        ...

    async def save_task(self, tenant_id: str, task: StoredTask) -> None:
        """Save (or replace) the task, indexed by the memories and sessions it refers to
        (lamina.threads.forgetting.references): forgetting one rewrites the tasks that held
        its text. A task naming a memory deleted already is saved rewritten."""
        ...

    async def create_thread(self, tenant_id: str, thread: NewThread, task: StoredTask) -> None:
        """Create ``thread`` and save ``task`` in one transaction (an existing thread of that
        id is an error: the id is new)."""
        ...

    async def get_task(self, tenant_id: str, task_id: str) -> StoredTask | None: ...

    async def list_tasks(
        self, tenant_id: str, **listing: Unpack[TaskListing]
    ) -> tuple[list[StoredTask], int]:
        """One page, newest first by (updated_ns, task_id), strictly after the cursor
        ``before``; and the number of tasks matching the filters."""
        ...

    async def delete_task(self, tenant_id: str, task_id: str) -> None: ...
