"""What every memory operation shares: the store, settings, retries, and the metrics each
call records (count, errors by code, latency)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from lamina.checks import check_int
from lamina.config import MemorySettings
from lamina.embeddings.query_cache import QueryVectors
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.core import ServiceCore
from lamina.memory.ports import MemoryStore
from lamina.metrics import MemoryMetrics
from lamina.retry import RetryPolicy

log = logging.getLogger("lamina.memory.service")
T = TypeVar("T")


class MemoryBase(ServiceCore):
    """The state of ``ms.memory`` and the helpers of every operation."""

    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings,
        *,
        default_tenant: str,
        metrics: MemoryMetrics,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
        queries: QueryVectors | None = None,
    ) -> None:
        super().__init__(default_tenant=default_tenant, ready=ready)
        self._store = store
        self._settings = settings
        self._metrics = metrics
        self._retry = retry
        self._queries = queries or QueryVectors(
            lambda tenant, texts: store.generate_embedding(tenant, texts, cache=False), retry
        )
        self._gauge_refreshed = -float("inf")

    async def _observe(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        start = time.perf_counter()
        self._metrics.operations.labels(operation).inc()
        try:
            await self._ready()
            return await call()
        except LaminaError as exc:
            self._metrics.errors.labels(exc.code.value).inc()
            raise
        except Exception as exc:
            self._metrics.errors.labels(ErrorCode.INTERNAL_ERROR.value).inc()
            log.exception("memory %s failed unexpectedly", operation)
            raise LaminaError(
                ErrorCode.INTERNAL_ERROR, f"internal error during {operation} (see the log)"
            ) from exc
        finally:
            self._metrics.latency.labels(operation).observe(time.perf_counter() - start)

    def _limit(self, limit: int | None, default: int) -> int:
        maximum = self._settings.max_limit
        return check_int(
            "limit",
            default if limit is None else limit,
            minimum=1,
            maximum=maximum,
            max_limit=maximum,
        )
