"""The gate in front of every route, one pure ASGI middleware per concern. ``app.py``
composes them, outermost first: ``HttpMetrics`` (the request metric), ``BufferBody`` (the
body read once and replayed), ``ApiKeys`` (401, 403), ``VersionWarning``, ``BodyLimit``
(413), ``JsonContentType`` (415), ``RateLimit`` (429), ``StrictJson`` (400, -32700). Every
refusal is rendered in the route's protocol by ``refusal``."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.middleware import Middleware
from starlette.types import ASGIApp

from lamina.server.middleware.body_limit import BodyLimit
from lamina.server.middleware.buffer import BufferBody
from lamina.server.middleware.content_type import JsonContentType
from lamina.server.middleware.http_metrics import HttpMetrics
from lamina.server.middleware.keys import ApiKeys
from lamina.server.middleware.rate_limit import RateLimit
from lamina.server.middleware.request import A2A_GROUPS, route_group
from lamina.server.middleware.strict_json import StrictJson
from lamina.server.middleware.version import VersionWarning

__all__ = [
    "A2A_GROUPS",
    "ApiKeys",
    "BodyLimit",
    "BufferBody",
    "HttpMetrics",
    "JsonContentType",
    "RateLimit",
    "StrictJson",
    "VersionWarning",
    "route_group",
    "wrap",
]


def wrap(app: ASGIApp, middleware: Sequence[Middleware]) -> ASGIApp:
    """``app`` behind ``middleware``, the first outermost (as Starlette builds its stack)."""
    for cls, args, kwargs in reversed(middleware):
        app = cls(app, *args, **kwargs)
    return app
