"""The inspector's files (its stylesheet), read from the package once, ``/ui`` itself, and
the page for any other path under it (a 404 with the same headers)."""

from __future__ import annotations

import hashlib

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from lamina.errors import ErrorCode, LaminaError
from lamina.server.ui.base import HERE, PREFIX, SECURITY_HEADERS, Inspector, Viewer

#: The files served under /ui/static/, with their media types.
FILES = {"ui.css": "text/css; charset=utf-8"}


async def not_found(ui: Inspector, request: Request, viewer: Viewer) -> Response:
    raise LaminaError(ErrorCode.ITEM_NOT_FOUND, "there is no such page in the inspector")


def fallback(ui: Inspector) -> list[Route]:
    """Last of all routes: any other path under /ui."""
    return [ui.route("/{rest:path}", not_found)]


def routes(ui: Inspector) -> list[Route]:
    loaded = {name: (HERE / "static" / name).read_bytes() for name in FILES}
    tags = {name: hashlib.sha256(data).hexdigest()[:16] for name, data in loaded.items()}

    async def serve(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in loaded:
            return Response("not found", 404, headers=SECURITY_HEADERS)
        headers = {**SECURITY_HEADERS, "cache-control": "no-cache", "etag": f'"{tags[name]}"'}
        if request.headers.get("if-none-match") == headers["etag"]:
            return Response(status_code=304, headers=headers)
        return Response(loaded[name], media_type=FILES[name], headers=headers)

    async def home(_: Request) -> Response:
        return RedirectResponse(f"{PREFIX}/memories", 303, headers=SECURITY_HEADERS)

    return [
        Route(f"{PREFIX}/static/{{name}}", serve, methods=["GET", "HEAD"]),
        Route(PREFIX, home, methods=["GET", "HEAD"]),
        Route(f"{PREFIX}/", home, methods=["GET", "HEAD"]),
    ]
