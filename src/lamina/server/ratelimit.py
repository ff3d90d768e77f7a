"""Rate limits: requests per minute per tenant (all skills) and per tenant and skill, by tier.

Moving windows: a request counts against the minute before it, whatever the clock says, so
no burst of twice the limit fits across a minute boundary. Counted in-process by default
(``LocalWindows``) or in Redis (``server.redis_url``, the ``limits`` library's moving-window
strategy) so that every replica shares the same counts. If Redis cannot be reached the
request is let through and a warning logged: limits protect the service, they never make it
unavailable.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from lamina.config import ServerSettings, TierLimits
from lamina.extras import require

log = logging.getLogger("lamina.server")
WINDOW = 60
KEY_PREFIX = "lamina:rl"


def storage_for(redis_url: str | None) -> Storage:
    """Redis at ``redis_url`` (redis://, rediss://, unix://), else this process's memory."""
    if not redis_url:
        return MemoryStorage()
    require("redis")
    scheme, _, rest = redis_url.partition("://")
    uri = f"async+redis+unix://{rest}" if scheme == "unix" else f"async+{redis_url}"
    return RedisStorage(
        uri,
        implementation="redispy",
        key_prefix=KEY_PREFIX,
        socket_timeout=2.0,
        socket_connect_timeout=2.0,
    )


class LocalWindows:
    """Moving windows counted in this process: per key, the times of the requests counted in
    the last window, oldest first. The same rule as the ``limits`` moving window (a request
    is counted when fewer than the limit were counted in the window before it; a refused
    one is not counted), without the in-memory storage's cost per request: it starts an
    expiry task that hops to a worker thread for every key and copies each key's list."""

    def __init__(self) -> None:
        self._hits: dict[tuple[str, ...], deque[float]] = {}
        self._swept = time.time()

    def hit(self, key: tuple[str, ...], limit: int, window: float) -> float | None:
        """Count a request against ``key`` (None); or, when ``limit`` requests were counted
        in the last ``window`` seconds, not, and the seconds until one of them leaves it."""
        now = time.time()
        start = now - window
        if now - self._swept >= window:
            self._sweep(start)
            self._swept = now
        hits = self._hits.get(key)
        if hits is None:
            hits = self._hits[key] = deque()
        while hits and hits[0] < start:
            hits.popleft()
        if len(hits) >= limit:
            return (hits[-limit] if limit > 0 else now) + window - now
        hits.append(now)
        return None

    def _sweep(self, start: float) -> None:
        """Forget the keys with no request in the window."""
        for key in [k for k, hits in self._hits.items() if not hits or hits[-1] < start]:
            del self._hits[key]


@dataclass(frozen=True)
class Limited:
    """A request over a limit: which one (the tenant's total or one skill's), its size in
    requests per minute, and the seconds to wait (Retry-After)."""

    scope: Literal["total", "skill"]
    limit: int
    retry_after: float


class RateLimiter:
    """``window``: the length of the moving window in seconds (a minute; tests shorten it)."""

    def __init__(self, settings: ServerSettings, *, window: int = WINDOW) -> None:
        self._settings = settings
        self._window = window
        self.storage = storage_for(settings.redis_url)
        self._strategy = MovingWindowRateLimiter(self.storage)
        self._local = None if settings.redis_url else LocalWindows()
        self._items: dict[int, RateLimitItem] = {}

    def limits(self, tier: str) -> TierLimits:
        tiers = self._settings.tiers
        return tiers.get(tier) or tiers.get("default") or TierLimits()

    def _item(self, limit: int) -> RateLimitItem:
        item = self._items.get(limit)
        if item is None:
            item = self._items[limit] = RateLimitItemPerSecond(limit, self._window)
        return item

    async def check(self, tenant: str, tier: str, skill: str) -> Limited | None:
        """None when the request may go on; else the limit it is over (the tenant's total is
        counted first: a request it refuses is not counted against the skill)."""
        limits = self.limits(tier)
        checks: list[tuple[str, int, Literal["total", "skill"]]] = [
            ("*", limits.requests_per_minute, "total")
        ]
        if skill in limits.skills:
            checks.append((skill, limits.skills[skill], "skill"))
        # Quoted: a "/" in a tenant or tier name cannot make two keys one.
        who = (quote(tenant, safe=""), quote(tier, safe=""))
        if self._local is not None:
            for name, limit, scope in checks:
                wait = self._local.hit((*who, name), limit, self._window)
                if wait is not None:
                    return Limited(scope, limit, max(1.0, float(math.ceil(wait))))
            return None
        try:
            for name, limit, scope in checks:
                item = self._item(limit)
                if not await self._strategy.hit(item, *who, name):
                    stats = await self._strategy.get_window_stats(item, *who, name)
                    retry = max(1.0, float(math.ceil(stats.reset_time - time.time())))
                    return Limited(scope, limit, retry)
        except Exception as exc:  # Redis down: let the request through, say so
            log.warning("rate limiter unavailable (%s): request allowed", exc)
        return None

    async def aclose(self) -> None:
        client = getattr(getattr(self.storage, "bridge", None), "storage", None)
        if client is not None:  # the Redis connection pool
            await client.aclose()
        timer = getattr(self.storage, "timer", None)  # the in-process expiry task
        if isinstance(timer, asyncio.Task) and not timer.done():
            timer.cancel()
