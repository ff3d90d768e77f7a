"""API keys: no key or a wrong one is refused with 401 and WWW-Authenticate in the route's
protocol (a JSON-RPC refusal carries the request's id when the body fits the limit); /metrics
needs an admin key (403); the caller's principal reaches the app; /health and the card are
public, and /health tells its detail to an admin key only."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.middleware import Middleware

from lamina.server.auth import KeyRing
from lamina.server.middleware import ApiKeys, BufferBody
from tests.server.middleware.support import auth, call, rpc, seen, settings, stack

LIMIT = 300


def keyed(*, keys: bool = True) -> Any:
    ring = KeyRing(settings(keys=keys).api_keys)
    return stack(
        Middleware(BufferBody, max_bytes=LIMIT),
        Middleware(ApiKeys, keys=ring, default_tenant="solo"),
    )


@pytest.mark.parametrize("headers", [{}, {"x-api-key": "not-a-key"}, {"authorization": "Basic x"}])
def test_json_rpc_without_a_valid_key_gets_401_with_the_request_id(headers: Any) -> None:
    response = call(keyed(), "POST", "/", json=rpc("r-7"), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="lamina"'
    envelope = response.json()
    assert envelope["id"] == "r-7"
    assert envelope["error"]["code"] == -32090
    assert envelope["error"]["data"] == {"reason": "UNAUTHORIZED"}
    assert "Authorization: Bearer <key> or X-API-Key: <key>" in envelope["error"]["message"]


def test_an_oversized_body_without_a_key_is_401_with_no_id() -> None:
    body = {**rpc("r-8"), "pad": "x" * LIMIT}
    response = call(keyed(), "POST", "/", content=json.dumps(body).encode())
    assert response.status_code == 401 and response.json()["id"] is None


@pytest.mark.parametrize(
    ("method", "path", "error_of"),
    [
        ("POST", "/message:send", lambda e: e["details"][0]["reason"]),
        ("POST", "/tasks/send", lambda e: e["data"]["reason"]),
        ("POST", "/mcp", lambda e: e["code"]),
        ("POST", "/.well-known/agent-card.json", lambda e: e["code"]),
        ("GET", "/metrics", lambda e: e["code"]),
    ],
)
def test_every_other_route_gets_401_in_its_own_shape(method: str, path: str, error_of: Any) -> None:
    response = call(keyed(), method, path, json={})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="lamina"'
    assert error_of(response.json()["error"]) == "UNAUTHORIZED"


def test_metrics_need_an_admin_key() -> None:
    refused = call(keyed(), "GET", "/metrics", headers=auth("acme"))
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error == {
        "code": "UNAUTHORIZED",
        "message": "/metrics needs a key of tier admin",
        "details": {},
    }
    assert seen(call(keyed(), "GET", "/metrics", headers=auth("root")))["tier"] == "admin"


def test_the_caller_reaches_the_app_by_either_header() -> None:
    by_key = seen(call(keyed(), "POST", "/", json=rpc(), headers=auth("acme")))
    assert (by_key["tenant"], by_key["tier"]) == ("acme", "default")
    bearer = {"authorization": "Bearer k-busy-0123456789"}
    assert seen(call(keyed(), "POST", "/message:send", json={}, headers=bearer))["tenant"] == "busy"


def test_without_keys_every_request_is_the_configured_tenant_s() -> None:
    got = seen(call(keyed(keys=False), "POST", "/", json=rpc(), headers=auth("acme")))
    assert (got["tenant"], got["tier"]) == ("solo", "default")
    assert seen(call(keyed(keys=False), "GET", "/health"))["detail"] is True


def test_health_and_the_card_are_public_and_health_detail_is_for_admins() -> None:
    assert seen(call(keyed(), "GET", "/health"))["detail"] is False
    assert seen(call(keyed(), "GET", "/health", headers=auth("acme")))["detail"] is False
    assert seen(call(keyed(), "GET", "/health", headers=auth("root")))["detail"] is True
    card = seen(call(keyed(), "GET", "/.well-known/agent-card.json"))
    assert card["tenant"] is None  # public: no principal is set
    assert call(keyed(), "HEAD", "/.well-known/agent-card.json").status_code == 200
