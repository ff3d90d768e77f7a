"""Bounded prompts: messages cut into batches of at most a token budget (a message longer
than the budget is cut into pieces at word boundaries), and facts into decision batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from lamina.memory.consolidation.prompts import Said
from lamina.tokens import TokenCounter

T = TypeVar("T")


def pieces(text: str, budget: int, counter: TokenCounter) -> list[str]:
    """``text`` in pieces of at most ``budget`` tokens, cut between words (a single word
    longer than the budget is cut by characters)."""
    if counter.count(text) <= budget:
        return [text]
    words = text.split()
    if len(words) <= 1:
        half = max(1, len(text) // 2)
        return pieces(text[:half], budget, counter) + pieces(text[half:], budget, counter)
    half = len(words) // 2
    return pieces(" ".join(words[:half]), budget, counter) + pieces(
        " ".join(words[half:]), budget, counter
    )


@dataclass(frozen=True)
class Line:
    """A message of a conversation, as extraction sees it."""

    index: int
    speaker: str
    timestamp: str
    content: str


def _renumbered(batch: list[Said]) -> list[Said]:
    """Messages numbered 0.. within the batch (pieces of one message share a number);
    ``Said.number`` keeps the message's index until here."""
    numbers: dict[int, int] = {}
    for said in batch:
        numbers.setdefault(said.number, len(numbers))
    return [Said(numbers[s.number], s.speaker, s.timestamp, s.content) for s in batch]


def batch_lines(
    lines: Sequence[Line], budget: int, counter: TokenCounter
) -> Iterator[tuple[list[Said], list[int]]]:
    """Consecutive messages in batches of at most ``budget`` tokens of content, each
    numbering its messages from 0, with the message indexes those numbers stand for."""
    for batch in _raw_batches(lines, budget, counter):
        indexes = list(dict.fromkeys(s.number for s in batch))
        yield _renumbered(batch), indexes


def _raw_batches(lines: Sequence[Line], budget: int, counter: TokenCounter) -> list[list[Said]]:
    out: list[list[Said]] = []
    current: list[Said] = []
    used = 0
    for line in lines:
        for piece in pieces(line.content, budget, counter):
            cost = counter.count(piece) + 8  # the speaker and time around it
            if current and used + cost > budget:
                out.append(current)
                current, used = [], 0
            current.append(Said(line.index, line.speaker, line.timestamp, piece))
            used += cost
    if current:
        out.append(current)
    return out


def chunks(items: Sequence[T], size: int, cost: Callable[[T], int], budget: int) -> list[list[T]]:
    """``items`` in order, in chunks of at most ``size`` items and ``budget`` cost (an item
    costing more than the budget goes alone)."""
    out: list[list[T]] = []
    current: list[T] = []
    used = 0
    for item in items:
        c = cost(item)
        if current and (len(current) >= size or used + c > budget):
            out.append(current)
            current, used = [], 0
        current.append(item)
        used += c
    if current:
        out.append(current)
    return out
