"""The A2A version warning: a client declaring (``A2A-Version``) a version newer than the one
served is logged; the request goes on (the A2A adapter answers a newer major version with
VersionNotSupportedError)."""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from lamina.server.middleware.request import headers_of, is_checked

log = logging.getLogger("lamina.server")

SUPPORTED_VERSION = (1, 0)


def declared_version(header: str) -> tuple[int, int] | None:
    """``major.minor`` of an A2A-Version header (``2`` is 2.0), None when it is not one."""
    try:
        major, _, minor = header.strip().partition(".")
        return int(major), int(minor.split(".")[0] or 0)
    except ValueError:
        return None


class VersionWarning:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = headers_of(scope).get("a2a-version") if is_checked(scope) else None
        if declared:
            version = declared_version(declared)
            if version is not None and version > SUPPORTED_VERSION:
                log.warning(
                    "client declares A2A version %s, newer than the supported %d.%d (%s %s)",
                    declared,
                    *SUPPORTED_VERSION,
                    scope["method"],
                    scope["path"],
                )
        await self.app(scope, receive, send)
