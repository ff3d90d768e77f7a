"""The inspector's files (its stylesheet), read from the package once, and ``/ui`` itself."""

from __future__ import annotations

import hashlib

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from lamina.server.ui.base import HERE, PREFIX, SECURITY_HEADERS, Inspector

#: The files served under /ui/static/, with their media types.
FILES = {"ui.css": "text/css; charset=utf-8"}


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
