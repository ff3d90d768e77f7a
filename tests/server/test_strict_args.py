"""Tool arguments are strict JSON at every A2A route (JSON-RPC 1.0, HTTP+JSON, JSON-RPC 0.3,
the legacy /tasks/send): a value of the wrong JSON type (``"yes"`` for a boolean, ``"5"`` or
2.5 for an integer, 5 for a string) is INVALID_ARGUMENT naming the field, never a guess, and
stores, changes and deletes nothing; on SQLite and PostgreSQL. A number field still takes an
integer. (`lamina mcp`: test_mcp_strict_args.py.)"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from lamina.config import Settings
from tests.server.args_support import (
    USER,
    assert_unchanged,
    bad_argument,
    cases,
    seed,
    snapshot,
    store_overrides,
)
from tests.server.harness import (
    HEADERS,
    Running,
    result_of,
    running_server,
    send,
    server_settings,
    tool_message,
)

LIMITS = {"default": {"requests_per_minute": 10_000}}


@dataclass
class Backend:
    running: Running
    settings: Settings
    ids: dict[str, str]
    client: httpx.Client


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def backend(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Backend]:
    data = Path(tmp_path_factory.mktemp(f"strict-{request.param}")) / "data"
    settings = server_settings(data, tiers=LIMITS, _settings=store_overrides(request.param))
    ids = seed(settings)
    with (
        running_server(settings) as running,
        httpx.Client(base_url=running.url, timeout=60) as client,
    ):
        yield Backend(running, settings, ids, client)


def rejected_error(task: dict[str, Any], state: str = "TASK_STATE_REJECTED") -> dict[str, Any]:
    assert task["status"]["state"] == state, task["status"]
    error: dict[str, Any] = task["status"]["message"]["parts"][1]["data"]["error"]
    return error


def test_the_table_covers_every_tool(backend: Backend) -> None:
    names = {t.name for t in backend.running.server.registry.all()}
    assert {tool for tool, _, _ in cases(backend.ids)} == names


def test_wrong_types_over_json_rpc_are_refused_and_change_nothing(backend: Backend) -> None:
    before = snapshot(backend.settings)
    for tool, arguments, field in cases(backend.ids):
        task = send(backend.client, tool_message(tool, arguments))
        bad_argument(rejected_error(task), tool, field, arguments)
    assert_unchanged(before, snapshot(backend.settings))


#: Through the other routes, a few that would delete, write or read with a guess.
ROUTED = (
    ("memory_delete_all", {"include_sessions": "yes", **USER}, "include_sessions"),
    ("memory_search", {"query": "seats", "limit": "5", **USER}, "limit"),
    ("session_messages", {"session_key": "chat-1", "recent": 1}, "recent"),
    ("memory_add", {"content": 5, "layer": "user", **USER}, "content"),
)


def test_wrong_types_over_rest_and_v03_and_legacy_are_refused(backend: Backend) -> None:
    client = backend.client
    before = snapshot(backend.settings)
    for tool, arguments, field in ROUTED:
        response = client.post(
            "/message:send", json={"message": tool_message(tool, arguments)}, headers=HEADERS
        )
        assert response.status_code == 200, response.text
        bad_argument(rejected_error(response.json()["task"]), tool, field, arguments)
        part = {"kind": "data", "data": {"tool": tool, "arguments": arguments}}
        old = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user", "parts": [part]}
        body = client.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": old}},
        ).json()
        bad_argument(rejected_error(body["result"], "rejected"), tool, field, arguments)
        legacy = {"type": "data", "data": {"tool": tool, "arguments": arguments}}
        task = client.post(
            "/tasks/send",
            json={"id": f"legacy-{uuid.uuid4()}", "message": {"role": "user", "parts": [legacy]}},
        ).json()
        bad_argument(rejected_error(task, "rejected"), tool, field, arguments)
    assert_unchanged(before, snapshot(backend.settings))


def test_a_number_field_takes_an_integer(backend: Backend) -> None:
    client = backend.client
    search = {"query": "aisle seats", "user_id": "alice", "mode": "keyword"}
    for threshold in (0, 1):
        task = send(client, tool_message("memory_search", {**search, "threshold": threshold}))
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
    found = result_of(send(client, tool_message("memory_search", {**search, "threshold": 0})))
    assert [h["memory"]["id"] for h in found["results"]] == [backend.ids["memory"]]
    added = {"content": "Bob likes window seats", "layer": "user", "user_id": "bob", "ttl": 60}
    kept = result_of(send(client, tool_message("memory_add", added)))
    assert kept["content"] == "Bob likes window seats" and kept["expires_at"]
    gone = result_of(send(client, tool_message("memory_delete", {"memory_id": kept["id"]})))
    assert gone["success"] is True and gone["existed"] is True
