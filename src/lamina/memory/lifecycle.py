"""Facts that stop holding and memories that expire: ``invalidate`` and ``purge_expired``,
and the expiry job that runs the latter in the background (docs/memory.md, "Time")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from datetime import datetime

from lamina.checks import check_actor, check_id, invalid
from lamina.errors import LaminaError
from lamina.memory.base import MemoryPart, MemoryShared, observed
from lamina.memory.models import MemoryEntry
from lamina.memory.ports import Invalidation, MemoryPorts
from lamina.memory.timing import now, parse_time

log = logging.getLogger("lamina.memory.expiry")
#: Expired memories removed per transaction, and tenants looked at per round.
PURGE_BATCH = 500
#: Who the expiry job's history events name.
EXPIRY_ACTOR = "lamina:expiry"


class Lifecycle(MemoryPart):
    """``invalidate``, ``purge_expired`` and the expiry job. Holds the writes port
    (invalidation) and the forgetting port (expiry)."""

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._writes = ports.writes
        self._forgetting = ports.forgetting
        self._expiry_task: asyncio.Task[None] | None = None

    @observed("invalidate")
    async def invalidate(
        self,
        memory_ids: str | Sequence[str],
        *,
        at: str | datetime | None = None,
        actor: str | None = None,
        tenant_id: str | None = None,
    ) -> list[MemoryEntry]:
        """Mark facts as no longer holding from ``at`` (default: now): their ``valid_until``
        is set and an ``invalidate`` event recorded; they are kept, but search and list
        leave them out unless ``include_invalid=True``. All or none: an unknown id is
        MEMORY_NOT_FOUND and nothing changes. Returns the entries, in order."""
        tenant = self._tenant(tenant_id)
        raw = [memory_ids] if isinstance(memory_ids, str) else memory_ids
        if isinstance(raw, bytes) or not isinstance(raw, Sequence) or not raw:
            raise invalid("memory_ids must be a memory id or a non-empty list of them")
        ids = list(dict.fromkeys(check_id(m) for m in raw))
        when = parse_time(at, "at") or now()
        who = check_actor(actor)
        changes = [Invalidation(mid, when) for mid in ids]
        return await self._retry.run(
            "invalidate", lambda: self._writes.invalidate(tenant, changes, actor=who)
        )

    @observed("purge_expired")
    async def purge_expired(self, *, limit: int | None = None) -> int:
        """Remove memories whose time to live is over, of every tenant (the expiry job runs
        this every ``memory.expiry_interval`` seconds); returns how many. They were never
        returned since they expired, whether or not this ran."""
        cap = None if limit is None else self._limit(limit, PURGE_BATCH)
        at = now()
        removed = 0
        while cap is None or removed < cap:
            batch = PURGE_BATCH if cap is None else min(PURGE_BATCH, cap - removed)
            tenants = await self._expired_tenants(at, batch)
            done = 0
            for tenant in tenants:
                done += await self._purge_tenant(tenant, at, batch)
            removed += done
            if not done:  # nothing (more) to remove, or another process removed it
                break
        self._metrics.expired.inc(removed)
        return removed

    async def _expired_tenants(self, at: datetime, batch: int) -> list[str]:
        return await self._retry.run(
            "expired tenants", lambda: self._forgetting.expired_tenants(at, batch)
        )

    async def _purge_tenant(self, tenant: str, at: datetime, batch: int) -> int:
        return await self._retry.run(
            "purge expired",
            lambda: self._forgetting.purge_expired(tenant, at, batch, actor=EXPIRY_ACTOR),
        )

    def start_expiry(self) -> None:
        """Run ``purge_expired`` every ``memory.expiry_interval`` seconds (0: never)."""
        interval = self._settings.expiry_interval
        if interval > 0 and self._expiry_task is None:
            self._expiry_task = asyncio.get_running_loop().create_task(
                self._expire_every(interval), name="memory expiry"
            )

    async def stop_expiry(self) -> None:
        task, self._expiry_task = self._expiry_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _expire_every(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                removed = await self.purge_expired()
            except LaminaError as exc:
                log.warning("the expiry job failed (it runs again in %.0fs): %s", interval, exc)
            else:
                if removed:
                    log.info("the expiry job removed %d expired memories", removed)
