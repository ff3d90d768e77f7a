"""API keys → tenants, tenant isolation across every tool and route, the loopback rule,
rate limits (in-process and Redis) with 429 + Retry-After, and their metric."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lamina.config import ServerSettings
from lamina.errors import ErrorCode, LaminaError
from lamina.server.app import check_bind
from lamina.server.auth import KeyRing, hash_key, new_key
from lamina.server.ratelimit import Limited, LocalWindows, RateLimiter
from tests.server.harness import (
    HEADERS,
    Running,
    result_of,
    rpc,
    running_server,
    send,
    server_settings,
    tool_message,
)

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

KEY_A, KEY_B, KEY_C, KEY_ADMIN = new_key(), new_key(), new_key(), new_key()
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"X-API-Key": KEY_B}


def _keys() -> list[dict[str, str]]:
    return [
        {"key_hash": hash_key(KEY_A), "tenant_id": "acme", "tier": "default", "name": "a"},
        {"key_hash": hash_key(KEY_B), "tenant_id": "globex", "tier": "small"},
        {"key_hash": hash_key(KEY_C), "tenant_id": "initech", "tier": "small"},
        {"key_hash": hash_key(KEY_ADMIN), "tenant_id": "ops", "tier": "admin"},
    ]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = server_settings(
        tmp_path_factory.mktemp("auth") / "data",
        api_keys=_keys(),
        tiers={
            "default": {"requests_per_minute": 10_000},
            "small": {"requests_per_minute": 10_000, "skills": {"governance": 3}},
            "admin": {"requests_per_minute": 10_000},
        },
    )
    with running_server(settings) as running:
        yield running


def _send(
    client: httpx.Client, headers: dict[str, str], tool: str, args: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return send(client, tool_message(tool, args, **extra), headers=headers)


def test_no_or_bad_key_is_401_but_card_and_health_stay_public(client: httpx.Client) -> None:
    message = tool_message("memory_list", {"user_id": "u"})
    envelope = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"X-API-Key": "ms_wrong"},
        {"Authorization": f"Basic {KEY_A}"},
    ):
        response = client.post("/", json=envelope, headers={**HEADERS, **headers})
        assert response.status_code == 401, headers
        assert response.json()["error"]["data"]["reason"] == "UNAUTHORIZED"
        assert "bearer" in response.headers["www-authenticate"].lower()
    for path in ("/tasks", "/tasks/x", "/tasks/x/get"):
        assert client.get(path, headers=HEADERS).status_code == 401
    assert client.post("/message:send", json={"message": message}).status_code == 401
    assert client.post("/tasks/send", json={"message": {"parts": []}}).status_code == 401
    card = client.get("/.well-known/agent-card.json").json()
    assert "apiKey" in card["securitySchemes"]
    assert client.get("/health").status_code == 200
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=A).status_code == 403
    assert client.get("/metrics", headers={"X-API-Key": KEY_ADMIN}).status_code == 200


def test_a_tenant_never_reaches_another_tenants_data(client: httpx.Client) -> None:
    added = _send(
        client,
        A,
        "memory_add",
        {"content": "acme secret plan", "layer": "user", "user_id": "u1"},
        metadata={"project_id": "p1"},
    )
    memory_id = result_of(added)["id"]
    thread, task_id = added["contextId"], added["id"]
    created = _send(
        client,
        A,
        "knowledge_create",
        {
            "type": "adr",
            "title": "Use PostgreSQL",
            "layer": "company",
            "id": "adr-001",
            "status": "accepted",
            "body": "acme decision",
        },
    )
    assert created["status"]["state"] == "TASK_STATE_COMPLETED", created
    # Every tool, as tenant B, against tenant A's ids.
    attempts = [
        ("memory_update", {"memory_id": memory_id, "content": "pwned"}, "MEMORY_NOT_FOUND"),
        ("knowledge_get", {"id": "adr-001"}, "ITEM_NOT_FOUND"),
        ("knowledge_update", {"id": "adr-001", "body": "pwned"}, "ITEM_NOT_FOUND"),
        ("knowledge_status", {"id": "adr-001", "status": "deprecated"}, "ITEM_NOT_FOUND"),
        ("knowledge_history", {"id": "adr-001"}, "ITEM_NOT_FOUND"),
    ]
    for tool, args, code in attempts:
        task = _send(client, B, tool, args)
        assert task["status"]["state"] == "TASK_STATE_REJECTED", (tool, task)
        error = task["status"]["message"]["parts"][1]["data"]["error"]
        assert error["code"] == code, tool
    # Reading another tenant's memory finds nothing, as reading an unknown id.
    assert result_of(_send(client, B, "memory_get", {"memory_id": memory_id})) is None
    # Delete is idempotent (as in the library): it reports that nothing existed.
    gone = result_of(_send(client, B, "memory_delete", {"memory_id": memory_id}))
    assert gone["existed"] is False
    reads = [
        ("memory_search", {"query": "secret plan", "user_id": "u1"}, "results"),
        ("memory_list", {"user_id": "u1"}, "items"),
        ("knowledge_query", {"query": "PostgreSQL"}, "results"),
    ]
    for tool, args, key in reads:
        assert result_of(_send(client, B, tool, args))[key] == [], tool
    policies = result_of(_send(client, B, "governance_policies", {}))["policies"]
    assert [p["id"] for p in policies] == ["builtin-secrets"]
    # Tasks and threads.
    assert rpc(client, "GetTask", {"id": task_id}, headers=B)["error"]["code"] == -32001
    assert rpc(client, "CancelTask", {"id": task_id}, headers=B)["error"]["code"] == -32001
    listed = rpc(client, "ListTasks", {}, headers=B)["result"]
    assert task_id not in [t["id"] for t in listed.get("tasks", [])]
    assert client.get(f"/tasks/{task_id}", headers={**HEADERS, **B}).status_code == 404
    assert client.get(f"/tasks/{task_id}/get", headers=B).status_code == 404
    follow = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "taskId": task_id,
        "parts": [{"text": "hi"}],
    }
    assert rpc(client, "SendMessage", {"message": follow}, headers=B)["error"]["code"] == -32001
    # B continuing A's contextId gets its own thread: none of A's identifiers or memories.
    mine = _send(client, B, "memory_list", {}, contextId=thread)
    assert mine["status"]["state"] == "TASK_STATE_REJECTED", mine["status"]
    error = mine["status"]["message"]["parts"][1]["data"]["error"]
    assert error["code"] in ("MISSING_IDENTIFIER", "INVALID_ARGUMENT")
    # And A still has everything, unchanged.
    again = result_of(_send(client, A, "memory_get", {"memory_id": memory_id}))
    assert again["content"] == "acme secret plan"
    item = result_of(_send(client, A, "knowledge_get", {"id": "adr-001"}))
    assert item["status"] == "accepted" and "acme decision" in item["body"]
    assert rpc(client, "GetTask", {"id": task_id}, headers=A)["result"]["id"] == task_id


def test_rate_limit_per_skill_returns_429_with_retry_after(
    client: httpx.Client, live: Running
) -> None:
    C = {"X-API-Key": KEY_C}
    codes = []
    for _ in range(5):
        response = client.post(
            "/",
            headers={**HEADERS, **C},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": tool_message("governance_policies", {})},
            },
        )
        codes.append(response.status_code)
        if response.status_code == 429:
            assert 50 <= int(response.headers["retry-after"]) <= 60  # the moving window
            assert response.json()["error"]["data"]["reason"] == "RATE_LIMITED"
    assert codes[:3] == [200, 200, 200] and codes[3:] == [429, 429]
    # Other skills of the same tenant, and other tenants, are not limited by it.
    assert _send(client, C, "memory_list", {"user_id": "x"})["status"]["state"]
    assert _send(client, A, "governance_policies", {})["status"]["state"] == (
        "TASK_STATE_COMPLETED"
    )
    metrics = client.get("/metrics", headers={"X-API-Key": KEY_ADMIN}).text
    assert 'a2a_rate_limit_hits_total{skill_name="governance",tenant_id="initech"} 2.0' in metrics


def test_tier_limit_counts_every_request() -> None:
    limiter = RateLimiter(ServerSettings(tiers={"t": {"requests_per_minute": 2}}))
    results = asyncio.run(_hits(limiter, "acme", "t", 3))
    assert results[:2] == [None, None]
    refused = results[2]
    assert refused is not None and (refused.scope, refused.limit) == ("total", 2)
    assert 59 <= refused.retry_after <= 60  # when the first of the two leaves the window


async def _hits(limiter: RateLimiter, tenant: str, tier: str, n: int) -> list[Limited | None]:
    try:
        return [await limiter.check(tenant, tier, "memory") for _ in range(n)]
    finally:
        await limiter.aclose()


async def _after_boundary(window: int, at: float) -> None:
    """Sleep until ``at`` seconds into a fixed window of ``window`` seconds (epoch-aligned)."""
    now = time.time()
    await asyncio.sleep((at - now % window) % window)


def test_the_window_moves_no_burst_of_twice_the_limit_at_a_boundary() -> None:
    """A fixed window lets the limit through just before its end and again just after it;
    the moving window counts the requests of the last ``window`` seconds wherever they fall."""
    limiter = RateLimiter(ServerSettings(tiers={"t": {"requests_per_minute": 5}}), window=2)

    async def scenario() -> tuple[list[Limited | None], list[Limited | None], list[Limited | None]]:
        try:
            await _after_boundary(2, 1.6)  # late in a fixed window
            before = [await limiter.check("acme", "t", "memory") for _ in range(5)]
            await _after_boundary(2, 0.1)  # a fixed window would start counting again here
            after = [await limiter.check("acme", "t", "memory") for _ in range(5)]
            await asyncio.sleep(2.0)  # the first burst has left the window
            later = [await limiter.check("acme", "t", "memory") for _ in range(5)]
            return before, after, later
        finally:
            await limiter.aclose()

    before, after, later = asyncio.run(scenario())
    assert before == [None] * 5
    assert all(r is not None and r.scope == "total" for r in after), after
    assert later == [None] * 5


def _redis_or_skip(limiter: RateLimiter, url: str) -> None:
    async def probe() -> bool:
        try:
            return bool(await limiter.storage.check())
        finally:
            await limiter.aclose()

    try:
        ok = asyncio.run(probe())
    except Exception as exc:
        ok, why = False, str(exc)
    else:
        why = "check() failed"
    if not ok:
        if os.environ.get("CI"):
            raise AssertionError(f"no Redis at {url}: {why}")
        pytest.skip(f"no Redis at {url}: {why}")


def test_redis_limits_are_shared_between_replicas() -> None:
    url = os.environ.get("LAMINA_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    settings = ServerSettings(redis_url=url, tiers={"default": {"requests_per_minute": 4}})
    _redis_or_skip(RateLimiter(settings), url)

    async def scenario() -> list[Limited | None]:
        one, two = RateLimiter(settings), RateLimiter(settings)
        tenant = f"t-{uuid.uuid4().hex}"
        try:
            return [
                await (one if i % 2 else two).check(tenant, "default", "memory") for i in range(6)
            ]
        finally:
            await one.aclose()
            await two.aclose()

    results = asyncio.run(scenario())
    assert results[:4] == [None] * 4 and all(r is not None for r in results[4:])


def test_two_server_processes_share_one_redis_limit(tmp_path: Path) -> None:
    from tests.server.test_processes import serve_process

    url = os.environ.get("LAMINA_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    _redis_or_skip(RateLimiter(ServerSettings(redis_url=url)), url)
    env = {
        "LAMINA_TENANT_ID": f"t-{uuid.uuid4().hex}",  # keys of its own in the shared Redis
        "LAMINA_SERVER__REDIS_URL": url,
        "LAMINA_SERVER__TIERS": json.dumps(
            {"default": {"requests_per_minute": 100, "skills": {"memory": 3}}}
        ),
    }
    with (
        serve_process("--data-dir", str(tmp_path / "a"), env=env) as one,
        serve_process("--data-dir", str(tmp_path / "b"), env=env) as two,
        httpx.Client(timeout=30) as client,
    ):
        codes = []
        for i in range(6):
            response = client.post(
                (one if i % 2 else two) + "/",
                headers=HEADERS,
                json={
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "SendMessage",
                    "params": {"message": tool_message("memory_list", {"user_id": "u"})},
                },
            )
            codes.append(response.status_code)
        # Three memory calls between the two processes, then both refuse.
        assert codes == [200, 200, 200, 429, 429, 429], codes
        other = client.post(
            one + "/",
            headers=HEADERS,
            json={
                "jsonrpc": "2.0",
                "id": "k",
                "method": "SendMessage",
                "params": {"message": tool_message("knowledge_list", {})},
            },
        )
        assert other.status_code == 200  # another skill of the same tenant is not limited


def test_no_keys_means_loopback_only(tmp_path: Path) -> None:
    check_bind("127.0.0.1", KeyRing([]))
    check_bind("::1", KeyRing([]))
    with pytest.raises(LaminaError) as caught:
        check_bind("0.0.0.0", KeyRing([]))
    assert caught.value.code is ErrorCode.CONFIGURATION_ERROR
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "lamina",
            "--data-dir",
            str(tmp_path / "d"),
            "serve",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert out.returncode == 1
    assert "refusing to listen on 0.0.0.0 without API keys" in out.stderr


def _legacy(client: httpx.Client, headers: dict[str, str], task_id: str, data: Any) -> Any:
    message = {"role": "user", "parts": [{"type": "data", "data": data}]}
    return client.post("/tasks/send", json={"id": task_id, "message": message}, headers=headers)


def test_a_legacy_task_id_never_reaches_another_tenants_task(client: httpx.Client) -> None:
    """A 0.1 client chooses its task ids: another tenant's id (live, waiting for input) names a
    new task of the caller's own, never the other tenant's task or its contextId."""
    shared = f"shared-{uuid.uuid4().hex[:8]}"
    waiting = _legacy(client, A, shared, {"tool": "memory_add", "arguments": {"user_id": "u"}})
    assert waiting.status_code == 200, waiting.text
    a_task = waiting.json()
    assert a_task["status"]["state"] == "input-required", a_task
    a_context = a_task["sessionId"]

    other = _legacy(client, B, shared, {"tool": "memory_list", "arguments": {"user_id": "u"}})
    assert other.status_code == 200, other.text
    assert a_context not in other.text
    b_task = other.json()
    assert b_task["id"] == shared and b_task["status"]["state"] == "completed", b_task
    # Resending with the other tenant's contextId is not a way in either.
    again = client.post(
        "/tasks/send",
        json={
            "id": shared,
            "sessionId": a_context,
            "message": {"parts": [{"type": "data", "data": {"content": "x", "layer": "user"}}]},
        },
        headers=B,
    )
    assert again.status_code in (200, 400), again.text
    assert "input-required" not in again.text or again.json()["sessionId"] != a_context
    # A's task is untouched: still waiting, with only A's own message in its history.
    polled = client.get(f"/tasks/{shared}/get", headers=A).json()
    assert polled["status"]["state"] == "input-required"
    assert polled["sessionId"] == a_context
    assert [m["role"] for m in polled["history"]].count("user") == 1
    # And each tenant reads its own task under the same id.
    assert client.get(f"/tasks/{shared}/get", headers=B).json()["sessionId"] != a_context
    # A can still answer its own task.
    done = _legacy(client, A, shared, {"content": "Ana likes tea", "layer": "user"})
    assert done.json()["status"]["state"] == "completed", done.text


def test_public_health_says_up_or_down_and_only_an_admin_sees_what_is_behind_it(
    client: httpx.Client, live: Running
) -> None:
    data_dir = str(live.server.ms.settings.data_dir)
    for headers in ({}, A, {"Authorization": "Bearer nope"}):
        response = client.get("/health", headers=headers)
        assert response.status_code == 200
        report = response.json()
        assert report["status"] == "up"
        assert data_dir not in response.text
        for check in report["checks"].values():
            assert set(check) == {"status", "latency_ms"}, check
    admin = client.get("/health", headers={"X-API-Key": KEY_ADMIN}).json()
    assert admin["checks"]["database"]["path"].startswith(data_dir)
    assert "active" in admin["checks"]["threads"]


def test_in_process_windows_count_only_what_they_let_through_and_forget_idle_keys() -> None:
    windows = LocalWindows()
    key = ("acme", "t", "*")
    assert [windows.hit(key, 2, 0.5) for _ in range(2)] == [None, None]
    refused = [windows.hit(key, 2, 0.5) for _ in range(3)]
    assert all(r is not None and 0 < r <= 0.5 for r in refused)
    time.sleep(0.55)  # the two counted left the window; the refused ones were never in it
    assert windows.hit(key, 2, 0.5) is None
    time.sleep(0.55)
    assert windows.hit(("other", "t", "*"), 2, 0.5) is None
    assert key not in windows._hits  # swept: no request in its window
