"""Time of memories (docs/memory.md, "Time"): when the event a memory records happened, the
interval a fact holds, its time to live, and the window of time a search or a list sees.

A memory is *valid* at ``t`` when ``valid_from <= t < valid_until`` (a missing bound is
unbounded); invalidating a fact sets ``valid_until``. A memory is *expired* from
``expires_at`` on: it is never returned again, and the expiry job removes it.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lamina.checks import invalid

#: The longest time to live (about 100 years), in seconds.
MAX_TTL = 100 * 365.25 * 86_400


def now() -> datetime:
    return datetime.now(UTC)


def parse_time(value: object, field_name: str) -> datetime | None:
    """An ISO-8601 string (or a datetime) as an aware UTC datetime; naive times are UTC;
    None stays None. INVALID_ARGUMENT names ``field_name`` otherwise."""
    if value is None:
        return None
    if isinstance(value, datetime):
        at = value
    elif isinstance(value, str):
        try:
            at = datetime.fromisoformat(value.strip())
        except ValueError:
            raise invalid(
                f"{field_name}: {value[:64]!r} is not an ISO-8601 time (2023-05-08T13:56:00)",
                field_name,
            ) from None
    else:
        raise invalid(
            f"{field_name}: must be an ISO-8601 string, got {type(value).__name__}", field_name
        )
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    try:
        return at.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before year 1 in UTC
        raise invalid(
            f"{field_name}: {str(value)[:64]!r} is out of range in UTC (years 1 to 9999)",
            field_name,
        ) from None


def parse_ttl(value: object, field_name: str = "ttl") -> float | None:
    """A time to live in seconds (a number > 0, or a timedelta); None: none."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise invalid(
            f"{field_name}: must be a number of seconds, got {type(value).__name__}", field_name
        )
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_TTL:
        raise invalid(
            f"{field_name}: must be more than 0 and at most {int(MAX_TTL)} seconds", field_name
        )
    return seconds


def _ordered(start: datetime | None, end: datetime | None, names: tuple[str, str]) -> None:
    if start is not None and end is not None and start >= end:
        raise invalid(f"{names[0]} must be before {names[1]}", names[0])


@dataclass(frozen=True)
class Lifetime:
    """The time fields of a memory being written (None: the defaults: the event happened
    when the memory is created; valid always; never expires)."""

    event_at: datetime | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    expires_at: datetime | None = None

    @classmethod
    def of(
        cls,
        *,
        timestamp: object = None,
        valid_from: object = None,
        valid_until: object = None,
        ttl: object = None,
        default_ttl: float | None = None,
        at: datetime | None = None,
    ) -> Lifetime:
        """Checked time fields from a call's arguments; ``default_ttl`` applies when ``ttl``
        is None (the session layer's setting)."""
        start = parse_time(valid_from, "valid_from")
        end = parse_time(valid_until, "valid_until")
        _ordered(start, end, ("valid_from", "valid_until"))
        seconds = parse_ttl(ttl)
        if seconds is None:
            seconds = default_ttl
        expires = None if seconds is None else (at or now()) + timedelta(seconds=seconds)
        return cls(parse_time(timestamp, "timestamp"), start, end, expires)


@dataclass(frozen=True)
class TimeWindow:
    """What a search or a list sees at ``at``: never expired memories; only facts valid at
    ``at`` unless ``include_invalid``; only events in [``since``, ``until``) when given."""

    at: datetime = field(default_factory=now)
    include_invalid: bool = False
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def of(
        cls, *, include_invalid: object = False, since: object = None, until: object = None
    ) -> TimeWindow:
        if not isinstance(include_invalid, bool):
            raise invalid("include_invalid must be true or false", "include_invalid")
        start, end = parse_time(since, "since"), parse_time(until, "until")
        _ordered(start, end, ("since", "until"))
        return cls(now(), include_invalid, start, end)

    @property
    def current(self) -> bool:
        """The window asks about the present: facts valid now, no time range."""
        return not self.include_invalid and self.since is None and self.until is None

    def admits(
        self,
        event_at: datetime,
        valid_from: datetime | None,
        valid_until: datetime | None,
        expires_at: datetime | None,
    ) -> bool:
        """The reference semantics every store must agree with (the conformance suite)."""
        if expires_at is not None and expires_at <= self.at:
            return False
        if not self.include_invalid and not valid_at(self.at, valid_from, valid_until):
            return False
        if self.since is not None and event_at < self.since:
            return False
        return self.until is None or event_at < self.until


def valid_at(at: datetime, valid_from: datetime | None, valid_until: datetime | None) -> bool:
    return (valid_from is None or valid_from <= at) and (valid_until is None or at < valid_until)


def content_key(content: str) -> str:
    """The key of exact duplicates (docs/memory.md, "Duplicates"): the content with Unicode
    compatibility forms folded (NFKC), case folded and runs of whitespace made one space,
    hashed. "Alice  lives in BERLIN " and "alice lives in berlin" share a key."""
    normal = " ".join(unicodedata.normalize("NFKC", content).casefold().split())
    return hashlib.sha256(normal.encode("utf-8", "surrogatepass")).hexdigest()
