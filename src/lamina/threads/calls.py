"""How every call of the thread service runs, threads and tasks alike: it waits for the
start-up (the store opened and migrated), retries a transient failure when the operation
may be repeated, and is counted (operations, latency, errors by code), as the memory
service's calls are. The tenant is checked by each call before it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from typing import TypeVar

from lamina.metrics import Operations
from lamina.retry import RetryPolicy

T = TypeVar("T")


async def _started() -> None:
    """The start-up hook of a service built without one: nothing to wait for."""


class Calls:
    """The start-up, retries and metrics of one thread service."""

    def __init__(
        self,
        *,
        retry: RetryPolicy | None = None,
        ready: Callable[[], Awaitable[None]] | None = None,
        metrics: Operations | None = None,
    ) -> None:
        """``retry``: default, no retry; ``ready``: default, nothing to wait for;
        ``metrics``: default, nothing counted."""
        self.retry = retry or RetryPolicy(max_retries=0)
        self._ready = ready or _started
        self._metrics = metrics

    async def run(
        self, operation: str, call: Callable[[], Awaitable[T]], *, retried: bool = True
    ) -> T:
        """``call`` once the start-up is done, retried (unless ``retried`` is False: a write
        that must not land twice) and counted under ``operation``."""
        counted = nullcontext() if self._metrics is None else self._metrics.counted(operation)
        with counted:
            await self._ready()
            return await (self.retry.run(operation, call) if retried else call())
