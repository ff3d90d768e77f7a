"""Score fusion for hybrid search, shared by every store so that all agree.

hybrid = w · max(cosine, 0) + (1 - w) · bm25 / bm25_best

``bm25_best`` is the best BM25 score among the keyword matches of the same query in the same
scope, so the keyword part is 1.0 for the best keyword match and 0 for a memory without any
query term. Both parts lie in [0, 1], and so does the fused score.
"""

from __future__ import annotations


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
    best = max(keyword.values(), default=0.0)
    scored = []
    for key, cosine in cosines.items():
        score = fuse(cosine, keyword.get(key), best, weight)
        if threshold is None or score >= threshold:
            scored.append((score, key))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return scored[:limit]


def rank_single(scores: dict[int, float], *, normalise: bool = False) -> list[tuple[float, int]]:
    """(score, key), best first (ties to the smaller key). ``normalise`` divides by the best
    score, putting unbounded scores such as BM25 into [0, 1]."""
    ranked = sorted(((s, k) for k, s in scores.items()), key=lambda item: (-item[0], item[1]))
    if normalise and ranked and ranked[0][0] > 0:
        best = ranked[0][0]
        ranked = [(s / best, k) for s, k in ranked]
    return ranked
