"""The memories list: every memory whose identifiers include those given (what delete-all
counts: a user's own, agent and session memories), by layer, tags, a metadata filter, an
event-time range and validity, a page at a time with the store's keyset cursor (newest
first), and how many each layer holds; without identifiers, the tenant's memories per layer
(each count a link to who holds them). Export of the current filter as JSONL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from lamina.checks import invalid
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import MemoryPage
from lamina.memory.ports import StoredMemory
from lamina.memory.records import dump_record, export_record
from lamina.server.ui import forms
from lamina.server.ui.base import Inspector, Viewer


@dataclass(frozen=True)
class Browse:
    """The filter of the memories list (and of search, export and delete-all)."""

    ids: dict[str, str] = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    filters: dict[str, Any] | None = None
    since: datetime | None = None
    until: datetime | None = None
    include_invalid: bool = False

    @classmethod
    def of(cls, params: forms.Params) -> Browse:
        return cls(
            ids=forms.identifiers(params),
            layers=forms.layers(params),
            tags=forms.tags(params),
            filters=forms.json_object(params, "metadata"),
            since=forms.moment(params, "since"),
            until=forms.moment(params, "until"),
            include_invalid=params.flag("invalid"),
        )

    @property
    def narrowed(self) -> bool:
        """Whether anything but identifiers and layers narrows the selection."""
        return bool(self.tags or self.filters or self.since or self.until)

    def kwargs(self) -> dict[str, Any]:
        """The arguments of ``ms.memory.list_all`` and ``search``."""
        return {
            **self.ids,
            "layers": self.layers or None,
            "tags": self.tags or None,
            "filters": self.filters,
            "since": self.since,
            "until": self.until,
            "include_invalid": self.include_invalid,
        }

    def pairs(self, params: forms.Params) -> list[tuple[str, str]]:
        """The filter as query-string pairs (as typed), for links that keep it."""
        out = [(k, v) for k, v in self.ids.items()]
        out += [("layer", v) for v in self.layers]
        for name in ("tags", "metadata", "since", "until"):
            if params.get(name):
                out.append((name, params.get(name)))
        if self.include_invalid:
            out.append(("invalid", "1"))
        return out


async def memories(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    params = viewer.params
    browse = Browse.of(params)
    size = forms.page_size(params)
    pairs = browse.pairs(params)
    context: dict[str, Any] = {
        "section": "memories",
        "browse": browse,
        "params": params,
        "size": size,
        "sizes": forms.PAGE_SIZES,
        "filter_query": forms.query(pairs),
        "page": None,
        "counts": None,
    }
    if not browse.ids:
        if browse.narrowed:
            raise invalid(
                "tags, metadata and time filters need identifiers (a user_id, project_id …): "
                "memories are listed by scope",
                "user_id",
            )
        context["counts"] = await ui.ms.memory.count_by_layer(tenant_id=viewer.tenant)
        return ui.render(viewer, "memories.html", **context)
    cursor = params.get("cursor") or None
    # Identifiers no one layer holds together (user_id with project_id): the layers they
    # reach, as search and the prompt see them (delete-all selects none of those).
    reach = not held_in(browse.ids)
    context["reach"] = reach
    page = await _lister(ui, reach)(
        limit=size,
        cursor=cursor,
        tenant_id=viewer.tenant,
        count_limit=COUNT_LIMIT,
        **browse.kwargs(),
    )
    context["page"] = page
    context["by_layer"] = await by_layer(ui, viewer, browse, params)
    context["cursor"] = cursor
    if page.next_cursor:
        context["next_query"] = forms.query(pairs, limit=str(size), cursor=page.next_cursor)
    context["first_query"] = forms.query(pairs, limit=str(size))
    return ui.render(viewer, "memories.html", **context)


def _lister(ui: Inspector, reach: bool) -> Callable[..., Awaitable[MemoryPage]]:
    """``list`` (the layers the identifiers reach) or ``list_all`` (the memories holding
    them: what delete-all counts)."""
    return ui.ms.memory.list if reach else ui.ms.memory.list_all


@dataclass(frozen=True)
class LayerShare:
    """How many of the listed memories one layer holds, and where its links go."""

    layer: str
    count: int
    exact: bool
    #: The list narrowed to this layer.
    query: str
    #: The owners page of this layer holding the identifiers (None: they name one owner).
    owners_query: str | None


def held_in(ids: dict[str, str]) -> list[MemoryLayer]:
    """The layers whose memories can hold every one of ``ids`` (user_id: agent, user,
    session), most specific first."""
    return [layer for layer in MemoryLayer if set(ids) <= set(layer.required_identifiers)]


async def by_layer(
    ui: Inspector, viewer: Viewer, browse: Browse, params: forms.Params
) -> list[LayerShare]:
    """The list's memories per layer (the filter but its layers), each a link to the list of
    that layer and, when the identifiers hold several owners there, to who they are."""
    kwargs = {**browse.kwargs(), "layers": None}
    pairs = [(k, v) for k, v in browse.pairs(params) if k != "layer"]
    out = []
    for layer in held_in(browse.ids):
        page = await ui.ms.memory.list_all(
            limit=1,
            tenant_id=viewer.tenant,
            count_limit=COUNT_LIMIT,
            **{**kwargs, "layers": [layer.value]},
        )
        whole = set(browse.ids) == set(layer.required_identifiers)
        out.append(
            LayerShare(
                layer.value,
                page.total_count,
                page.total_exact,
                forms.query(pairs, layer=layer.value),
                None if whole else forms.query([*browse.ids.items(), ("layer", layer.value)]),
            )
        )
    return out


#: The list counts its matches up to this many ("more than 10,000"): an exact count of a
#: scope of 100k memories reads all of them.
COUNT_LIMIT = 10_000


async def export(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    """The current filter as JSONL (docs/export.md records), read a page at a time."""
    browse = Browse.of(viewer.params)
    ms, tenant = ui.ms, viewer.tenant
    if not browse.ids and browse.narrowed:
        raise invalid("tags, metadata and time filters need identifiers", "user_id")
    listing = _lister(ui, not held_in(browse.ids))
    if browse.ids:
        # Check the filter before the response starts: errors become a page, not a cut file.
        first = await listing(limit=1, tenant_id=tenant, count_limit=1, **browse.kwargs())
        del first

    async def lines() -> AsyncIterator[bytes]:
        if not browse.ids:
            async for batch in ms.memory.export_pages(
                layers=browse.layers or None, tenant_id=tenant
            ):
                yield "".join(dump_record(r) + "\n" for r in batch).encode("utf-8")
            return
        cursor: str | None = None
        size = ms.settings.memory.max_limit
        while True:
            page = await listing(limit=size, cursor=cursor, tenant_id=tenant, **browse.kwargs())
            chunk = (dump_record(export_record(StoredMemory(m))) + "\n" for m in page.items)
            yield "".join(chunk).encode("utf-8")
            cursor = page.next_cursor
            if cursor is None:
                return

    name = "-".join(f"{k}-{v}" for k, v in browse.ids.items())[:80] or "tenant"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="memories-{safe}.jsonl"'},
    )


def routes(ui: Inspector) -> list[Route]:
    return [ui.route("/memories", memories), ui.route("/memories/export.jsonl", export)]
