"""The exact ranking of a vector search's finalists, from the float32 vectors of the file.

The vector index keeps compact codes only (compact.py); a search picks by code the few that
may belong to its result (``finalists``) and ranks those by their exact cosines, read from
the SQLite file (``Exact``). A search without a limit gets a ``Ranking`` of the whole scope,
exact as far as it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import overload

import numpy as np
import numpy.typing as npt

from lamina.embeddings.base import Vector
from lamina.store.sqlite.compact import finalists

Pks = npt.NDArray[np.int64]
#: The float32 vectors stored for ``pks`` (len(pks) x dim), a row of NaN for one that is no
#: longer stored (deleted or rewritten since the index last caught up).
Exact = Callable[[Pks], Vector]

#: At most max(FINALISTS x limit, FINALISTS_MIN) vectors are read and scored exactly.
FINALISTS = 4
FINALISTS_MIN = 256
#: A search without a limit ranks this many exactly (``Ranking``).
UNLIMITED_EXACT = 200


def most_read(limit: int) -> int:
    """How many vectors a search with ``limit`` reads exactly, at most."""
    return max(FINALISTS * limit, FINALISTS_MIN)


def ranked(pks: Pks, query: Vector, exact: Exact) -> list[tuple[int, float]]:
    """(pk, exact cosine) of ``pks`` still stored, best first (ties: in the given order)."""
    if len(pks) == 0:
        return []
    scores = np.vecdot(exact(pks), query)
    stored = ~np.isnan(scores)
    pks, scores = pks[stored], scores[stored]
    order = np.argsort(-scores, kind="stable")
    return pairs(pks[order], scores[order])


def pairs(pks: Pks, scores: npt.NDArray[np.float32]) -> list[tuple[int, float]]:
    return [(int(pk), float(s)) for pk, s in zip(pks, scores, strict=True)]


class Ranking(Sequence[tuple[int, float]]):
    """Every vector of a scope, best first, ranked exactly as far as it is read: reading
    the first ``m`` ranks exactly every vector whose upper bound reaches the ``m``-th best
    lower bound (reading on doubles ``m``). A search with a metadata filter reads it until
    enough pass. It holds copies of the scope's pks and approximate cosines, not the index:
    it stays valid while the index changes. A vector no longer stored is left out (the
    length counts it until the ranking reaches it)."""

    def __init__(
        self, pks: Pks, approx: npt.NDArray[np.float32], bound: npt.NDArray[np.float32],
        exact: Exact, query: Vector,
    ) -> None:  # fmt: skip
        self._pks, self._approx, self._bound = pks, approx, bound
        self._exact, self._query = exact, query
        self._done: list[tuple[int, float]] = []
        self._reached = 0

    def __len__(self) -> int:
        return len(self._pks)

    def _reach(self, m: int) -> None:
        if m <= self._reached:
            return
        m = min(max(m, 2 * self._reached, UNLIMITED_EXACT), len(self._pks))
        chosen = finalists(self._approx, self._bound, m, len(self._pks))
        self._done = ranked(self._pks[np.sort(chosen)], self._query, self._exact)[
            :m
        ]  # ties: scope order
        self._reached = m

    @overload
    def __getitem__(self, i: int) -> tuple[int, float]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, float]]: ...
    def __getitem__(self, i: int | slice) -> tuple[int, float] | list[tuple[int, float]]:
        if isinstance(i, slice):
            stop = len(self._pks) if i.stop is None else i.stop
            self._reach(stop if stop >= 0 else len(self._pks))
            return self._done[i]
        self._reach(i + 1 if i >= 0 else len(self._pks))
        return self._done[i]

    def pks(self) -> Sequence[int]:
        """The pks alone, as lazily."""
        return RankedPks(self)


class RankedPks(Sequence[int]):
    """The pks of a ``Ranking``, read as lazily."""

    def __init__(self, ranking: Ranking) -> None:
        self._ranking = ranking

    def __len__(self) -> int:
        return len(self._ranking)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        if isinstance(i, slice):
            return [pk for pk, _ in self._ranking[i]]
        return self._ranking[i][0]
