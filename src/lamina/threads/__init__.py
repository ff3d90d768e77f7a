"""Threads and tasks of the A2A server: one thread per contextId, owned by one tenant.

``service.py`` keeps each thread's conversation context (expiry, size limit, compare-and-swap
writes, cleanup) and, through ``tasks.py``, the threads' tasks; ``ports.py`` says what they
need stored.
"""

from lamina.threads.ports import CleanupCounts, StoredTask, StoredThread, ThreadStore
from lamina.threads.service import IDENTIFIERS, Thread, ThreadService
from lamina.threads.tasks import TaskService

__all__ = [
    "IDENTIFIERS",
    "CleanupCounts",
    "StoredTask",
    "StoredThread",
    "TaskService",
    "Thread",
    "ThreadService",
    "ThreadStore",
]
