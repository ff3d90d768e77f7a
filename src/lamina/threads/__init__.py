"""Threads and tasks of the A2A server: one thread per contextId, owned by one tenant.

``service.py`` keeps each thread's conversation context (expiry, size limit, compare-and-swap
writes, cleanup); ``ports.py`` says what it needs stored.
"""

from lamina.threads.ports import CleanupCounts, StoredTask, StoredThread, ThreadStore
from lamina.threads.service import IDENTIFIERS, Thread, ThreadService

__all__ = [
    "IDENTIFIERS",
    "CleanupCounts",
    "StoredTask",
    "StoredThread",
    "Thread",
    "ThreadService",
    "ThreadStore",
]
