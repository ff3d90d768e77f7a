"""The A2A routes take JSON only: a body sent as anything but ``application/json`` or
``application/a2a+json`` (parameters such as charset aside) is refused with 415, A2A's
ContentTypeNotSupportedError."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from lamina.server.middleware.buffer import RequestBody
from lamina.server.middleware.refusal import Refusal, refuse
from lamina.server.middleware.request import A2A_GROUPS, group_of, headers_of, is_checked

log = logging.getLogger("lamina.server")

# Media types a JSON body may be sent as: JSON, and the HTTP+JSON binding's own type.
JSON_TYPES = ("application/json", "application/a2a+json")
CONTENT_TYPE_NOT_SUPPORTED_CODE = -32005  # A2A ContentTypeNotSupportedError


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type header names JSON (``application/json; charset=utf-8`` does)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media in JSON_TYPES


def not_json(content_type: str | None) -> Refusal:
    return Refusal(
        415,
        "CONTENT_TYPE_NOT_SUPPORTED",
        CONTENT_TYPE_NOT_SUPPORTED_CODE,
        "INVALID_ARGUMENT",
        "the request body must be JSON (Content-Type: application/json), "
        f"not {content_type or 'untyped'}",
        data={"contentType": content_type or "", "supported": list(JSON_TYPES)},
        domain="a2a-protocol.org",
    )


class JsonContentType:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if is_checked(scope) and group_of(scope) in A2A_GROUPS:
            content_type = headers_of(scope).get("content-type")
            if await RequestBody.of(scope).read() and not is_json(content_type):
                log.info(
                    "%s %s: body of type %r refused", scope["method"], scope["path"], content_type
                )
                await refuse(scope, send, not_json(content_type))
                return
        await self.app(scope, receive, send)
