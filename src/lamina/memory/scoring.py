"""How memory search scores a memory, shared by every store so that all agree
(docs/search.md, "How a score is made").

Every mode builds one raw score from parts, each on a known scale, and maps it to [0, 1]:

    raw   = w · semantic + (1 - w) · keyword + speaker + conversation + phrase + date + stale
            + question
    score = 1 - exp(-SCORE_RATE · raw)

``w`` is 1 in semantic mode, 0 in keyword mode and ``hybrid_semantic_weight`` (0.5) in
hybrid mode. The *evidence* is ``w · semantic + (1 - w) · keyword + phrase``; the boosts
(speaker, date, conversation) are scaled by ``evidence_gate`` (evidence / EVIDENCE_FULL, at
most 1): boosts scale evidence, they never create it. The parts:

- ``semantic``: the cosine of the query with the memory's vector, averaged with its cosine
  with the memory's neighbourhood vector less NEIGHBOURHOOD_DISCOUNT (a conversation
  message: the normalised sum of its own vector and those of the two turns before it and
  the two after it; any other memory: its own vector again, undiscounted), then mapped
  linearly so that COSINE_FLOOR (or less) is 0 and COSINE_FULL (a good paraphrase) is 1;
  identical text reaches 1.8. Not clipped, so strong matches stay ordered.
- ``keyword``: BM25 (k1 BM25_K1, b BM25_B) of the query terms over the memory's indexed terms
  (its own words, plus CONTEXT_TERM_WEIGHT times the words of its neighbourhood: the two
  turns before it and the two after it, the speaker, the date), divided by the sum of the
  query terms' IDF (a term no memory of the scope holds weighs as one held by a single
  memory): a memory holding every query term once, at average length, scores about 1
  (repeated terms a little more); one holding none scores 0. It does not depend on the
  other hits.
- ``speaker`` (SPEAKER_BOOST · gate): the query names the message's speaker.
- ``phrase`` (PHRASE_BOOST): the share of the query's quoted phrases the content contains.
- ``date`` (DATE_BOOST · gate): the query names a day, month or year the memory's event
  time (``event_at``: its message timestamp, else the time given when it was added, else
  its creation time) falls in.
- ``conversation`` (``conversation_part``): gate · CONVERSATION_BOOST · (best - base), where
  best is the best raw score before this part among the candidates of the same
  conversation and base the turn's own before this part less its speaker part: the turns of
  the conversation that answers best rise together, toward (unless the query names a
  speaker, never above) its best turn, which passes the threshold on its own parts as any
  memory does.
- ``stale`` (0 or -STALE_SHARE · the raw score before it): the message is marked
  superseded (consolidation replaced a fact it said) and the search asks about the present
  (``QuerySignals.current``).
- ``question`` (0 or -QUESTION_SHARE · the share of the content's sentences that are
  questions · the raw score before it): a memory that asks is seldom the one that answers
  ("What did you paint?" against "I painted a sunrise").

The default threshold 0.7 is a raw score of 0.48: a memory with evidence 0.48 passes (in
hybrid mode: a cosine of 0.6 alone, or about every query term with a moderate cosine);
calibration figures are in docs/search.md (benchmarks/locomo_recall.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from lamina.embeddings.base import Vector
from lamina.memory.models import SCORE_RATE, ScoreParts, SearchMode, raw_score, score_of
from lamina.memory.signals import QuerySignals as QuerySignals  # re-exported: every caller's
from lamina.memory.signals import dated, names_speaker, phrase_share, question_share

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
#: What a neighbourhood cosine gives up before it is averaged with the memory's own: the
#: normalised sum of five turns lies nearer to any query than one text does, and this keeps
#: a conversation's best turn to the bar a plain memory meets (tuned on LoCoMo dev).
NEIGHBOURHOOD_DISCOUNT = 0.05
SPEAKER_BOOST = 0.3
#: The share of the way from what a turn shows itself (its parts but the speaker's) up to
#: its conversation's best turn that the turn rises.
CONVERSATION_BOOST = 0.26
PHRASE_BOOST = 0.3
DATE_BOOST = 0.2
#: The evidence (w · semantic + (1 - w) · keyword + phrase) from which a memory gets its
#: speaker, date and conversation parts in full; below it they shrink in proportion, and
#: without evidence they are 0: boosts scale evidence, they never create it.
EVIDENCE_FULL = 0.1
#: The share of its raw score a superseded message loses in a search about the present.
STALE_SHARE = 0.5
#: The share of its raw score a memory loses when all its sentences are questions (in
#: proportion when some are; tuned on LoCoMo dev).
QUESTION_SHARE = 0.05
#: The metadata key marking a message whose fact a later one replaced: {"at": ISO time,
#: "fact": the replaced fact's id} (lamina.memory.consolidation.stale).
SUPERSEDED_KEY = "superseded"

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


def raw_of(score: float) -> float:
    """The raw score whose ``ScoreParts.score`` is ``score`` (thresholds, docs)."""
    return -math.log(max(1.0 - score, 1e-12)) / SCORE_RATE


def semantic_part(cosine: float | None, context_cosine: float | None) -> float:
    if cosine is None:
        return 0.0
    neighbourhood = cosine
    if context_cosine is not None:
        neighbourhood = context_cosine - NEIGHBOURHOOD_DISCOUNT
    mean = (max(cosine, 0.0) + max(neighbourhood, 0.0)) / 2.0
    return max((mean - COSINE_FLOOR) / (COSINE_FULL - COSINE_FLOOR), 0.0)


def keyword_part(bm25: float, idf_sum: float) -> float:
    return bm25 / idf_sum if idf_sum > 0 and bm25 > 0 else 0.0


def bm25_idf(documents: int, frequency: int) -> float:
    """The non-negative BM25 IDF of a term in ``frequency`` of ``documents`` documents."""
    return math.log(1.0 + (documents - frequency + 0.5) / (frequency + 0.5))


class Candidate(NamedTuple):
    """A memory a store found for a query, with the evidence it has for it.

    ``cosine`` is with the memory's own vector (None: not embedded yet); ``context_cosine``
    with its neighbourhood vector (None: it has none); ``keyword`` is the keyword part
    (``keyword_part``), 0 when no term matched. ``speaker`` and ``conversation`` are those of
    a conversation message (its metadata's ``conversation.speaker`` / ``.id`` when strings,
    else None); ``event_at`` is its event time; ``superseded``: a later fact replaced what
    the message says (its metadata's ``superseded``, set by consolidation). A tuple: a
    search makes one for each of a few hundred candidates, and a frozen dataclass took
    three times as long to make."""

    key: Any
    cosine: float | None
    context_cosine: float | None
    keyword: float
    content: str
    speaker: str | None
    conversation: str | None
    event_at: datetime
    superseded: bool = False


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


class _Own(NamedTuple):
    """A candidate's parts before its conversation's: ``pre`` is their raw score, ``base``
    the same without the speaker part."""

    key: Any
    semantic: float | None
    keyword: float | None
    speaker: float
    phrase: float
    date: float
    gate: float
    base: float
    pre: float
    conversation: str | None
    stale: bool
    asks: float


def evidence_gate(evidence: float) -> float:
    """The share of its boosts a memory gets for ``evidence`` (w · semantic + (1 - w) ·
    keyword + phrase): none without evidence, all from EVIDENCE_FULL on."""
    return min(evidence / EVIDENCE_FULL, 1.0) if evidence > 0.0 else 0.0


def _signals(c: Candidate, query: QuerySignals) -> tuple[float, float, float, bool]:
    """(speaker, phrase, date, stale) of a candidate, before gating: what the query names
    of it besides its meaning and terms."""
    named = SPEAKER_BOOST if c.speaker and names_speaker(query, c.speaker) else 0.0
    phrase = PHRASE_BOOST * phrase_share(query, c.content) if query.phrases else 0.0
    day = DATE_BOOST if query.dates and dated(query, c.event_at) else 0.0
    return named, phrase, day, c.superseded and query.current


def _own(
    w: float,
    semantic: float | None,
    keyword: float | None,
    named: float,
    phrase: float,
    dated: float,
) -> tuple[float, float, float, float, float]:
    """(gate, speaker, date, base, pre): the boosts scaled by the evidence, and the raw
    score of the parts before the conversation's, without (``base``) and with the
    speaker's."""
    gate = evidence_gate(raw_score(w, semantic, keyword, 0.0, 0.0, phrase, 0.0))
    speaker, date = gate * named, gate * dated
    base = raw_score(w, semantic, keyword, 0.0, 0.0, phrase, date)
    return gate, speaker, date, base, raw_score(w, semantic, keyword, speaker, 0.0, phrase, date)


def conversation_part(gate: float, base: float, best: float) -> float:
    """CONVERSATION_BOOST of the way from ``base`` (what the turn shows itself) up to
    ``best`` (the best raw score before this part in the conversation), scaled by the
    evidence. Unless the query names a speaker, no turn rises above its conversation's
    best turn, which gets no such part: the threshold means for it what it means for any
    memory."""
    return gate * CONVERSATION_BOOST * (best - base)


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
    # Plain floats for every candidate; models only for the hits kept.
    own: list[_Own] = []
    best: dict[str, float] = {}
    for c in candidates:
        semantic = semantic_part(c.cosine, c.context_cosine) if use_semantic else None
        keyword = c.keyword if use_keyword else None
        named, phrase, dated, stale = _signals(c, query)
        gate, speaker, date, base, pre = _own(w, semantic, keyword, named, phrase, dated)
        own.append(
            _Own(
                c.key,
                semantic,
                keyword,
                speaker,
                phrase,
                date,
                gate,
                base,
                pre,
                c.conversation,
                stale,
                question_share(c.content),
            )
        )
        if c.conversation is not None:
            best[c.conversation] = max(best.get(c.conversation, 0.0), pre)
    kept: list[tuple[float, _Own, float, float, float]] = []
    below = 0
    for o in own:
        boost = 0.0
        if o.conversation is not None:
            boost = conversation_part(o.gate, o.base, best[o.conversation])
        raw = raw_score(w, o.semantic, o.keyword, o.speaker, boost, o.phrase, o.date)
        down = -STALE_SHARE * raw if o.stale else 0.0
        raw = raw_score(w, o.semantic, o.keyword, o.speaker, boost, o.phrase, o.date, down)
        asked = -QUESTION_SHARE * o.asks * raw if o.asks else 0.0
        if asked:
            raw = raw_score(
                w, o.semantic, o.keyword, o.speaker, boost, o.phrase, o.date, down, asked
            )
        if threshold is not None and score_of(raw) < threshold:
            below += 1
            continue
        kept.append((raw, o, boost, down, asked))
    kept.sort(key=lambda item: (-item[0], item[1].key))
    hits = [
        (
            ScoreParts(
                semantic=o.semantic,
                keyword=o.keyword,
                semantic_weight=w,
                speaker=o.speaker,
                conversation=boost,
                phrase=o.phrase,
                date=o.date,
                stale=down,
                question=asked,
            ),
            o.key,
        )
        for _, o, boost, down, asked in kept[:limit]
    ]
    return Ranked(hits, below)


def _bounds(
    c: Candidate,
    error: float,
    query: QuerySignals,
    w: float,
    use_semantic: bool,
    use_keyword: bool,
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """((gate, base, pre) at the low end, the same at the high end) of a candidate whose
    cosines are known to within ``error``: all grow with the cosines."""
    keyword = c.keyword if use_keyword else None
    named, phrase, dated, _ = _signals(c, query)
    low: float | None = None
    high: float | None = None
    if use_semantic and c.cosine is not None:
        around = c.context_cosine
        low = semantic_part(c.cosine - error, None if around is None else around - error)
        high = semantic_part(c.cosine + error, None if around is None else around + error)
    lo = _own(w, low, keyword, named, phrase, dated)
    hi = _own(w, high, keyword, named, phrase, dated)
    return (lo[0], lo[3], lo[4]), (hi[0], hi[3], hi[4])


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
    spans = [
        _bounds(c, e, query, w, use_semantic, use_keyword)
        for c, e in zip(candidates, errors, strict=True)
    ]
    low = [lo[2] - slack for lo, _ in spans]
    high = [hi[2] + slack for _, hi in spans]
    best_low: dict[str, float] = {}
    best_high: dict[str, float] = {}
    for i, c in enumerate(candidates):
        if c.conversation is not None:
            best_low[c.conversation] = max(best_low.get(c.conversation, 0.0), low[i])
            best_high[c.conversation] = max(best_high.get(c.conversation, 0.0), high[i])
    boosted_low = list(low)
    boosted_high = list(high)
    for i, c in enumerate(candidates):
        (gate_low, base_low, _), (gate_high, base_high, _) = spans[i]
        if c.conversation is not None:
            # raw = pre + gate · C · (best - base) grows with base, pre, gate and best
            # (best ≥ pre ≥ base, C < 1).
            top_low = max(best_low[c.conversation], low[i])
            top_high = max(best_high[c.conversation], high[i])
            boosted_low[i] += conversation_part(gate_low, base_low, top_low) - slack
            boosted_high[i] += conversation_part(gate_high, base_high, top_high) + slack
        if c.superseded and query.current:
            boosted_low[i] *= 1.0 - STALE_SHARE
            boosted_high[i] *= 1.0 - STALE_SHARE
        asks = QUESTION_SHARE * question_share(c.content)
        boosted_low[i] *= 1.0 - asks
        boosted_high[i] *= 1.0 - asks
    return _needed(candidates, low, high, best_low, boosted_low, boosted_high, threshold, limit)


def _needed(
    candidates: Sequence[Candidate],
    low: list[float],
    high: list[float],
    best_low: dict[str, float],
    boosted_low: list[float],
    boosted_high: list[float],
    threshold: float | None,
    limit: int,
) -> tuple[list[int], int]:
    """``exact_needed``'s answer from the bounds of each candidate's raw score before
    (``low``, ``high``) and after (``boosted_*``) its conversation part."""
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
