"""How memory search scores a memory, shared by every store so that all agree
(docs/search.md, "How a score is made").

Every mode builds one raw score from parts, each on a known scale, and maps it to [0, 1]:

    raw   = w · semantic + (1 - w) · keyword + speaker + conversation + phrase + date
    score = 1 - exp(-SCORE_RATE · raw)

``w`` is 1 in semantic mode, 0 in keyword mode and ``hybrid_semantic_weight`` (0.5) in
hybrid mode. The parts:

- ``semantic``: the cosine of the query with the memory's vector, averaged with its cosine
  with the memory's neighbourhood vector (a conversation message: the normalised sum of its
  own vector and those of the two turns before it and the two after it; any other memory:
  its own vector again), then mapped linearly so that COSINE_FLOOR (or less) is 0 and
  COSINE_FULL (a good paraphrase) is 1; identical text reaches 1.8. Not clipped, so strong
  matches stay ordered.
- ``keyword``: BM25 (k1 BM25_K1, b BM25_B) of the query terms over the memory's indexed terms
  (its own words, plus CONTEXT_TERM_WEIGHT times the words of its neighbourhood: the two
  turns before it and the two after it, the speaker, the date), divided by the sum of the
  query terms' IDF (a term no memory of the scope holds weighs as one held by a single
  memory): a memory holding every query term once, at average length, scores about 1
  (repeated terms a little more); one holding none scores 0. It does not depend on the
  other hits.
- ``speaker`` (SPEAKER_BOOST): the query names the message's speaker.
- ``phrase`` (PHRASE_BOOST): the share of the query's quoted phrases the content contains.
- ``date`` (DATE_BOOST): the query names a day, month or year the memory's event time
  (``event_at``: its message timestamp, else the time given when it was added, else its
  creation time) falls in.
- ``conversation`` (CONVERSATION_BOOST): that times the best raw score (before this part)
  among the candidates of the same conversation, so turns of the conversation that answers
  best rise together.

The default threshold 0.7 is a raw score of 0.48: a memory whose meaning matches the query
well (cosine 0.6 or more) passes on that alone in hybrid mode; calibration figures are in
docs/search.md (benchmarks/locomo_recall.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np

from lamina.embeddings.base import Vector
from lamina.memory.models import SCORE_RATE, ScoreParts, SearchMode, raw_score, score_of
from lamina.text import words

#: BM25 parameters of the keyword part (every store).
BM25_K1 = 0.9
BM25_B = 0.4
#: Each term's share of a BM25 score is rounded to a multiple of 1 / BM25_GRID before the
#: shares are added: integer sums are exact in any order, so every store gets the same bits.
BM25_GRID = float(2**32)
#: Weight of a neighbourhood word against the memory's own words in the keyword index.
CONTEXT_TERM_WEIGHT = 0.5
#: The cosine that counts as no semantic evidence, and the one that counts as full evidence.
COSINE_FLOOR = 0.1
COSINE_FULL = 0.6
SPEAKER_BOOST = 0.4
CONVERSATION_BOOST = 0.3
PHRASE_BOOST = 0.3
DATE_BOOST = 0.2

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
#: English month names, whatever the process's locale (indexed words must not vary).
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
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


def raw_of(score: float) -> float:
    """The raw score whose ``ScoreParts.score`` is ``score`` (thresholds, docs)."""
    return -math.log(max(1.0 - score, 1e-12)) / SCORE_RATE


def semantic_part(cosine: float | None, context_cosine: float | None) -> float:
    if cosine is None:
        return 0.0
    neighbourhood = cosine if context_cosine is None else context_cosine
    mean = (max(cosine, 0.0) + max(neighbourhood, 0.0)) / 2.0
    return max((mean - COSINE_FLOOR) / (COSINE_FULL - COSINE_FLOOR), 0.0)


def keyword_part(bm25: float, idf_sum: float) -> float:
    return bm25 / idf_sum if idf_sum > 0 and bm25 > 0 else 0.0


def bm25_idf(documents: int, frequency: int) -> float:
    """The non-negative BM25 IDF of a term in ``frequency`` of ``documents`` documents."""
    return math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))


@dataclass(frozen=True)
class QuerySignals:
    """What a query names besides its meaning and terms."""

    words: frozenset[str]
    phrases: tuple[str, ...]
    dates: tuple[DateSpan, ...]

    @classmethod
    def of(cls, text: str) -> QuerySignals:
        lowered = text.lower()
        phrases = tuple(
            dict.fromkeys(p.strip().lower() for p in _PHRASE.findall(text) if p.strip())
        )
        found = words(text)
        # "Caroline's" names Caroline too (analyze splits at apostrophes the same way).
        split = [part for word in found if "'" in word for part in word.split("'") if part]
        return cls(frozenset(found + split), phrases, _dates(lowered))


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


class Candidate(NamedTuple):
    """A memory a store found for a query, with the evidence it has for it.

    ``cosine`` is with the memory's own vector (None: not embedded yet); ``context_cosine``
    with its neighbourhood vector (None: it has none); ``keyword`` is the keyword part
    (``keyword_part``), 0 when no term matched. ``speaker`` and ``conversation`` are those of
    a conversation message (its metadata's ``conversation.speaker`` / ``.id`` when strings,
    else None); ``event_at`` is its event time. A tuple: a search makes one for each of
    a few hundred candidates, and a frozen dataclass took three times as long to make."""

    key: Any
    cosine: float | None
    context_cosine: float | None
    keyword: float
    content: str
    speaker: str | None
    conversation: str | None
    event_at: datetime


@dataclass(frozen=True)
class Ranked:
    """The best candidates at or above the threshold, best first, and how many candidates
    fell below it."""

    hits: list[tuple[ScoreParts, Any]]
    below_threshold: int


def weight_of(mode: SearchMode, hybrid_weight: float) -> float:
    """``w``: how much of the raw score the semantic part makes up in ``mode``."""
    if mode is SearchMode.SEMANTIC:
        return 1.0
    if mode is SearchMode.KEYWORD:
        return 0.0
    return hybrid_weight


def rank(
    candidates: Iterable[Candidate],
    query: QuerySignals,
    *,
    mode: SearchMode,
    weight: float,
    threshold: float | None,
    limit: int,
) -> Ranked:
    """Score every candidate (module docstring) and keep the best ``limit`` at or above
    ``threshold``. Ties go to the smaller key, for stable results."""
    w = weight_of(mode, weight)
    use_semantic = mode is not SearchMode.KEYWORD
    use_keyword = mode is not SearchMode.SEMANTIC
    # (key, semantic, keyword, speaker, phrase, date, conversation id), then the raw score
    # without its conversation part: plain floats, models only for the hits kept.
    partial: list[tuple[Any, float | None, float | None, float, float, float, str | None]] = []
    best: dict[str, float] = {}
    for c in candidates:
        speaker, conversation = c.speaker, c.conversation
        semantic = semantic_part(c.cosine, c.context_cosine) if use_semantic else None
        keyword = c.keyword if use_keyword else None
        named = SPEAKER_BOOST if speaker and _names(query, speaker) else 0.0
        phrase = PHRASE_BOOST * _phrase_share(query, c.content) if query.phrases else 0.0
        dated = 0.0
        if query.dates and _dated(query, c.event_at):
            dated = DATE_BOOST
        partial.append((c.key, semantic, keyword, named, phrase, dated, conversation))
        if conversation is not None:
            raw = raw_score(w, semantic, keyword, named, 0.0, phrase, dated)
            best[conversation] = max(best.get(conversation, 0.0), raw)
    kept: list[tuple[float, Any, tuple[Any, ...]]] = []
    below = 0
    for key, semantic, keyword, named, phrase, dated, conversation in partial:
        boost = 0.0 if conversation is None else CONVERSATION_BOOST * best[conversation]
        raw = raw_score(w, semantic, keyword, named, boost, phrase, dated)
        if threshold is not None and score_of(raw) < threshold:
            below += 1
            continue
        kept.append((raw, key, (semantic, keyword, named, boost, phrase, dated)))
    kept.sort(key=lambda item: (-item[0], item[1]))
    hits = [
        (
            ScoreParts(
                semantic=values[0],
                keyword=values[1],
                semantic_weight=w,
                speaker=values[2],
                conversation=values[3],
                phrase=values[4],
                date=values[5],
            ),
            key,
        )
        for _, key, values in kept[:limit]
    ]
    return Ranked(hits, below)


def exact_needed(
    candidates: Sequence[Candidate],
    errors: Sequence[float],
    query: QuerySignals,
    *,
    mode: SearchMode,
    weight: float,
    threshold: float | None,
    limit: int,
) -> tuple[list[int], int]:
    """For candidates whose cosines are known only to within ``errors`` (each candidate's
    bound for both of its cosines; a database computed them in its own float order): the
    indexes of those whose exact cosines can change what ``rank`` returns, and how many of
    the others fall below ``threshold`` whatever their exact cosines.

    ``rank`` over the exact candidates at those indexes, with that count added to its
    ``below_threshold``, is ``rank`` over every candidate exactly: each candidate's raw
    score is bounded (interval arithmetic over the formula, conversation part included);
    the ones left out either fall below the threshold for sure, or pass it for sure and
    score below ``limit`` candidates that pass it for sure; and every candidate that can be
    the best of a conversation some kept candidate is in stays in, so the conversation
    parts come out exact."""
    w = weight_of(mode, weight)
    use_semantic = mode is not SearchMode.KEYWORD
    use_keyword = mode is not SearchMode.SEMANTIC
    slack = 1e-9  # float rounding of the sums below, far under any cosine bound
    low: list[float] = []
    high: list[float] = []
    best_low: dict[str, float] = {}
    best_high: dict[str, float] = {}
    for c, error in zip(candidates, errors, strict=True):
        keyword = c.keyword if use_keyword else None
        named = SPEAKER_BOOST if c.speaker and _names(query, c.speaker) else 0.0
        phrase = PHRASE_BOOST * _phrase_share(query, c.content) if query.phrases else 0.0
        dated = DATE_BOOST if query.dates and _dated(query, c.event_at) else 0.0
        rest = raw_score(w, None, keyword, named, 0.0, phrase, dated)
        if use_semantic and c.cosine is not None:
            around = c.cosine if c.context_cosine is None else c.context_cosine
            low.append(rest + w * semantic_part(c.cosine - error, around - error) - slack)
            high.append(rest + w * semantic_part(c.cosine + error, around + error) + slack)
        else:
            low.append(rest - slack)
            high.append(rest + slack)
        if c.conversation is not None:
            best_low[c.conversation] = max(best_low.get(c.conversation, 0.0), low[-1])
            best_high[c.conversation] = max(best_high.get(c.conversation, 0.0), high[-1])
    boosted_low = list(low)
    boosted_high = list(high)
    for i, c in enumerate(candidates):
        if c.conversation is not None:
            boosted_low[i] += CONVERSATION_BOOST * best_low[c.conversation]
            boosted_high[i] += CONVERSATION_BOOST * best_high[c.conversation]
    below = [threshold is not None and score_of(h) < threshold for h in boosted_high]
    above = [threshold is None or score_of(lo) >= threshold for lo in boosted_low]
    needed = {i for i in range(len(candidates)) if not below[i] and not above[i]}
    sure = sorted((boosted_low[i] for i in range(len(candidates)) if above[i]), reverse=True)
    floor = sure[limit - 1] if 0 < limit <= len(sure) else -math.inf
    needed.update(i for i in range(len(candidates)) if above[i] and boosted_high[i] >= floor)
    # Every possible best of a conversation a needed candidate is in.
    talks = {candidates[i].conversation for i in needed} - {None}
    needed.update(
        i
        for i, c in enumerate(candidates)
        if c.conversation is not None
        and c.conversation in talks
        and high[i] >= best_low[c.conversation]
    )
    return sorted(needed), sum(1 for i in range(len(candidates)) if below[i] and i not in needed)


@lru_cache(maxsize=4096)
def _name_words(speaker: str) -> tuple[str, ...]:
    return tuple(words(speaker))


def _names(query: QuerySignals, speaker: str) -> bool:
    name = _name_words(speaker)
    return bool(name) and all(w in query.words for w in name)


def _phrase_share(query: QuerySignals, content: str) -> float:
    if not query.phrases:
        return 0.0
    lowered = content.lower()
    return sum(1 for p in query.phrases if p in lowered) / len(query.phrases)


def _dated(query: QuerySignals, at: datetime) -> bool:
    for year, month, day in query.dates:
        if (
            at.year == year
            and (month is None or at.month == month)
            and (day is None or at.day == day)
        ):
            return True
    return False


def neighbourhood_vector(
    own: Vector | None, previous: Sequence[Vector | None], following: Sequence[Vector | None] = ()
) -> Vector | None:
    """A conversation message's neighbourhood vector: the normalised sum of its own vector
    and its neighbours' (the previous turns', then the following turns'); None without its
    own vector or any neighbour's."""
    shape = getattr(own, "shape", None)
    others = [v for v in (*previous, *following) if v is not None and v.shape == shape]
    if own is None or not others:
        return None
    total = np.sum([own, *others], axis=0, dtype=np.float32)
    norm = float(np.linalg.norm(total))
    if norm == 0.0:
        return None
    out: Vector = np.asarray(total / norm, dtype=np.float32)
    return out


def neighbourhood_terms(
    previous: Sequence[str],
    speaker: str | None,
    when: str | None,
    following: Sequence[str] = (),
) -> str:
    """The text whose words a conversation message is also found by: the previous turns,
    the following turns, its speaker and the date of its timestamp ("8 May 2023")."""
    parts = [*previous, *following]
    if speaker:
        parts.append(speaker)
    if when:
        try:
            at = datetime.fromisoformat(when)
        except ValueError:
            at = None
        if at is not None:
            parts.append(f"{at.day} {_MONTH_NAMES[at.month - 1]} {at.year}")
    return "\n".join(parts)


# -- context items (user knowledge, learnings, skills, references, the knowledge index) -----
#
# hybrid = w · max(cosine, 0) + (1 - w) · bm25 / bm25_best: the keyword part is 1.0 for the
# best keyword match of the query among the items of that kind.


def fuse(cosine: float | None, bm25: float | None, bm25_best: float, weight: float) -> float:
    semantic = max(cosine or 0.0, 0.0)
    keyword = (bm25 or 0.0) / bm25_best if bm25_best > 0 else 0.0
    return weight * semantic + (1.0 - weight) * keyword


def rank_fused(
    cosines: dict[int, float | None],
    keyword: dict[int, float],
    *,
    weight: float,
    threshold: float | None,
    limit: int,
) -> list[tuple[float, int]]:
    """(fused score, key) of the best ``limit`` candidates at or above ``threshold``.

    ``cosines`` holds every candidate (keyword-only ones too); ``keyword`` the keyword scores
    of those that matched a term. Ties go to the smaller key, for stable results.
    """
    top = max(keyword.values(), default=0.0)
    scored = []
    for key, cosine in cosines.items():
        score = fuse(cosine, keyword.get(key), top, weight)
        if threshold is None or score >= threshold:
            scored.append((score, key))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return scored[:limit]


def rank_single(scores: dict[int, float], *, normalise: bool = False) -> list[tuple[float, int]]:
    """(score, key), best first (ties to the smaller key). ``normalise`` divides by the best
    score, putting unbounded scores such as BM25 into [0, 1]."""
    ranked = sorted(((s, k) for k, s in scores.items()), key=lambda item: (-item[0], item[1]))
    if normalise and ranked and ranked[0][0] > 0:
        first = ranked[0][0]
        ranked = [(s / first, k) for s, k in ranked]
    return ranked
