"""Threads: one per A2A contextId, owned by one tenant, persisted in the store.

A thread remembers its conversation context: the identifiers the client gave (user_id,
project_id, ...), which later tool calls in the thread use as defaults, the session context
it was opened with, and its last tool calls. The context expires ``state_ttl`` after its last
write, except the identifiers, which live as long as the thread; the thread itself expires
when idle for ``thread_ttl`` and cannot be continued. A
context larger than ``max_state_bytes`` is refused and nothing is written.

Every call checks the tenant, waits for the start-up and is counted (``calls.py``); reads,
cleanup and counts are retried on a transient failure (a compare-and-swap write is not: its
loop reads again). The threads' tasks are read and written through ``ThreadService.tasks``
(``tasks.py``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from lamina.checks import check_tenant, invalid, storable
from lamina.config import ServerSettings
from lamina.errors import ErrorCode, LaminaError
from lamina.threads.calls import Calls
from lamina.threads.ports import CleanupCounts, NewThread, StoredThread, ThreadStore
from lamina.threads.tasks import TaskService

log = logging.getLogger("lamina.server")

IDENTIFIERS = ("agent_id", "user_id", "session_id", "project_id", "team_id", "org_id", "company_id")


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Thread:
    thread_id: str
    tenant_id: str
    created_at: float
    updated_at: float
    conversation_context: dict[str, Any]
    #: True when this call created the thread.
    new: bool
    version: int
    #: False for a thread made by ``ThreadService.fresh``: not in the store until its first
    #: call writes it (``ThreadService.first_write``) with the call's task.
    stored: bool = True

    @property
    def identifiers(self) -> dict[str, str]:
        ids = self.conversation_context.get("identifiers", {})
        return {k: v for k, v in ids.items() if k in IDENTIFIERS and isinstance(v, str)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "thread_id": self.thread_id,
            "tenant_id": self.tenant_id,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
            "conversation_context": self.conversation_context,
        }


class ThreadService:
    def __init__(
        self,
        store: ThreadStore,
        settings: ServerSettings,
        *,
        clock: Callable[[], float] = time.time,
        on_cleanup: Callable[[CleanupCounts], None] | None = None,
        calls: Calls | None = None,
    ) -> None:
        """``calls``: the start-up every call waits for, its retries and metrics (the
        runtime's ``thread_service`` gives them; default: none of them)."""
        self._store = store
        self._settings = settings
        self._clock = clock
        self._on_cleanup = on_cleanup
        self._calls = calls or Calls()
        self._task: asyncio.Task[None] | None = None
        #: The threads' A2A tasks, per tenant.
        self.tasks = TaskService(store, self._calls)

    def _expired_error(self, thread_id: str) -> LaminaError:
        ttl = self._settings.thread_ttl
        idle = f"{ttl / 3600:g} h" if ttl >= 3600 else f"{ttl:g} s"
        return LaminaError(
            ErrorCode.THREAD_EXPIRED,
            f"thread {thread_id!r} expired after {idle} without activity: "
            "start a new thread (omit contextId)",
            details={"thread_id": thread_id, "thread_ttl_seconds": self._settings.thread_ttl},
        )

    def _decode(self, tenant_id: str, row: StoredThread, new: bool) -> Thread:
        context: dict[str, Any] = {}
        if row.context_expires_at is None or row.context_expires_at > self._clock():
            context = self._load(tenant_id, row, "context", row.context)
        if "identifiers" not in context:
            # The context expired (or never held any): the thread's identifiers outlive it.
            identifiers = self._load(tenant_id, row, "identifiers", row.identifiers)
            if identifiers:
                context["identifiers"] = identifiers
        return Thread(
            row.thread_id, tenant_id, row.created_at, row.updated_at, context, new, row.version
        )

    @staticmethod
    def _load(tenant_id: str, row: StoredThread, what: str, text: str) -> dict[str, Any]:
        try:
            loaded = json.loads(text)
        except ValueError:
            log.error("thread %s of tenant %s: unreadable %s", row.thread_id, tenant_id, what)
            return {}
        return loaded if isinstance(loaded, dict) else {}

    async def open(self, tenant_id: str, thread_id: str) -> Thread:
        """The thread, created on first use; THREAD_EXPIRED when it has expired;
        INVALID_ARGUMENT for an id no store can hold (NUL, lone surrogates)."""
        tenant_id = check_tenant(tenant_id)
        if not storable(thread_id):
            raise invalid(
                "contextId must be valid Unicode text without NUL characters", "contextId"
            )
        row, created = await self._calls.run(
            "open_thread",
            lambda: self._store.open_thread(
                tenant_id, thread_id, self._clock(), self._settings.thread_ttl
            ),
            retried=False,
        )
        if row.expired:
            raise self._expired_error(thread_id)
        return self._decode(tenant_id, row, created)

    async def get(self, tenant_id: str, thread_id: str) -> Thread | None:
        tenant_id = check_tenant(tenant_id)
        if not storable(thread_id):
            return None
        row = await self._calls.run(
            "get_thread", lambda: self._store.get_thread(tenant_id, thread_id)
        )
        if row is None:
            return None
        if row.expired or row.updated_at + self._settings.thread_ttl <= self._clock():
            raise self._expired_error(thread_id)
        return self._decode(tenant_id, row, False)

    def _encode(self, context: dict[str, Any]) -> str:
        text = json.dumps(context, ensure_ascii=False, separators=(",", ":"), default=str)
        size = len(text.encode("utf-8"))
        if size > self._settings.max_state_bytes:
            raise LaminaError(
                ErrorCode.THREAD_STATE_TOO_LARGE,
                f"the thread's conversation context would be {size} bytes, over the limit of "
                f"{self._settings.max_state_bytes}: nothing was written; start a new thread",
                details={"size": size, "max_bytes": self._settings.max_state_bytes},
            )
        return text

    def check_fits(self, thread: Thread, change: Callable[[dict[str, Any]], None]) -> None:
        """Raise THREAD_STATE_TOO_LARGE if ``change`` would make the context too large."""
        context = json.loads(json.dumps(thread.conversation_context, default=str))
        change(context)
        self._encode(context)

    def fresh(self, tenant_id: str, thread_id: str) -> Thread:
        """A new thread with an id the server just made (a one-shot call in a new thread),
        not written yet: its first call writes it once, with its context and the call's
        task (``first_write``, ``ThreadStore.create_thread``)."""
        now = self._clock()
        return Thread(thread_id, tenant_id, now, now, {}, True, 0, stored=False)

    def first_write(
        self, thread: Thread, change: Callable[[dict[str, Any]], None] | None = None
    ) -> NewThread:
        """What creates the ``fresh`` thread with ``change`` applied to its context (None:
        created without a context, as ``open`` creates a thread); THREAD_STATE_TOO_LARGE
        when that context is too large."""
        if change is None:
            return NewThread(thread.thread_id, thread.created_at)
        text, identifiers, expires = self._written(thread.conversation_context, change)
        return NewThread(thread.thread_id, thread.created_at, text, expires, 1, identifiers)

    def _written(
        self, context: dict[str, Any], change: Callable[[dict[str, Any]], None]
    ) -> tuple[str, str, float]:
        """``change`` applied to ``context``, then the context as stored (its oldest turns
        past ``max_turns`` dropped) and its identifiers, as JSON, and when it expires
        (``state_ttl`` from now); THREAD_STATE_TOO_LARGE when it is too large."""
        change(context)
        turns = context.get("turns")
        if isinstance(turns, list) and len(turns) > self._settings.max_turns:
            del turns[: len(turns) - self._settings.max_turns]
        identifiers = json.dumps(
            context.get("identifiers") or {}, ensure_ascii=False, separators=(",", ":")
        )
        return self._encode(context), identifiers, self._clock() + self._settings.state_ttl

    async def update(
        self,
        tenant_id: str,
        thread_id: str,
        change: Callable[[dict[str, Any]], None],
        opened: Thread | None = None,
    ) -> dict[str, Any]:
        """Apply ``change`` to the thread's context and write it (compare-and-swap, retried
        when another request wrote in between). ``opened``: the thread as this request
        opened it, tried first without reading it again. Returns the new context."""
        tenant_id = check_tenant(tenant_id)
        return await self._calls.run(
            "update_thread",
            lambda: self._swap(tenant_id, thread_id, change, opened),
            retried=False,
        )

    async def _swap(
        self,
        tenant_id: str,
        thread_id: str,
        change: Callable[[dict[str, Any]], None],
        opened: Thread | None,
    ) -> dict[str, Any]:
        """``update``'s compare-and-swap loop (its reads retried on a transient failure)."""
        for attempt in range(20):
            if attempt == 0 and opened is not None and opened.thread_id == thread_id:
                context, version = opened.conversation_context, opened.version
            else:
                row = await self._calls.retry.run(
                    "get_thread", lambda: self._store.get_thread(tenant_id, thread_id)
                )
                if row is None or row.expired:
                    raise self._expired_error(thread_id)
                context = self._decode(tenant_id, row, False).conversation_context
                version = row.version
            text, identifiers, expires = self._written(context, change)
            if await self._store.save_context(
                tenant_id,
                thread_id,
                context=text,
                expires_at=expires,
                expected_version=version,
                identifiers=identifiers,
            ):
                return context
        raise LaminaError(
            ErrorCode.CONFLICT,
            f"thread {thread_id!r} is being written by many requests at once: try again",
            details={"thread_id": thread_id},
        )

    async def cleanup(self) -> CleanupCounts:
        counts = await self._calls.run(
            "cleanup_threads",
            lambda: self._store.cleanup(
                self._clock(), self._settings.thread_ttl, self._settings.expired_retention
            ),
        )
        tasks, threads = await self._calls.run(
            "trim_threads",
            lambda: self._store.trim(
                self._settings.max_tasks,
                self._settings.max_threads,
                self._settings.max_task_bytes,
            ),
        )
        counts = replace(counts, tasks_trimmed=tasks, threads_trimmed=threads)
        if self._on_cleanup is not None:
            self._on_cleanup(counts)
        if counts.threads_expired or counts.states_removed or counts.threads_purged:
            log.info(
                "thread cleanup: %d expired, %d contexts removed, %d threads and %d tasks purged",
                counts.threads_expired,
                counts.states_removed,
                counts.threads_purged,
                counts.tasks_purged,
            )
        if tasks or threads:
            log.info(
                "thread cleanup: %d tasks and %d threads deleted past the size caps "
                "(server.max_tasks %d, server.max_task_bytes %d, server.max_threads %d)",
                tasks,
                threads,
                self._settings.max_tasks,
                self._settings.max_task_bytes,
                self._settings.max_threads,
            )
        return counts

    async def active(self) -> int:
        """Threads, across tenants, neither expired nor idle past ``thread_ttl``."""
        return await self._calls.run(
            "count_active_threads",
            lambda: self._store.count_active(self._clock(), self._settings.thread_ttl),
        )

    async def recover(self) -> int:
        """On start: expire what expired while no server ran, count the active threads."""
        await self.cleanup()
        active = await self.active()
        log.info("recovered %d active thread(s) from the store", active)
        return active

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="lamina-thread-cleanup")

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._settings.cleanup_interval)
            try:
                await self.cleanup()
            except LaminaError as exc:
                log.warning("thread cleanup failed: %s", exc)
            except Exception:
                log.exception("thread cleanup failed")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
