"""The time side of memories in SQL, for both backends (lamina.memory.timing): the window a
search or list sees, the errors of a memory that is gone or changed, and the history
event's row; exact duplicates are found in memory_inserts.py."""

from __future__ import annotations

from typing import Any

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.timing import TimeWindow
from lamina.store.sql.dialect import Dialect

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
