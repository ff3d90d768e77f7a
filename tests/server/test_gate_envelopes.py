"""The gate's refusals speak the route's protocol: 401, 413, 415 and 429 are JSON-RPC 2.0 error
envelopes on ``POST /`` (with the request's id when it could be read), the HTTP+JSON error
(google.rpc.Status with an ErrorInfo) on the REST routes, the legacy error on /tasks/send, with
the same HTTP status and headers everywhere. Bodies must be sent as JSON. A 429 names the
limit that tripped: the tenant's total or one skill's."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lamina.server.auth import hash_key, new_key
from tests.server.harness import (
    HEADERS,
    Running,
    result_of,
    running_server,
    send,
    server_settings,
    tool_message,
)

KEY, KEY_TOTAL, KEY_SKILL = new_key(), new_key(), new_key()
AUTH = {**HEADERS, "X-API-Key": KEY}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
MAX_BODY = 20_000


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = server_settings(
        tmp_path_factory.mktemp("envelopes") / "data",
        max_body_bytes=MAX_BODY,
        api_keys=[
            {"key_hash": hash_key(KEY), "tenant_id": "acme", "tier": "default"},
            {"key_hash": hash_key(KEY_TOTAL), "tenant_id": "busy", "tier": "tiny"},
            {"key_hash": hash_key(KEY_SKILL), "tenant_id": "picky", "tier": "small"},
        ],
        tiers={
            "default": {"requests_per_minute": 10_000},
            "tiny": {"requests_per_minute": 2},
            "small": {"requests_per_minute": 10_000, "skills": {"governance": 1}},
        },
    )
    with running_server(settings) as running:
        yield running


@pytest.fixture
def client(live: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


def envelope(message: dict[str, Any], rpc_id: str | int = "r-1") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "SendMessage", "params": {"message": message}}


def rpc_refusal(response: httpx.Response, status: int, code: int, rpc_id: Any) -> dict[str, Any]:
    """The error of a JSON-RPC 2.0 error envelope answered with HTTP ``status``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"}, body
    assert body["jsonrpc"] == "2.0" and body["id"] == rpc_id, body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code and isinstance(error["message"], str), error
    assert isinstance(error["data"], dict), error
    return error


def rest_refusal(response: httpx.Response, status: int, grpc: str, reason: str) -> dict[str, Any]:
    """The HTTP+JSON binding's error (as the A2A SDK answers REST errors): its ErrorInfo."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and error["status"] == grpc, error
    assert isinstance(error["message"], str)
    [info] = error["details"]
    assert info["@type"] == ERROR_INFO and info["reason"] == reason, info
    assert all(isinstance(v, str) for v in info["metadata"].values()), info
    info["message"] = error["message"]
    return dict(info)


def legacy_refusal(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code and isinstance(error["data"], dict), error
    return error


# -- 401 ---------------------------------------------------------------------------------


def test_401_is_an_envelope_on_jsonrpc_and_the_http_json_error_on_rest(
    client: httpx.Client,
) -> None:
    message = tool_message("memory_list", {"user_id": "u"})
    for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": "ms_wrong"}):
        response = client.post("/", json=envelope(message, "r-401"), headers=headers)
        error = rpc_refusal(response, 401, -32090, "r-401")
        assert error["data"]["reason"] == "UNAUTHORIZED"
        assert "bearer" in response.headers["www-authenticate"].lower()
    # A numeric id comes back as it was; a body that is not JSON has no id to answer with.
    rpc_refusal(client.post("/", json=envelope(message, 7)), 401, -32090, 7)
    unreadable = client.post("/", content=b"{oops", headers={"Content-Type": "application/json"})
    rpc_refusal(unreadable, 401, -32090, None)

    rest = client.post("/message:send", json={"message": message})
    assert "bearer" in rest.headers["www-authenticate"].lower()
    assert rest_refusal(rest, 401, "UNAUTHENTICATED", "UNAUTHORIZED")["domain"] == "lamina"
    rest_refusal(client.get("/tasks", headers=HEADERS), 401, "UNAUTHENTICATED", "UNAUTHORIZED")

    legacy = client.post("/tasks/send", json={"message": {"parts": []}})
    assert legacy_refusal(legacy, 401, -32090)["data"]["reason"] == "UNAUTHORIZED"
    assert "bearer" in legacy.headers["www-authenticate"].lower()


# -- 413 ---------------------------------------------------------------------------------


def test_413_is_an_envelope_on_jsonrpc_and_the_http_json_error_on_rest(
    client: httpx.Client,
) -> None:
    huge = tool_message("memory_add", {"content": "x" * 30_000, "layer": "user", "user_id": "u"})
    response = client.post("/", json=envelope(huge, "r-413"), headers=AUTH)
    # The body is not read past the limit: its id is unknown.
    error = rpc_refusal(response, 413, -32091, None)
    assert error["data"] == {"reason": "PAYLOAD_TOO_LARGE", "maxBytes": MAX_BODY}
    assert str(MAX_BODY) in error["message"]

    rest = client.post("/message:send", json={"message": huge}, headers=AUTH)
    info = rest_refusal(rest, 413, "INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE")
    assert info["metadata"] == {"maxBytes": str(MAX_BODY)}

    legacy = client.post("/tasks/send", json={"message": huge}, headers=AUTH)
    assert legacy_refusal(legacy, 413, -32091)["data"]["maxBytes"] == MAX_BODY


# -- 415 ---------------------------------------------------------------------------------


def test_a_body_not_sent_as_json_is_415_and_never_runs(client: httpx.Client) -> None:
    user = f"u-{uuid.uuid4().hex}"
    add = tool_message("memory_add", {"content": "typed wrong", "layer": "user", "user_id": user})
    raw = json.dumps(envelope(add, "r-415")).encode()
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {**AUTH, **({"Content-Type": content_type} if content_type else {})}
        response = client.post("/", content=raw, headers=headers)
        error = rpc_refusal(response, 415, -32005, "r-415")  # ContentTypeNotSupportedError
        assert error["data"]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
        assert error["data"]["contentType"] == (content_type or "")
        assert "application/json" in error["data"]["supported"]

        rest = client.post("/message:send", content=json.dumps({"message": add}), headers=headers)
        info = rest_refusal(rest, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")
        assert info["domain"] == "a2a-protocol.org"

        legacy = client.post("/tasks/send", content=json.dumps({"message": add}), headers=headers)
        assert legacy_refusal(legacy, 415, -32005)["data"]["reason"] == (
            "CONTENT_TYPE_NOT_SUPPORTED"
        )
    # None of them ran.
    listed = result_of(send(client, tool_message("memory_list", {"user_id": user}), headers=AUTH))
    assert listed["items"] == []


def test_json_with_a_charset_and_the_a2a_media_type_are_accepted(client: httpx.Client) -> None:
    user = f"u-{uuid.uuid4().hex}"
    for i, content_type in enumerate(
        ("application/json; charset=utf-8", "Application/JSON", "application/a2a+json")
    ):
        headers = {**AUTH, "Content-Type": content_type}
        args = {"content": f"typed right {i}", "layer": "user", "user_id": user}
        body = json.dumps(envelope(tool_message("memory_add", args), f"ok-{i}"))
        response = client.post("/", content=body, headers=headers)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        rest = client.post(
            "/message:send",
            content=json.dumps({"message": tool_message("memory_list", {"user_id": user})}),
            headers=headers,
        )
        assert rest.status_code == 200, rest.text
    legacy = client.post(
        "/tasks/send",
        content=json.dumps(
            {
                "id": f"legacy-{uuid.uuid4().hex}",
                "message": {
                    "role": "user",
                    "parts": [
                        {
                            "type": "data",
                            "data": {"tool": "memory_list", "arguments": {"user_id": user}},
                        }
                    ],
                },
            }
        ),
        headers={**AUTH, "Content-Type": "application/json; charset=utf-8"},
    )
    assert legacy.status_code == 200, legacy.text
    assert len(legacy.json()["artifacts"][0]["parts"][0]["data"]["items"]) == 3
    # A request without a body (GET) needs no Content-Type.
    assert client.get("/tasks", headers=AUTH).status_code == 200


# -- 429 ---------------------------------------------------------------------------------


def test_429_for_the_tenants_total_names_the_total_limit(client: httpx.Client) -> None:
    busy = {**HEADERS, "X-API-Key": KEY_TOTAL}
    message = tool_message("governance_policies", {})
    for i in range(2):
        response = client.post("/", json=envelope(message, f"ok-{i}"), headers=busy)
        assert response.status_code == 200, response.text
    response = client.post("/", json=envelope(message, "r-429"), headers=busy)
    error = rpc_refusal(response, 429, -32092, "r-429")
    assert 50 <= int(response.headers["retry-after"]) <= 60  # the moving window
    assert error["data"] == {
        "reason": "RATE_LIMITED",
        "limit": "total",
        "requestsPerMinute": 2,
        "skill": "governance",
        "retryAfterSeconds": int(response.headers["retry-after"]),
    }
    assert "2 requests per minute for all of the tenant's requests" in error["message"]
    assert "governance" not in error["message"] and "skill" not in error["message"]

    rest = client.post("/message:send", json={"message": message}, headers=busy)
    assert 50 <= int(rest.headers["retry-after"]) <= 60  # the moving window
    info = rest_refusal(rest, 429, "RESOURCE_EXHAUSTED", "RATE_LIMITED")
    assert info["metadata"]["limit"] == "total" and info["metadata"]["requestsPerMinute"] == "2"
    assert "all of the tenant's requests" in info["message"]

    legacy = client.post("/tasks/send", json={"message": {"parts": []}}, headers=busy)
    assert legacy_refusal(legacy, 429, -32092)["data"]["limit"] == "total"
    assert 50 <= int(legacy.headers["retry-after"]) <= 60  # the moving window


def test_429_for_one_skill_names_the_skill_limit(client: httpx.Client) -> None:
    picky = {**HEADERS, "X-API-Key": KEY_SKILL}
    message = tool_message("governance_policies", {})
    first = client.post("/", json=envelope(message, "ok"), headers=picky)
    assert first.status_code == 200, first.text
    response = client.post("/", json=envelope(message, 42), headers=picky)
    error = rpc_refusal(response, 429, -32092, 42)
    assert 50 <= int(response.headers["retry-after"]) <= 60  # the moving window
    assert error["data"]["limit"] == "skill" and error["data"]["requestsPerMinute"] == 1
    assert "1 requests per minute for skill 'governance'" in error["message"]
    assert "all of the tenant's requests" not in error["message"]

    rest = client.post("/message:send", json={"message": message}, headers=picky)
    info = rest_refusal(rest, 429, "RESOURCE_EXHAUSTED", "RATE_LIMITED")
    assert info["metadata"]["limit"] == "skill" and info["metadata"]["skill"] == "governance"
    # Other skills of the tenant go on.
    assert send(client, tool_message("memory_list", {"user_id": "x"}), headers=picky)["status"]
