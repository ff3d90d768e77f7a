"""Search: the memories a query finds, in the mode and above the threshold asked for, each
hit with its score parts (semantic, keyword, the boosts) so a person sees why it ranked
there; what the threshold removed is counted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.memory.models import ScoreParts, SearchHit, SearchMode
from lamina.server.ui import forms
from lamina.server.ui.base import Inspector, Viewer
from lamina.server.ui.memories import Browse

#: The parts of a raw score, in the order the bar shows them.
PART_NAMES = ("semantic", "keyword", "speaker", "conversation", "phrase", "date")


@dataclass(frozen=True)
class Contribution:
    """What one part adds to the raw score (weighted, for semantic and keyword)."""

    name: str
    value: float


def contributions(parts: ScoreParts) -> list[Contribution]:
    w = parts.semantic_weight
    weighted = {
        "semantic": w * (parts.semantic or 0.0),
        "keyword": (1.0 - w) * (parts.keyword or 0.0),
        "speaker": parts.speaker,
        "conversation": parts.conversation,
        "phrase": parts.phrase,
        "date": parts.date,
    }
    return [Contribution(n, weighted[n]) for n in PART_NAMES if weighted[n] > 0]


def bar(hit: SearchHit, scale: float) -> list[dict[str, Any]]:
    """The segments of a hit's bar (x and width in percent of the widest raw score)."""
    out, x = [], 0.0
    for c in contributions(hit.parts):
        width = 100.0 * c.value / scale if scale > 0 else 0.0
        out.append({"name": c.name, "x": round(x, 2), "width": round(width, 2), "value": c.value})
        x += width
    return out


async def search(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    params = viewer.params
    browse = Browse.of(params)
    text = params.get("q")
    mode = params.get("mode") or ui.ms.settings.context.search_mode
    threshold = forms.number(params, "threshold", low=0.0, high=1.0)
    limit = forms.page_size(params)
    context: dict[str, Any] = {
        "section": "search",
        "browse": browse,
        "params": params,
        "text": text,
        "mode": mode,
        "modes": [m.value for m in SearchMode],
        "threshold": "" if threshold is None else params.get("threshold"),
        "default_threshold": ui.ms.settings.memory.search_threshold,
        "limit": limit,
        "sizes": forms.PAGE_SIZES,
        "hits": None,
    }
    if text:
        hits = await ui.ms.memory.search(
            text,
            mode=mode,
            threshold=threshold,
            limit=limit,
            tenant_id=viewer.tenant,
            **browse.kwargs(),
        )
        scale = max((h.parts.raw for h in hits), default=0.0)
        context["hits"] = [(h, bar(h, scale)) for h in hits]
        context["below"] = hits.below_threshold
    return ui.render(viewer, "search.html", **context)


def routes(ui: Inspector) -> list[Route]:
    return [ui.route("/search", search)]
