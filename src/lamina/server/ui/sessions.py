"""Sessions: the tenant's sessions, and one session's messages, observations and reflections
with their token counts and times, and what is waiting for the observer (the messages after
the last observed one, against the observation threshold)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.checks import invalid
from lamina.errors import ErrorCode, LaminaError
from lamina.server.ui.base import Inspector, Viewer

#: Sessions and messages per page.
PAGE = 100


def _start(viewer: Viewer) -> int:
    text = viewer.params.get("start")
    if text and not text.isdigit():
        raise invalid("start must be a whole number", "start")
    return int(text or 0)


async def sessions(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    after = viewer.params.get("after") or None
    found = await ui.ms.sessions.list_sessions(after=after, limit=PAGE + 1, tenant_id=viewer.tenant)
    more = len(found) > PAGE
    found = found[:PAGE]
    return ui.render(
        viewer,
        "sessions.html",
        section="sessions",
        sessions=found,
        after=after,
        next_after=found[-1][0] if more else None,
    )


async def session(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    key = request.path_params["session_key"]
    start = _start(viewer)
    view = await ui.ms.sessions.show(key, start=start, limit=PAGE, tenant_id=viewer.tenant)
    if not (view.message_count or view.observations or view.reflections or view.system_prompt):
        # A session is its messages, notes and base prompt: with none, there is no such
        # session here.
        raise LaminaError(
            ErrorCode.ITEM_NOT_FOUND,
            f"no session {view.session_key!r} in this tenant: it has no messages, "
            "observations, reflections or base system prompt",
            details={"session_key": view.session_key},
        )
    settings = ui.ms.settings.observational_memory
    context: dict[str, Any] = {
        "section": "sessions",
        "view": view,
        "messages": view.messages,
        "start": start,
        "page": PAGE,
        "message_tokens": view.message_tokens,
        "observation_tokens": sum(n.token_count for n in view.observations),
        "reflection_tokens": sum(n.token_count for n in view.reflections),
        "threshold": settings.message_token_threshold,
        "observation_threshold": settings.observation_token_threshold,
        "observer_on": settings.enabled,
    }
    return ui.render(viewer, "session.html", **context)


def routes(ui: Inspector) -> list[Route]:
    return [ui.route("/sessions", sessions), ui.route("/sessions/{session_key:path}", session)]
