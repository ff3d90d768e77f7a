"""The gate as app.py composes it: the checks run in one order (key, version warning, body
size, content type, rate limit, strict JSON) and the first that fails answers; the body is
read once, and a request the gate lets through reaches the app whole."""

from __future__ import annotations

import json
import logging

import pytest

from tests.server.middleware.support import Gate, auth, call, rpc, seen, settings

LIMIT = 200
BIG = json.dumps({**rpc("big"), "pad": "x" * LIMIT}).encode()
NAN = b'{"jsonrpc": "2.0", "id": "n", "value": NaN}'


def gate() -> Gate:
    return Gate(settings(max_body=LIMIT, busy={"requests_per_minute": 1}))


def test_a_missing_key_comes_before_the_body_size() -> None:
    assert call(gate().asgi, "POST", "/", content=BIG).status_code == 401


def test_the_body_size_comes_before_the_content_type() -> None:
    plain = {**auth("acme"), "content-type": "text/plain"}
    assert call(gate().asgi, "POST", "/", content=BIG, headers=plain).status_code == 413


def test_the_content_type_comes_before_the_rate_limit_and_is_not_counted() -> None:
    g = gate()
    plain = {**auth("busy"), "content-type": "text/plain"}
    body = json.dumps(rpc()).encode()
    for _ in range(3):
        assert call(g.asgi, "POST", "/", content=body, headers=plain).status_code == 415
    seen(call(g.asgi, "POST", "/", json=rpc(), headers=auth("busy")))  # its one request
    assert call(g.asgi, "POST", "/", json=rpc(), headers=auth("busy")).status_code == 429


def test_the_rate_limit_comes_before_an_unreadable_body() -> None:
    g = gate()
    typed = {**auth("busy"), "content-type": "application/json"}
    assert call(g.asgi, "POST", "/", content=NAN, headers=typed).json()["error"]["code"] == -32700
    limited = call(g.asgi, "POST", "/", content=NAN, headers=typed)
    assert limited.status_code == 429 and limited.json()["id"] is None


def test_the_version_warning_is_only_for_callers_with_a_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="lamina.server"):
        call(gate().asgi, "POST", "/", json=rpc(), headers={"A2A-Version": "2.0"})
        assert caplog.messages == []
        call(gate().asgi, "POST", "/", json=rpc(), headers={**auth("acme"), "A2A-Version": "2.0"})
    assert len(caplog.messages) == 1 and "newer than the supported 1.0" in caplog.messages[0]


def test_what_passes_reaches_the_app_once_with_its_caller_and_json() -> None:
    body = json.dumps(rpc("r-1")).encode()
    typed = {**auth("acme"), "content-type": "application/json"}
    got = seen(call(gate().asgi, "POST", "/", content=body, headers=typed))
    assert got["chunks"] == [body.decode()]
    assert (got["tenant"], got["json"]) == ("acme", rpc("r-1"))
