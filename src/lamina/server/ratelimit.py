"""Rate limits: requests per minute per tenant (all skills) and per tenant and skill, by tier.

Fixed one-minute windows, counted in-process by default or in Redis (``server.redis_url``)
so that every replica shares the same counts. If Redis cannot be reached the request is let
through and a warning logged: limits protect the service, they never make it unavailable.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from lamina.config import ServerSettings, TierLimits
from lamina.extras import require

log = logging.getLogger("lamina.server")
WINDOW = 60.0


class Counter(Protocol):
    async def incr(self, key: str, window: int) -> int:
        """Add one to ``key`` in window number ``window``; the new count."""
        ...

    async def aclose(self) -> None: ...


class LocalCounter:
    def __init__(self) -> None:
        self._counts: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    async def incr(self, key: str, window: int) -> int:
        with self._lock:
            if len(self._counts) > 10_000:
                self._counts = {k: v for k, v in self._counts.items() if k[1] >= window}
            count = self._counts.get((key, window), 0) + 1
            self._counts[(key, window)] = count
            return count

    async def aclose(self) -> None:
        return None


class RedisCounter:
    def __init__(self, url: str) -> None:
        require("redis")
        import redis.asyncio as redis

        self._client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)

    async def incr(self, key: str, window: int) -> int:
        name = f"lamina:rl:{key}:{window}"
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.incr(name)
            pipe.expire(name, int(WINDOW) * 2)
            count, _ = await pipe.execute()
        return int(count)

    async def aclose(self) -> None:
        await self._client.aclose()


@dataclass(frozen=True)
class Limited:
    """A request over a limit: which one (the tenant's total or one skill's), its size in
    requests per minute, and the seconds to wait (Retry-After)."""

    scope: Literal["total", "skill"]
    limit: int
    retry_after: float


class RateLimiter:
    def __init__(self, settings: ServerSettings, clock: Callable[[], float] = time.time) -> None:
        self._settings = settings
        self._clock = clock
        self.counter: Counter = (
            RedisCounter(settings.redis_url) if settings.redis_url else LocalCounter()
        )

    def limits(self, tier: str) -> TierLimits:
        tiers = self._settings.tiers
        return tiers.get(tier) or tiers.get("default") or TierLimits()

    async def check(self, tenant: str, tier: str, skill: str) -> Limited | None:
        """None when the request may go on; else the limit it is over (the tenant's total is
        counted first: a request it refuses is not counted against the skill)."""
        now = self._clock()
        window = int(now // WINDOW)
        retry = max(1.0, math.ceil((window + 1) * WINDOW - now))
        limits = self.limits(tier)
        checks: list[tuple[str, int, Literal["total", "skill"]]] = [
            (f"{tenant}:*", limits.requests_per_minute, "total")
        ]
        if skill in limits.skills:
            checks.append((f"{tenant}:{skill}", limits.skills[skill], "skill"))
        try:
            for key, limit, scope in checks:
                if await self.counter.incr(key, window) > limit:
                    return Limited(scope, limit, retry)
        except Exception as exc:  # Redis down: let the request through, say so
            log.warning("rate limiter unavailable (%s): request allowed", exc)
        return None

    async def aclose(self) -> None:
        await self.counter.aclose()
