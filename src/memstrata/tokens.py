"""Token counting behind one small protocol.

The default here is a documented heuristic: Latin text at 4 characters per token, CJK at 2,
plus 4 tokens of overhead per chat message. It never under-counts ordinary English by much
and needs no files. An exact tokenizer can be plugged in through ``TokenCounter``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Protocol


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def count_messages(self, messages: Iterable[str]) -> int: ...


def _is_cjk(ch: str) -> bool:
    code = ord(ch)
    return (
        0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0x3400 <= code <= 0x4DBF  # extension A
        or 0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0x20000 <= code <= 0x2FFFF  # extensions B and later
    )


class HeuristicTokenCounter:
    """ceil(Latin characters / 4 + CJK characters / 2); +4 per message."""

    per_message = 4

    def count(self, text: str) -> int:
        cjk = sum(1 for ch in text if ord(ch) >= 0x3040 and _is_cjk(ch))
        return math.ceil((len(text) - cjk) / 4 + cjk / 2)

    def count_messages(self, messages: Iterable[str]) -> int:
        return sum(self.count(m) + self.per_message for m in messages)
