"""Text analysis for keyword search: words, English stop words, Snowball stems."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

# A conventional English stop-word list (the common Lucene/NLTK core, lower-case).
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have
    haven't having he he'd he'll he's her here here's hers herself him himself his how how's
    i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my
    myself no nor not of off on once only or other ought our ours ourselves out over own same
    shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this
    those through to too under until up very was wasn't we we'd we'll we're we've were
    weren't what what's when when's where where's which while who who's whom why why's with
    won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    """.split()  # noqa: SIM905
)


_THREAD = threading.local()


def _stemmer() -> Any:
    """This thread's English Snowball stemmer, built on its first use: snowballstemmer
    imports every language it knows, too slow for a start-up that stems nothing. One per
    thread: a stemmer keeps the word it works on in itself, and two threads stemming with
    one (the SQLite store's worker threads, the event loop's) read each other's word (an
    IndexError, or a wrong stem)."""
    stemmer = getattr(_THREAD, "stemmer", None)
    if stemmer is None:
        import snowballstemmer

        stemmer = _THREAD.stemmer = snowballstemmer.stemmer("english")
    return stemmer


_APOSTROPHES = "'\u2019"
_WORD = re.compile(r"[^\W_]+(?:[" + _APOSTROPHES + r"][^\W_]+)*", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (letters and digits; inner apostrophes kept)."""
    return [w.replace("\u2019", "'") for w in _WORD.findall(text.lower())]


def keyword_terms(text: str, *, max_terms: int = 64) -> list[str]:
    """Distinct search terms: words without stop words or one-character words, in order."""
    seen: dict[str, None] = {}
    for word in words(text):
        if len(word) < 2 or word in STOP_WORDS:
            continue
        # FTS tokenizers split at apostrophes: "alice's" indexes as "alice" and "s".
        for part in word.split("'"):
            if len(part) >= 2 and part not in STOP_WORDS:
                seen.setdefault(part, None)
        if len(seen) >= max_terms:
            break
    return list(seen)[:max_terms]


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """The Snowball (Porter2) English stem of a lower-case word."""
    result: str = _stemmer().stemWord(word)
    return result


def analyze(text: str) -> Counter[str]:
    """Keyword-index terms of ``text`` with their counts: stemmed words, no stop words."""
    counts: Counter[str] = Counter()
    for word in words(text):
        for part in word.split("'"):
            if len(part) >= 2 and part not in STOP_WORDS:
                # Snowball leaves ASCII numbers as they are: skip it (and its cache) for them.
                counts[part if part.isdigit() and part.isascii() else stem(part)] += 1
    return counts


def encode_terms(counts: Mapping[str, float]) -> str:
    """A compact stored form of ``analyze`` output: "term:count term:count" (counts may be
    fractional: weighted terms)."""
    return " ".join(f"{term}:{n:g}" for term, n in counts.items())


def decode_terms(raw: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in raw.split():
        term, _, n = item.rpartition(":")
        out[term] = float(n)
    return out


def weighted_terms(text: str, context: str | None, context_weight: float) -> dict[str, float]:
    """``analyze(text)``, plus ``context_weight`` times ``analyze(context)``."""
    terms: dict[str, float] = dict(analyze(text))
    if context:
        for term, n in analyze(context).items():
            terms[term] = terms.get(term, 0.0) + context_weight * n
    return terms
