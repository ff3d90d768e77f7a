"""The time and dedup side of memories in SQL, for both backends (lamina.memory.timing):
the window a search or list sees and exact duplicates; invalidation, consolidation and
expiry are in invalidation.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.models import MemoryEntry
from lamina.memory.ports import (
    LayerSearch,
    NewMemory,
)
from lamina.memory.timing import TimeWindow, content_key
from lamina.store.sql.dialect import Dialect
from lamina.store.sql.memory_rows import SqlMemoryRows
from lamina.store.sql.program import Lock, Program, rows

#: The lock space of exact-duplicate checks (sessions use 1, context items 0), and the
#: buckets of content keys per scope: a write takes at most this many locks per scope.
_DEDUP_LOCK = 2
_BUCKETS = 64
#: The columns of a history event's row, and the INSERT of one.
HISTORY_NAMES = (
    "tenant_id",
    "memory_id",
    "operation",
    "layer",
    "old_content",
    "new_content",
    "old_metadata",
    "new_metadata",
    "actor",
    "at",
)
HISTORY = (
    f"INSERT INTO memory_history ({', '.join(HISTORY_NAMES)}) "  # noqa: S608
    f"VALUES ({', '.join(['%s'] * len(HISTORY_NAMES))})"
)


def window_sql(d: Dialect, window: TimeWindow, *, walk: bool = False) -> tuple[str, list[Any]]:
    """The SQL condition of a time window over ``memories`` columns, and its parameters
    (the same semantics as TimeWindow.admits). ``walk``: the event-time range is checked
    row by row, not looked up in the event-time index (a page of a wide range is found
    sooner walking the scope newest first than sorting the whole range)."""
    event_at = d.unindexed("event_at") if walk else "event_at"
    at = d.time(window.at)
    parts = ["(expires_at IS NULL OR expires_at > %s)"]
    params: list[Any] = [at]
    if not window.include_invalid:
        parts.append("(valid_from IS NULL OR valid_from <= %s)")
        parts.append("(valid_until IS NULL OR valid_until > %s)")
        params += [at, at]
    if window.since is not None:
        parts.append(f"{event_at} >= %s")
        params.append(d.time(window.since))
    if window.until is not None:
        parts.append(f"{event_at} < %s")
        params.append(d.time(window.until))
    return " AND ".join(parts), params


def conflict(memory_id: str) -> LaminaError:
    return LaminaError(
        ErrorCode.CONFLICT,
        f"memory {memory_id!r} changed while it was being consolidated: nothing was written",
        retryable=True,
        details={"id": memory_id},
    )


def missing(memory_id: str, why: str = "") -> LaminaError:
    return LaminaError(
        ErrorCode.MEMORY_NOT_FOUND,
        f"memory {memory_id!r} not found{why}",
        details={"id": memory_id},
    )


class SqlTiming(SqlMemoryRows):
    """Time windows and exact duplicates, for the writes and reads of memories."""

    def _param(self, value: datetime | None) -> Any:
        return None if value is None else self._d.time(value)

    def _window(self, window: TimeWindow | None, *, walk: bool = False) -> tuple[str, list[Any]]:
        return window_sql(self._d, window or TimeWindow(), walk=walk)

    def _candidates(self, req: LayerSearch) -> tuple[str, list[Any]]:
        """The condition a search's candidates meet besides the metadata filter: its time
        window, and when it wants facts only, not a conversation message nor a keyed item
        (neither has a content key)."""
        condition, params = self._window(req.window)
        if not req.messages:
            condition += " AND conversation_id IS NULL AND content_key IS NOT NULL"
        return condition, params

    # -- duplicates -------------------------------------------------------------------------

    def _duplicates(
        self, memories: Sequence[NewMemory], now: datetime
    ) -> Program[dict[int, MemoryEntry | int]]:
        """For each memory asking for dedup that has an exact duplicate: the stored one (valid
        and not expired at ``now``), else the index of an earlier one of ``memories``. Each
        content key's lock bucket is taken first, in one order: concurrent writers of one
        content wait for each other, and the second finds the first's row."""
        keys = {
            i: (m.tenant_id, m.scope.layer.value, m.scope.key, content_key(m.content))
            for i, m in enumerate(memories)
            if m.dedup
        }
        if not keys:
            return {}
        for bucket in sorted({(*k[:3], int(k[3][:8], 16) % _BUCKETS) for k in keys.values()}):
            yield Lock("\n".join(map(str, bucket)), _DEDUP_LOCK)
        condition, params = window_sql(self._d, TimeWindow(now))
        by_scope: dict[tuple[str, str, str], list[str]] = {}
        for key in sorted(set(keys.values())):
            by_scope.setdefault(key[:3], []).append(key[3])
        stored: dict[tuple[str, str, str, str], MemoryEntry] = {}
        for scope, hashes in by_scope.items():
            for chunk, values in self._d.any_of_chunks("content_key", hashes):
                found = yield rows(
                    f"SELECT {self._columns}, content_key FROM memories WHERE tenant_id = %s "  # noqa: S608
                    f"AND layer = %s AND scope_key = %s AND {chunk} AND {condition} "
                    f"ORDER BY {self._d.seq}",
                    *scope,
                    *values,
                    *params,
                )
                for r in found:
                    entry = self._entry(r).model_copy(update={"deduplicated": True})
                    stored.setdefault((*scope, str(r[-1])), entry)
        out: dict[int, MemoryEntry | int] = {}
        first: dict[tuple[str, str, str, str], int] = {}
        for i, key in keys.items():
            if key in stored:
                out[i] = stored[key]
            elif key in first:
                out[i] = first[key]
            else:
                first[key] = i
        return out
