"""Strict JSON on the A2A routes: a body that is not (NaN, invalid UTF-8, a number no double
holds) or a query parameter that must be whole and is not is refused the way the route
speaks; what was read reaches the app in the scope, parsed once."""

from __future__ import annotations

import logging

import pytest
from starlette.middleware import Middleware

from lamina.server.auth import KeyRing
from lamina.server.middleware import ApiKeys, BodyLimit, BufferBody, StrictJson
from tests.server.middleware.support import auth, call, rpc, seen, settings, stack

STRICT = stack(
    Middleware(BufferBody, max_bytes=1000),
    Middleware(ApiKeys, keys=KeyRing(settings().api_keys), default_tenant="solo"),
    Middleware(BodyLimit),
    Middleware(StrictJson),
)
JSON = {**auth("acme"), "content-type": "application/json"}
NAN = b'{"jsonrpc": "2.0", "id": "n", "value": NaN}'


def test_the_parsed_body_reaches_the_app() -> None:
    got = seen(call(STRICT, "POST", "/", json=rpc("r-1"), headers=auth("acme")))
    assert got["json"] == rpc("r-1")
    assert seen(call(STRICT, "GET", "/tasks/t-1", headers=auth("acme")))["json"] is None


def test_json_rpc_gets_a_parse_error_with_http_200(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="lamina.server"):
        response = call(STRICT, "POST", "/", content=NAN, headers=JSON)
    assert response.status_code == 200
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "NaN is not a JSON number"},
    }
    assert "POST /: unreadable body from tenant acme: NaN is not a JSON number" in caplog.text


def test_rest_and_legacy_get_400() -> None:
    rest = call(STRICT, "POST", "/message:send", content=b'{"a": "\xff"}', headers=JSON)
    assert rest.status_code == 400
    error = rest.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "INVALID_REQUEST",
            "domain": "a2a-protocol.org",
        }
    ]
    legacy = call(STRICT, "POST", "/tasks/send", content=NAN, headers=JSON)
    assert legacy.status_code == 400
    assert legacy.json() == {"error": {"code": -32700, "message": "NaN is not a JSON number"}}


def test_a_query_number_that_is_not_whole_is_refused() -> None:
    response = call(STRICT, "GET", "/tasks/t-1?historyLength=x", headers=auth("acme"))
    assert response.status_code == 400
    assert "historyLength" in response.json()["error"]["message"]


def test_other_routes_pass_what_they_cannot_read_on() -> None:
    got = seen(call(STRICT, "POST", "/mcp?historyLength=x", content=NAN, headers=JSON))
    assert got["json"] is None and got["chunks"] == [NAN.decode()]
