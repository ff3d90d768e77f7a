"""The body size limit: a body over ``max_body_bytes`` (declared in Content-Length, or
counted as it arrives) is refused with 413 before it is read any further. Reads the body
(``BufferBody`` keeps it for the checks after this one and the app)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from lamina.server.middleware.buffer import ClientGone, RequestBody, TooLarge
from lamina.server.middleware.refusal import Refusal, refuse
from lamina.server.middleware.request import is_checked

# An implementation-defined server error: A2A names none for an oversized body.
PAYLOAD_TOO_LARGE_CODE = -32091


def too_large(max_bytes: int) -> Refusal:
    return Refusal(
        413,
        "PAYLOAD_TOO_LARGE",
        PAYLOAD_TOO_LARGE_CODE,
        "INVALID_ARGUMENT",
        f"the request body is over the limit of {max_bytes} bytes",
        data={"maxBytes": max_bytes},
    )


class BodyLimit:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if is_checked(scope) and not await self._fits(scope, send):
            return
        await self.app(scope, receive, send)

    async def _fits(self, scope: Scope, send: Send) -> bool:
        """Read the body: True when it fits, False once refused (or the client left)."""
        body = RequestBody.of(scope)
        try:
            await body.read()
        except ClientGone:
            return False
        except TooLarge:
            await refuse(scope, send, too_large(body.max_bytes))
            return False
        return True
