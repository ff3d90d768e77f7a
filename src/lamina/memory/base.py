"""What every part of the memory service shares (``MemoryShared``: the tenant, the start-up,
settings, retries, the write guard, and the metrics each call records: count, errors by
code, latency), the base of those parts (``MemoryPart``), and ``observed``, which makes a
part's method one operation."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from lamina.checks import check_int, invalid
from lamina.config import MemorySettings
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.core import ServiceCore
from lamina.memory.filters import parse_filter
from lamina.memory.layers import check_identifier_names
from lamina.memory.ports import MemoryListing
from lamina.memory.timing import TimeWindow
from lamina.metrics import MemoryMetrics
from lamina.retry import RetryPolicy

log = logging.getLogger("lamina.memory.service")
T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="MemoryPart")


class WriteGuard(Protocol):
    """Checks content entering ``layer``; ``identifiers`` are resolved through the hierarchy."""

    async def __call__(
        self,
        tenant: str,
        layer: str,
        identifiers: Mapping[str, str],
        content: str | None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> list[dict[str, Any]]: ...


class MemoryShared(ServiceCore):
    """The state every part of ``ms.memory`` shares, and the helpers of every operation."""

    #: Set by the runtime (``ms.memory.write_guard``): checks content entering a shared
    #: layer (governance). It raises POLICY_VIOLATION on a block and returns the violations
    #: that do not block.
    write_guard: WriteGuard | None = None

    def __init__(
        self,
        settings: MemorySettings,
        *,
        default_tenant: str,
        metrics: MemoryMetrics,
        retry: RetryPolicy,
        ready: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(default_tenant=default_tenant, ready=ready)
        self.settings = settings
        self.metrics = metrics
        self.retry = retry

    def tenant(self, tenant_id: str | None) -> str:
        """The tenant a call acts for: the one given, else the default; checked."""
        return self._tenant(tenant_id)

    async def ready(self) -> None:
        """Wait for the start-up (the store opened and migrated)."""
        await self._ready()

    async def observe(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        """``call`` run as the operation ``operation``, once the service is ready: counted,
        its errors by code, its latency; an unexpected error becomes INTERNAL_ERROR."""
        try:
            with self.metrics.calls.counted(operation):
                await self._ready()
                return await call()
        except LaminaError:
            raise
        except Exception as exc:
            log.exception("memory %s failed unexpectedly", operation)
            raise LaminaError(
                ErrorCode.INTERNAL_ERROR, f"internal error during {operation} (see the log)"
            ) from exc

    def limit(self, limit: int | None, default: int) -> int:
        """A page size or result count: ``default`` when None; at most ``memory.max_limit``."""
        maximum = self.settings.max_limit
        return check_int(
            "limit",
            default if limit is None else limit,
            minimum=1,
            maximum=maximum,
            max_limit=maximum,
        )

    def listing(
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
        count = self.limit(limit, self.settings.list_limit)
        flt = parse_filter(tags, filters)
        if cursor is not None and not isinstance(cursor, str):
            raise invalid("cursor must be a string")
        cap = None if count_limit is None else check_int("count_limit", count_limit, minimum=1)
        return MemoryListing(
            scopes=(), flt=flt, limit=count, cursor=cursor or None, window=window, count_limit=cap
        )


class MemoryPart:
    """One part of ``ms.memory`` (its writes, reads, hierarchy …): the shared state, and
    short names for what every operation of the part uses of it."""

    def __init__(self, shared: MemoryShared) -> None:
        self._shared = shared
        self._settings = shared.settings
        self._metrics = shared.metrics
        self._retry = shared.retry

    def _tenant(self, tenant_id: str | None) -> str:
        return self._shared.tenant(tenant_id)

    async def _ready(self) -> None:
        await self._shared.ready()

    async def _observe(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        return await self._shared.observe(operation, call)

    def _limit(self, limit: int | None, default: int) -> int:
        return self._shared.limit(limit, default)

    @property
    def _write_guard(self) -> WriteGuard | None:
        return self._shared.write_guard


def observed(
    operation: str,
) -> Callable[
    [Callable[Concatenate[S, P], Coroutine[Any, Any, T]]],
    Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
]:
    """A memory call run as the operation ``operation`` (``MemoryShared.observe``: once the
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
