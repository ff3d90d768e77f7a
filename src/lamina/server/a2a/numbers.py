"""Whole numbers through protobuf: a ``Struct`` holds every number as a double, so a tool's
``"total_count": 3`` or a client's ``"metadata": {"priority": 3}`` would come back as 3.0.

What arrives is read back with ``whole`` (so stored metadata keeps 3, not 3.0), and the A2A
responses are written with whole doubles as integers, as protobuf's reference JSON printer
does (C++ prints the double 3.0 as ``3``). Doubles beyond 2**53 stay as they are: not every
integer there is a double.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Past this, a double no longer stands for one integer.
EXACT = 2**53

#: Scope key an app sets (before its response starts) when its JSON already has whole
#: numbers as integers: the response leaves unchanged.
WRITTEN_WHOLE = "lamina.written_whole"

#: The JSON media types the A2A routes answer with (REST uses A2A's own).
JSON_MEDIA = ("application/json", "application/a2a+json")


def whole(value: Any) -> Any:
    """``value`` with every float that is a whole number within ±2**53 made an int."""
    if isinstance(value, float):
        return int(value) if value.is_integer() and -EXACT <= value <= EXACT else value
    if isinstance(value, dict):
        return {k: whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole(v) for v in value]
    return value


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def rewrite_json(body: bytes) -> bytes:
    """A JSON body with whole doubles written as integers (unchanged if it is not JSON)."""
    try:
        return _dumps(whole(json.loads(body)))
    except ValueError:
        return body


def rewrite_events(chunk: bytes) -> bytes:
    """Server-sent events with the JSON of each ``data:`` line rewritten."""
    lines = chunk.split(b"\n")
    for i, line in enumerate(lines):
        if line.startswith(b"data:"):
            payload = line[5:].strip()
            if payload[:1] in (b"{", b"["):
                ending = b"\r" if line.endswith(b"\r") else b""
                lines[i] = b"data: " + rewrite_json(payload) + ending
    return b"\n".join(lines)


class WholeNumbers:
    """ASGI middleware: JSON and event-stream responses of the paths ``applies`` accepts
    leave with whole doubles written as integers."""

    def __init__(self, app: ASGIApp, applies: Any) -> None:
        self.app = app
        self.applies = applies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.applies(scope["path"], scope["method"]):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        kind = ""
        chunks: list[bytes] = []

        async def rewriting(message: Message) -> None:
            nonlocal start, kind
            if message["type"] == "http.response.start":
                if scope.get(WRITTEN_WHOLE):  # the app wrote whole numbers itself
                    await send(message)
                    return
                types = dict(message.get("headers", []))
                kind = types.get(b"content-type", b"").split(b";")[0].strip().decode("latin-1")
                if kind in JSON_MEDIA:
                    start = message  # sent with the whole body, its length corrected
                    return
                await send(message)
                return
            if message["type"] != "http.response.body" or kind not in (
                *JSON_MEDIA,
                "text/event-stream",
            ):
                await send(message)
                return
            if kind == "text/event-stream":
                body = message.get("body", b"")
                await send({**message, "body": rewrite_events(body) if body else body})
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = rewrite_json(b"".join(chunks))
            if start is None:  # no response start was held back: nothing to correct
                await send({**message, "body": body})
                return
            headers = [
                (k, str(len(body)).encode("latin-1") if k.lower() == b"content-length" else v)
                for k, v in start.get("headers", [])
            ]
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})

        await self.app(scope, receive, rewriting)
