"""Every HTTP request is counted by route group and status, the gate's refusals and the
inspector's requests included; a request the app failed without answering counts as 0."""

from __future__ import annotations

import asyncio

from starlette.types import Receive, Scope, Send

from tests.server.middleware.support import Gate, auth, client, rpc, settings


async def fails(scope: Scope, receive: Receive, send: Send) -> None:
    raise RuntimeError("the app failed")


def test_answers_and_refusals_are_counted_by_route_group() -> None:
    gate = Gate(settings())

    async def scenario() -> None:
        async with client(gate.asgi) as c:
            await c.post("/", json=rpc(), headers=auth("acme"))
            await c.post("/", json=rpc())
            await c.post("/message:send", json={})
            await c.get("/ui/login")
            await c.get("/health")

    asyncio.run(scenario())
    assert gate.count("a2a_http_requests_total", route="jsonrpc", status="200") == 1
    assert gate.count("a2a_http_requests_total", route="jsonrpc", status="401") == 1
    assert gate.count("a2a_http_requests_total", route="rest", status="401") == 1
    assert gate.count("a2a_http_requests_total", route="ui", status="200") == 1
    assert gate.count("a2a_http_requests_total", route="health", status="200") == 1


def test_a_request_the_app_did_not_answer_counts_as_status_0() -> None:
    gate = Gate(settings(keys=False), app=fails)

    async def scenario() -> int:
        async with client(gate.asgi, raise_app_exceptions=False) as c:
            return (await c.get("/health")).status_code

    assert asyncio.run(scenario()) == 500  # the transport's answer; the app sent none
    assert gate.count("a2a_http_requests_total", route="health", status="0") == 1


async def mounted(scope: Scope, receive: Receive, send: Send) -> None:
    """An app that moves the path on, as a mounted sub-application's router does."""
    scope["path"] = "/ui/elsewhere"
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def test_the_route_group_is_the_request_s_whatever_the_app_does_to_the_scope() -> None:
    gate = Gate(settings(keys=False), app=mounted)

    async def scenario() -> int:
        async with client(gate.asgi) as c:
            return (await c.post("/mcp", json={})).status_code

    assert asyncio.run(scenario()) == 204
    assert gate.count("a2a_http_requests_total", route="mcp", status="204") == 1
    assert gate.count("a2a_http_requests_total", route="ui") == 0
