"""scoring.exact_needed: ranking the candidates it names, with their exact cosines, gives
what ranking every candidate exactly gives (hits, order, scores, the count below the
threshold), whatever the exact cosines within the bounds; and it names few of them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from lamina.memory.models import SearchMode
from lamina.memory.scoring import Candidate, QuerySignals, exact_needed, rank

QUERY = QuerySignals.of('What did Ana say about "the blue boat" in May 2023?')
SPEAKERS = ("Ana", "Ben", None)
TALKS = ("c1", "c2", "c3", None)


def _candidates(rng: random.Random, n: int, spread: float) -> list[Candidate]:
    out = []
    for key in range(n):
        cosine = None if rng.random() < 0.05 else rng.uniform(0.0, spread)
        around = None if rng.random() < 0.3 else rng.uniform(0.0, spread)
        out.append(
            Candidate(
                key,
                cosine,
                around,
                rng.choice((0.0, 0.0, rng.uniform(0.0, 1.2))),
                rng.choice(("the blue boat left", "nothing here")),
                rng.choice(SPEAKERS),
                rng.choice(TALKS),
                datetime(2023, 5, 1, tzinfo=UTC) + timedelta(days=rng.randrange(60)),
            )
        )
    return out


def _jitter(rng: random.Random, c: Candidate, error: float) -> Candidate:
    """``c`` with each cosine moved by at most ``error`` (the database's view of it)."""

    def move(value: float | None) -> float | None:
        return None if value is None else value + rng.uniform(-error, error)

    return c._replace(cosine=move(c.cosine), context_cosine=move(c.context_cosine))


@pytest.mark.parametrize("mode", [SearchMode.HYBRID, SearchMode.SEMANTIC])
@pytest.mark.parametrize("threshold", [None, 0.0, 0.5, 0.7])
def test_ranking_the_needed_candidates_is_ranking_them_all(
    mode: SearchMode, threshold: float | None
) -> None:
    rng = random.Random(f"{mode}-{threshold}")
    sizes = []
    for trial in range(150):
        n = rng.randrange(1, 250)
        # Near-ties on purpose: a narrow spread of cosines, and large bounds.
        spread = rng.choice((1.0, 0.61, 0.6001))
        error = rng.choice((1e-6, 1e-4, 1e-2))
        exact = _candidates(rng, n, spread)
        seen = [_jitter(rng, c, error) for c in exact]
        limit = rng.choice((1, 5, 20, 40))
        options = {"mode": mode, "weight": 0.5, "threshold": threshold, "limit": limit}
        needed, below = exact_needed(seen, [error] * n, QUERY, **options)  # type: ignore[arg-type]
        whole = rank(exact, QUERY, **options)  # type: ignore[arg-type]
        part = rank([exact[i] for i in needed], QUERY, **options)  # type: ignore[arg-type]
        assert [key for _, key in part.hits] == [key for _, key in whole.hits], trial
        assert [p for p, _ in part.hits] == [p for p, _ in whole.hits], trial
        assert part.below_threshold + below == whole.below_threshold, trial
        if error == 1e-6:
            sizes.append(len(needed) / max(1, min(n, limit)))
    # With a realistic bound, about the hits are read again, not every candidate.
    assert sorted(sizes)[len(sizes) // 2] < 2.0


def test_nothing_is_needed_when_everything_is_surely_below_the_threshold() -> None:
    at = datetime(2024, 1, 1, tzinfo=UTC)
    weak = [Candidate(i, 0.05, 0.05, 0.0, "x", None, None, at) for i in range(30)]
    needed, below = exact_needed(
        weak, [1e-4] * 30, QUERY, mode=SearchMode.HYBRID, weight=0.5, threshold=0.7, limit=10
    )
    assert needed == [] and below == 30
