"""What every memory operation shares: the store, settings, retries, and the metrics each
call records (count, errors by code, latency)."""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from lamina.checks import check_int, invalid
from lamina.config import MemorySettings
from lamina.embeddings.query_cache import QueryVectors
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.core import ServiceCore
from lamina.memory.filters import parse_filter
from lamina.memory.layers import check_identifier_names
from lamina.memory.ports import MemoryListing, MemoryPorts
from lamina.memory.timing import TimeWindow
from lamina.metrics import MemoryMetrics
from lamina.retry import RetryPolicy

log = logging.getLogger("lamina.memory.service")
T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="MemoryBase")


class MemoryBase(ServiceCore):
    """The state of ``ms.memory`` and the helpers of every operation."""

    def __init__(
        self,
        ports: MemoryPorts,
        settings: MemorySettings,
        *,
        default_tenant: str,
        metrics: MemoryMetrics,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
        queries: QueryVectors | None = None,
    ) -> None:
        super().__init__(default_tenant=default_tenant, ready=ready)
        self._ports = ports
        self._settings = settings
        self._metrics = metrics
        self._retry = retry
        self._queries = queries or QueryVectors(
            lambda tenant, texts: ports.embeddings.generate_embedding(tenant, texts, cache=False),
            retry,
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

    def _listing(
        self,
        limit: int | None,
        cursor: str | None,
        tags: Sequence[str] | str | None,
        filters: Mapping[str, Any] | None,
        include_invalid: bool,
        since: str | datetime | None,
        until: str | datetime | None,
        count_limit: int | None,
    ) -> MemoryListing:
        """The page a ``list`` or ``list_all`` call asks for, checked (its ``scopes`` or
        ``selection`` still to be set)."""
        window = TimeWindow.of(include_invalid=include_invalid, since=since, until=until)
        count = self._limit(limit, self._settings.list_limit)
        flt = parse_filter(tags, filters)
        if cursor is not None and not isinstance(cursor, str):
            raise invalid("cursor must be a string")
        cap = None if count_limit is None else check_int("count_limit", count_limit, minimum=1)
        return MemoryListing(
            scopes=(), flt=flt, limit=count, cursor=cursor or None, window=window, count_limit=cap
        )


def observed(
    operation: str,
) -> Callable[
    [Callable[Concatenate[S, P], Coroutine[Any, Any, T]]],
    Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
]:
    """A memory call run as the operation ``operation`` (``MemoryBase._observe``: once the
    service is ready; counted, its errors by code, its latency; an unexpected error becomes
    INTERNAL_ERROR). Its arguments are bound first, outside the operation: a wrong one is
    the caller's TypeError, as is an identifier keyword argument (``**scope_ids``) that is
    not one of lamina's identifiers."""

    def wrap(
        method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
    ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
        params = inspect.signature(method).parameters.values()
        scoped = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        keywords = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        named = {p.name for p in params if p.kind in keywords}

        @functools.wraps(method)
        async def call(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            if scoped:
                check_identifier_names(operation, (k for k in kwargs if k not in named))
            work = method(self, *args, **kwargs)
            try:
                return await self._observe(operation, lambda: work)
            finally:
                work.close()  # not run when the service could not get ready

        return call

    return wrap
