"""Sessions: the tenant's sessions, and one session's messages, observations and reflections
with their token counts and times, and what is waiting for the observer (the messages after
the last observed one, against the observation threshold)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.checks import invalid
from lamina.server.ui.base import Inspector, Viewer

#: Sessions and messages per page.
PAGE = 100


def _start(viewer: Viewer) -> int:
    text = viewer.params.get("start")
    if text and not text.isdigit():
        raise invalid("start must be a whole number", "start")
    return int(text or 0)


async def sessions(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    start = _start(viewer)
    found = await ui.ms.sessions.list_sessions(tenant_id=viewer.tenant)
    return ui.render(
        viewer,
        "sessions.html",
        section="sessions",
        sessions=found[start : start + PAGE],
        total=len(found),
        start=start,
        page=PAGE,
    )


async def session(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    key = request.path_params["session_key"]
    start = _start(viewer)
    view = await ui.ms.sessions.show(key, tenant_id=viewer.tenant)
    settings = ui.ms.settings.observational_memory
    waiting = [m for m in view.messages if m.index > view.observed_through]
    context: dict[str, Any] = {
        "section": "sessions",
        "view": view,
        "messages": view.messages[start : start + PAGE],
        "start": start,
        "page": PAGE,
        "message_tokens": sum(m.token_count for m in view.messages),
        "observation_tokens": sum(n.token_count for n in view.observations),
        "reflection_tokens": sum(n.token_count for n in view.reflections),
        "waiting": waiting,
        "threshold": settings.message_token_threshold,
        "observation_threshold": settings.observation_token_threshold,
        "observer_on": settings.enabled,
    }
    return ui.render(viewer, "session.html", **context)


def routes(ui: Inspector) -> list[Route]:
    return [ui.route("/sessions", sessions), ui.route("/sessions/{session_key:path}", session)]
