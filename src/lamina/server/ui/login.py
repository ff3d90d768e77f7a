"""Signing in with an API key, and out. Without configured keys nobody signs in: the server
listens on loopback only and serves its one tenant (forms still carry CSRF tokens)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lamina.server.auth import hash_key
from lamina.server.ui.base import PREFIX, Inspector, Viewer, redirect


def _next(target: str) -> str:
    """Where to go after signing in: a page of the inspector, never another site."""
    if target.startswith(PREFIX + "/") and not target.startswith("//") and "\\" not in target:
        return target[len(PREFIX) :]
    return "/memories"


async def login_form(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    if not ui.keys.enabled or viewer.signed_in:
        return redirect(_next(viewer.params.get("next")))
    return ui.render(
        viewer, "login.html", session=viewer.session, next=viewer.params.get("next"), failed=False
    )


async def login(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    target = _next(viewer.params.get("next"))
    if not ui.keys.enabled:
        return redirect(target)
    key = viewer.params.get("key")
    principal = ui.keys.resolve(key)
    if principal is None:
        return ui.render(
            viewer, "login.html", 401, session=viewer.session, next=PREFIX + target, failed=True
        )
    # A new session (and CSRF token) for the signed-in key: nothing from before carries over.
    response = redirect(target)
    ui.set_cookie(request, response, ui.codec.new(hash_key(key)))
    return response


async def logout(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    response = redirect("/login" if ui.keys.enabled else "/memories")
    ui.set_cookie(request, response, ui.codec.new(None))
    return response


def routes(ui: Inspector) -> list[Route]:
    return [
        ui.route("/login", login_form, public=True),
        ui.route("/login", login, post=True, public=True),
        ui.route("/logout", logout, post=True, public=True),
    ]
