"""The body size limit (with the buffer that reads the body once): a body over the limit,
declared or counted, is refused with 413 in the route's protocol before the app sees it;
one that fits reaches the app whole, once; a client that leaves mid-body gets no answer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from starlette.middleware import Middleware
from starlette.types import Message

from lamina.server.middleware import BodyLimit, BufferBody
from lamina.server.middleware.buffer import RequestBody
from tests.server.middleware.support import client, echo, seen, stack

LIMIT = 100
LIMITED = stack(Middleware(BufferBody, max_bytes=LIMIT), Middleware(BodyLimit))
JSON = {"content-type": "application/json"}


async def pieces(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def post(path: str, content: Any, headers: dict[str, str] | None = None) -> Any:
    async with client(LIMITED) as c:
        return await c.post(path, content=content, headers=headers or JSON)


def test_a_body_that_fits_reaches_the_app_once_and_whole() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "GetTask"}).encode()
    response = asyncio.run(post("/", pieces(body[:10], body[10:30], body[30:])))
    assert seen(response)["chunks"] == [body.decode()]


def test_a_body_counted_past_the_limit_is_refused_with_413() -> None:
    response = asyncio.run(post("/message:send", pieces(b"{" + b" " * 60, b" " * 60 + b"}")))
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == 413 and error["status"] == "INVALID_ARGUMENT"
    assert error["details"][0]["reason"] == "PAYLOAD_TOO_LARGE"
    assert error["details"][0]["metadata"] == {"maxBytes": str(LIMIT)}
    assert error["message"] == f"the request body is over the limit of {LIMIT} bytes"


def test_an_oversized_json_rpc_body_is_not_read_for_its_id() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": "big", "pad": "x" * LIMIT}).encode()
    response = asyncio.run(post("/", body))
    assert response.status_code == 413
    envelope = response.json()
    assert envelope["id"] is None and envelope["error"]["code"] == -32091
    assert envelope["error"]["data"] == {"reason": "PAYLOAD_TOO_LARGE", "maxBytes": LIMIT}


async def raw(path: str, headers: dict[str, str], messages: list[Message]) -> dict[str, Any]:
    """One request as ASGI messages: what was sent back, and how many were received."""
    inbox = iter(messages)
    sent: list[Message] = []
    received = 0

    async def receive() -> Message:
        nonlocal received
        received += 1
        return next(inbox, {"type": "http.disconnect"})

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "query_string": b"",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }
    await LIMITED(scope, receive, send)
    return {"sent": sent, "received": received}


def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    body = {"type": "http.request", "body": b"{}", "more_body": False}
    got = asyncio.run(raw("/tasks/send", {"content-length": str(LIMIT + 1)}, [body]))
    assert got["received"] == 0
    assert got["sent"][0]["status"] == 413
    payload = json.loads(got["sent"][1]["body"])
    assert payload["error"]["code"] == -32091


def test_a_client_that_leaves_mid_body_gets_no_answer() -> None:
    first = {"type": "http.request", "body": b"{", "more_body": True}
    got = asyncio.run(raw("/", {}, [first, {"type": "http.disconnect"}]))
    assert got["sent"] == []


def test_the_inspector_and_the_public_reads_are_not_limited_here() -> None:
    async def scenario() -> None:
        async with client(LIMITED) as c:
            form = await c.post("/ui/login", content=b"k=" + b"v" * 500)
            assert "".join(seen(form)["chunks"]) == "k=" + "v" * 500
            card = await c.request("GET", "/health", content=b"x" * 500)
            assert "".join(seen(card)["chunks"]) == "x" * 500

    asyncio.run(scenario())


def test_the_buffer_alone_replays_nothing_it_did_not_read() -> None:
    app = stack(Middleware(BufferBody, max_bytes=LIMIT), app=echo)

    async def scenario() -> Any:
        async with client(app) as c:
            return await c.post("/", content=pieces(b"ab", b"cd"), headers=JSON)

    assert seen(asyncio.run(scenario()))["chunks"] == ["ab", "cd", ""]


def test_a_check_without_the_buffer_before_it_is_told_so() -> None:
    with pytest.raises(RuntimeError, match="BufferBody must come before"):
        RequestBody.of({"type": "http", "path": "/", "method": "POST"})
    app = stack(Middleware(BodyLimit))
    with pytest.raises(RuntimeError, match="BufferBody must come before"):
        asyncio.run(raw_through(app))


async def raw_through(app: Any) -> None:
    async with client(app) as c:
        await c.post("/", content=b"{}", headers=JSON)
