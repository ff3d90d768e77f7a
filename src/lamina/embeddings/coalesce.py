"""Concurrent small embedding calls share one model run.

A server embeds one text per request (a query, a memory). While the model runs for one
request, the texts of the requests that arrive meanwhile wait and then go through the model
together: one batch instead of many single runs (the model is several times faster per text
in a batch), and no added wait when calls do not overlap (the first call runs at once).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lamina.embeddings.base import Vectors

#: Calls with more texts than this run alone (a bulk add does not hold up a query).
SMALL = 8


@dataclass
class _Waiting:
    texts: list[str]
    done: asyncio.Future[Vectors]


@dataclass
class _Queue:
    waiting: list[_Waiting] = field(default_factory=list)
    #: The task running the model over the waiting texts, batch after batch.
    worker: asyncio.Task[None] | None = None


class Coalescer:
    """Runs ``run`` (blocking: in a worker thread) on the texts of overlapping calls at once;
    one queue per event loop."""

    def __init__(self, run: Callable[[Sequence[str]], Vectors], limit: int = 64) -> None:
        self._run = run
        self._limit = limit
        self._queues: dict[asyncio.AbstractEventLoop, _Queue] = {}

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if len(texts) > SMALL:
            return await asyncio.to_thread(self._run, list(texts))
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            if len(self._queues) > 16:  # loops that are gone
                self._queues = {k: v for k, v in self._queues.items() if not k.is_closed()}
            queue = self._queues[loop] = _Queue()
        waiting = _Waiting(list(texts), loop.create_future())
        queue.waiting.append(waiting)
        if queue.worker is None or queue.worker.done():
            queue.worker = loop.create_task(self._drain(queue))
        return await waiting.done

    async def _drain(self, queue: _Queue) -> None:
        while queue.waiting:
            batch: list[_Waiting] = []
            count = 0
            while queue.waiting and count + len(queue.waiting[0].texts) <= self._limit:
                batch.append(queue.waiting.pop(0))
                count += len(batch[-1].texts)
            texts = [t for w in batch for t in w.texts]
            try:
                vectors = await asyncio.to_thread(self._run, texts)
            except Exception as exc:
                for w in batch:
                    if not w.done.done():
                        w.done.set_exception(exc)
                continue
            start = 0
            for w in batch:
                part = np.asarray(vectors[start : start + len(w.texts)])
                start += len(w.texts)
                if not w.done.done():
                    w.done.set_result(part)
