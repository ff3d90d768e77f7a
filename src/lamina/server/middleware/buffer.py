"""The request body, read at most once and replayed: whichever check needs it first reads
it (within the size limit), the others and the app get the same bytes. ``BufferBody`` puts a
``RequestBody`` in the scope of every checked request; nothing is read until asked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lamina.server.body import BadBody, read_json
from lamina.server.middleware.request import headers_of, is_checked

SCOPE_KEY = "lamina.body"


class TooLarge(Exception):
    """The body is over the limit (declared in Content-Length, or counted)."""


class ClientGone(Exception):
    """The client disconnected before the whole body arrived."""


@dataclass(frozen=True)
class Parsed:
    """A POST body read as strict JSON: its value (None when there is no body or it is not
    JSON) and, when it is not, why."""

    value: Any
    bad: BadBody | None


class RequestBody:
    def __init__(self, receive: Receive, method: str, declared: str | None, max_bytes: int):
        self.max_bytes = max_bytes
        self._receive = receive
        self._method = method
        self._declared = declared
        self._body: bytes | None = None
        self._failed: Exception | None = None
        self._parsed: Parsed | None = None
        self._replayed = False

    @staticmethod
    def of(scope: Scope) -> RequestBody:
        body = scope.get(SCOPE_KEY)
        if not isinstance(body, RequestBody):
            raise RuntimeError("BufferBody must come before the checks that read the body")
        return body

    async def read(self) -> bytes:
        """The whole body; TooLarge past ``max_bytes``, ClientGone if the client left."""
        if self._failed is not None:
            raise self._failed
        if self._body is None:
            try:
                self._body = await self._read()
            except (TooLarge, ClientGone) as exc:
                self._failed = exc
                raise
        return self._body

    async def _read(self) -> bytes:
        length = self._declared
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            raise TooLarge
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                raise ClientGone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                raise TooLarge
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        return b"".join(chunks)

    async def parsed(self) -> Parsed:
        """The body of a POST as strict JSON, parsed once (reading it if no one has)."""
        if self._parsed is None:
            body = await self.read()
            value: Any = None
            bad: BadBody | None = None
            if self._method == "POST" and body:
                try:
                    value = read_json(body)
                except BadBody as exc:
                    bad = exc
            self._parsed = Parsed(value, bad)
        return self._parsed

    async def receive(self) -> Message:
        """The app's ``receive``: the body read here, once, then the client's messages."""
        if self._body is not None and not self._replayed:
            self._replayed = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        return await self._receive()


class BufferBody:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_checked(scope):
            await self.app(scope, receive, send)
            return
        declared = headers_of(scope).get("content-length")
        body = RequestBody(receive, scope["method"], declared, self.max_bytes)
        scope[SCOPE_KEY] = body
        await self.app(scope, body.receive, send)
