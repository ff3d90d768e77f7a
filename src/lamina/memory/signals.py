"""What a query names besides its meaning and terms (lamina.memory.scoring): its words
(a speaker it names), its quoted phrases, the days, months and years it names, and
whether it asks about the present."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from lamina.text import words

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(1[89]\d\d|2\d\d\d)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATE_PATTERNS = (
    # (regex, groups as (year, month, day) indexes; None: not given)
    (re.compile(rf"\b{_YEAR}-(\d{{1,2}})-(\d{{1,2}})\b"), (1, 2, 3)),
    (re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"), (3, 2, 1)),
    (re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"), (3, 1, 2)),
    (re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b"), (2, 1, None)),
    (re.compile(rf"\b{_YEAR}\b"), (1, None, None)),
)
_PHRASE = re.compile(r"[\"\u201c\u201d]([^\"\u201c\u201d]{2,200})[\"\u201c\u201d]")

#: A day, month or year a query names: (year, month or None, day or None).
DateSpan = tuple[int, int | None, int | None]


@dataclass(frozen=True)
class QuerySignals:
    """What a query names besides its meaning and terms."""

    words: frozenset[str]
    phrases: tuple[str, ...]
    dates: tuple[DateSpan, ...]
    #: The search asks about the present (no ``include_invalid``, no time range): messages
    #: a later fact superseded are ranked down (STALE_SHARE).
    current: bool = True

    @classmethod
    def of(cls, text: str, *, current: bool = True) -> QuerySignals:
        lowered = text.lower()
        phrases = tuple(
            dict.fromkeys(p.strip().lower() for p in _PHRASE.findall(text) if p.strip())
        )
        found = words(text)
        # "Caroline's" names Caroline too (analyze splits at apostrophes the same way).
        split = [part for word in found if "'" in word for part in word.split("'") if part]
        return cls(frozenset(found + split), phrases, _dates(lowered), current)


def _dates(text: str) -> tuple[DateSpan, ...]:
    found: list[DateSpan] = []
    taken: list[tuple[int, int]] = []
    for pattern, (y, m, d) in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            year = int(match.group(y))
            month = None
            if m is not None:
                raw_month = match.group(m)
                month = int(raw_month) if raw_month.isdigit() else _MONTHS[raw_month]
            day = None if d is None else int(match.group(d))
            taken.append((match.start(), match.end()))  # an invalid date is no year either
            if (month is not None and not 1 <= month <= 12) or (
                day is not None and not 1 <= day <= 31
            ):
                continue
            found.append((year, month, day))
    return tuple(dict.fromkeys(found))


@lru_cache(maxsize=4096)
def _name_words(speaker: str) -> tuple[str, ...]:
    return tuple(words(speaker))


def names_speaker(query: QuerySignals, speaker: str) -> bool:
    name = _name_words(speaker)
    return bool(name) and all(w in query.words for w in name)


def phrase_share(query: QuerySignals, content: str) -> float:
    if not query.phrases:
        return 0.0
    lowered = content.lower()
    return sum(1 for p in query.phrases if p in lowered) / len(query.phrases)


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+")
_CLOSING = " \t\n\"')]}\u201d\u2019"


def question_share(content: str) -> float:
    """The share of ``content``'s sentences that are questions (end with "?", closing quotes
    and brackets aside): a text that asks is seldom the one that answers."""
    if "?" not in content:
        return 0.0
    asked = total = 0
    for part in _SENTENCE_BREAK.split(content):
        sentence = part.strip(_CLOSING)
        if not sentence.strip(".!?"):
            continue
        total += 1
        asked += sentence.rstrip("!").endswith("?")
    return asked / total if total else 0.0


def dated(query: QuerySignals, at: datetime) -> bool:
    for year, month, day in query.dates:
        if (
            at.year == year
            and (month is None or at.month == month)
            and (day is None or at.day == day)
        ):
            return True
    return False
