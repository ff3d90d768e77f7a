"""A background worker pool fed by a bounded queue: the shape of every buffer.

``trigger(key)`` never blocks: it queues the key (a key already waiting is not queued
twice) or, when the queue is full, drops the request with a warning that names it and
counts it (``dropped_count()``). Workers run ``process(key)``; a key is never processed by
two workers of one buffer at once (across processes, ``process`` itself takes a lease).
``stop()`` refuses new triggers, lets the workers finish the work in progress and what is
queued (up to ``grace_seconds``), then cancels the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)


class BackgroundBuffer(Generic[K]):
    def __init__(
        self,
        name: str,
        process: Callable[[K], Awaitable[None]],
        *,
        queue_size: int = 256,
        workers: int = 1,
    ) -> None:
        self.name = name
        self._process = process
        self._queue_size = queue_size
        self._workers = workers
        self._queue: asyncio.Queue[K] | None = None
        self._queued: set[K] = set()
        self._running: set[K] = set()
        self._again: set[K] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._accepting = False
        self._dropped = 0
        self._processed = 0

    @property
    def running(self) -> bool:
        return self._accepting

    def start(self) -> None:
        if self._accepting:
            return
        self._queue = asyncio.Queue(self._queue_size)
        self._accepting = True
        self._tasks = [
            asyncio.get_running_loop().create_task(self._work(), name=f"{self.name}-{i}")
            for i in range(self._workers)
        ]

    def trigger(self, key: K) -> bool:
        """Queue ``key`` for processing; False if it was dropped (not running, queue full)."""
        if not self._accepting or self._queue is None:
            self._drop(key, "the buffer is not running")
            return False
        if key in self._queued:
            return True  # already waiting: one run will see everything
        try:
            self._queue.put_nowait(key)
        except asyncio.QueueFull:
            self._drop(key, f"the queue is full ({self._queue_size})")
            return False
        self._queued.add(key)
        return True

    def _drop(self, key: K, why: str) -> None:
        self._dropped += 1
        log.warning("%s dropped the request for %r: %s", self.name, key, why)

    def dropped_count(self) -> int:
        return self._dropped

    def processed_count(self) -> int:
        return self._processed

    def pending(self) -> int:
        return len(self._queued) + len(self._running)

    async def _work(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            key = await queue.get()
            self._queued.discard(key)
            if key in self._running:  # another worker has it: run again when it is done
                self._again.add(key)
                queue.task_done()
                continue
            self._running.add(key)
            try:
                await self._process(key)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed processing %r", self.name, key)
            finally:
                self._running.discard(key)
                self._processed += 1
                if key in self._again:
                    self._again.discard(key)
                    self._requeue(queue, key)
                queue.task_done()

    def _requeue(self, queue: asyncio.Queue[K], key: K) -> None:
        if key in self._queued:
            return
        try:
            queue.put_nowait(key)
        except asyncio.QueueFull:
            self._drop(key, f"the queue is full ({self._queue_size})")
            return
        self._queued.add(key)

    async def drain(self) -> None:
        """Wait until everything queued so far has been processed."""
        if self._queue is not None:
            await self._queue.join()

    async def stop(self, grace_seconds: float = 30.0) -> None:
        self._accepting = False
        if self._queue is None:
            return
        try:
            await asyncio.wait_for(self._queue.join(), grace_seconds)
        except TimeoutError:
            log.warning("%s stopped with %d request(s) unfinished", self.name, self.pending())
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self._queue = None
        self._queued.clear()
        self._again.clear()
