"""Who holds memories in a layer: the users, agents, sessions, projects … of the tenant with
how many memories each holds, a page at a time, narrowed by identifiers (a user's agents);
each links to its memories."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.checks import invalid
from lamina.memory.layers import MemoryLayer
from lamina.server.ui import forms
from lamina.server.ui.base import Inspector, Viewer

#: Owners per page.
PAGE = 100


async def owners(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    params = viewer.params
    chosen = forms.layers(params)
    if len(chosen) != 1:
        raise invalid("choose one layer: owners are listed a layer at a time", "layer")
    layer = MemoryLayer(chosen[0])
    ids = forms.identifiers(params)
    cursor = params.get("cursor") or None
    page = await ui.ms.memory.owners(
        layer, limit=PAGE, cursor=cursor, tenant_id=viewer.tenant, **ids
    )
    pairs = [*ids.items(), ("layer", layer.value)]
    rows = [
        (
            owner,
            forms.query(owner.identifiers.items()),
            forms.query(owner.identifiers.items(), layer=layer.value, invalid="1"),
        )
        for owner in page.items
    ]
    return ui.render(
        viewer,
        "owners.html",
        section="memories",
        layer=layer.value,
        names=layer.required_identifiers,
        ids=ids,
        rows=rows,
        cursor=cursor,
        first_query=forms.query(pairs),
        next_query=forms.query(pairs, cursor=page.next_cursor) if page.next_cursor else None,
    )


def routes(ui: Inspector) -> list[Route]:
    return [ui.route("/owners", owners)]
