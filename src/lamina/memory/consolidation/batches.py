"""Bounded prompts: messages cut into batches of at most a token budget (a message longer
than the budget is cut into pieces at word boundaries)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from lamina.memory.consolidation.prompts import Said
from lamina.tokens import TokenCounter, batches


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
    said = [
        Said(line.index, line.speaker, line.timestamp, piece)
        for line in lines
        for piece in pieces(line.content, budget, counter)
    ]
    # A piece costs its tokens and the speaker and time around it.
    return batches(said, lambda s: counter.count(s.content) + 8, budget)
