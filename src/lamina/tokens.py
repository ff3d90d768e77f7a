"""Token counting behind one small protocol.

The default is exact: OpenAI's cl100k_base BPE (``ExactTokenCounter``, through toktok-rs,
whose vocabularies are compiled in: it works offline and downloads nothing). The documented
fallback is a heuristic (``HeuristicTokenCounter``): Latin characters / 4 + CJK characters
/ 2. Both add 4 tokens of overhead per chat message. ``batches`` cuts what a prompt shows
into batches of at most a budget of tokens.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

T = TypeVar("T")


class TokenCounter(Protocol):
    #: Tokens of overhead each chat message adds.
    per_message: int

    def count(self, text: str) -> int: ...

    def count_messages(self, messages: Iterable[str]) -> int: ...


MESSAGE_OVERHEAD = 4


class ExactTokenCounter:
    """Exact BPE token counts (cl100k_base by default; o200k_base for newer models).

    The vocabulary (about 0.15 s of CPU to load) loads on the first count, once, not when
    the counter is built: a process that counts nothing (a CLI search) never pays for it.
    An unknown encoding fails there (KeyError)."""

    per_message = MESSAGE_OVERHEAD

    def __init__(self, encoding: str = "cl100k_base") -> None:
        import toktok

        self._toktok = toktok
        self.encoding = encoding
        self._loaded = False
        self._loading = threading.Lock()

    def _load(self) -> None:
        if not self._loaded:
            with self._loading:  # one load when several threads count first at once
                if not self._loaded:
                    self._toktok.batch_count([""], self.encoding, threads=1)
                    self._loaded = True

    def count(self, text: str) -> int:
        self._load()
        return int(self._toktok.batch_count([text], self.encoding, threads=1)[0])

    def count_many(self, texts: Iterable[str]) -> list[int]:
        self._load()
        return [int(n) for n in self._toktok.batch_count(list(texts), self.encoding)]

    def count_messages(self, messages: Iterable[str]) -> int:
        texts = list(messages)
        return sum(self.count_many(texts)) + self.per_message * len(texts)


def default_counter() -> TokenCounter:
    """The exact counter; the heuristic only if the tokenizer cannot load."""
    try:
        return ExactTokenCounter()
    except (ImportError, KeyError, OSError):  # pragma: no cover - toktok ships with lamina
        return HeuristicTokenCounter()


def batches(
    items: Iterable[T], cost: Callable[[T], int], budget: int, *, size: int | None = None
) -> list[list[T]]:
    """``items`` in order, in consecutive batches of at most ``budget`` cost and ``size``
    items (None: any number); an item costing more than the budget is a batch alone."""
    out: list[list[T]] = []
    current: list[T] = []
    used = 0
    for item in items:
        c = cost(item)
        if current and (used + c > budget or (size is not None and len(current) >= size)):
            out.append(current)
            current, used = [], 0
        current.append(item)
        used += c
    if current:
        out.append(current)
    return out


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

    per_message = MESSAGE_OVERHEAD

    def count(self, text: str) -> int:
        cjk = sum(1 for ch in text if ord(ch) >= 0x3040 and _is_cjk(ch))
        return math.ceil((len(text) - cjk) / 4 + cjk / 2)

    def count_messages(self, messages: Iterable[str]) -> int:
        return sum(self.count(m) + self.per_message for m in messages)
