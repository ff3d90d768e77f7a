"""Keywords of a query: what the context layers are searched with.

Lower-case, split on whitespace, strip punctuation at word boundaries, drop English stop
words and words under two characters. Two-character technical terms (Go, CI, DB, AI, UI, JS,
OS, ...) are words of two characters, so they stay, and so do the ones the stop-word list
would otherwise drop (IT, US written in capitals, "do" is dropped, "DO" the cloud stays).
"""

from __future__ import annotations

import re

from lamina.text import STOP_WORDS

MAX_KEYWORDS = 12
MAX_KEYWORD_LENGTH = 50

#: Two-letter technical terms kept even where they collide with a stop word.
TECH_TERMS = frozenset(
    "ai as c# cd ci db dl do go io it js ml ok os pr qa rl sd sq ts ui ux vm vs".split()  # noqa: SIM905
)

# Punctuation stripped from the ends of a word (inner characters such as in "c++", "node.js",
# "gpt-4" and "don't" stay).
_EDGES = "\"'`.,!?;:()[]{}<>«»“”\u2018\u2019…*_~|/\\"
_INNER_ALLOWED = re.compile(r"[^\w+#.\-'/@]")


def extract_keywords(query: str, *, limit: int = MAX_KEYWORDS) -> list[str]:
    """Distinct keywords of ``query`` in order of first appearance (at most ``limit``)."""
    out: dict[str, None] = {}
    for raw in query.split():
        word = raw.strip(_EDGES)
        if not word:
            continue
        lower = _INNER_ALLOWED.sub("", word.lower()).strip(_EDGES)
        if len(lower) < 2 or len(lower) > MAX_KEYWORD_LENGTH:
            continue
        acronym = len(word) == 2 and word.isupper()
        if lower in STOP_WORDS and not (acronym and lower in TECH_TERMS):
            continue
        out.setdefault(lower, None)
        if len(out) >= limit:
            break
    return list(out)
