"""One-shot tool calls on JSON-RPC take the direct path (lamina.server.a2a.direct); the same
message over REST takes the SDK's. Both must give the same Task — in the answer, in GetTask and
in ListTasks — but for the fresh ids and timestamps; a follow-up through the SDK continues a
task the direct path left waiting."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from lamina.server.a2a.direct import NotWire, one_shot, wire
from tests.server.harness import (
    HEADERS,
    Running,
    rpc,
    running_server,
    send,
    server_settings,
    tool_message,
)

KEY = "AKIAIOSFODNN7EXAMPLE"
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = server_settings(tmp_path_factory.mktemp("direct") / "data")
    with running_server(settings) as running:
        yield running


def _fresh(value: Any, path: str = "") -> Any:
    """``value`` with what each request makes anew (ids, timestamps, memory ids and dates in
    results) replaced by placeholders."""
    if isinstance(value, dict):
        return {k: _fresh(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v, path) for v in value]
    if isinstance(value, str) and (_UUID.match(value) or _STAMP.match(value)):
        return "<fresh>"
    if isinstance(value, str) and path.endswith(".at"):
        return "<fresh>"
    return value


def _both(
    client: httpx.Client, message: Callable[[], dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Task of a ``message`` over JSON-RPC (direct path) and over REST (the SDK)."""
    direct = send(client, {**message(), "messageId": str(uuid.uuid4())})
    response = client.post(
        "/message:send",
        json={"message": {**message(), "messageId": str(uuid.uuid4())}},
        headers=HEADERS,
    )
    assert response.status_code == 200, response.text
    sdk: dict[str, Any] = response.json()["task"]
    return direct, sdk


def _same(direct: dict[str, Any], sdk: dict[str, Any]) -> None:
    assert _fresh(direct) == _fresh(sdk)
    assert direct["id"] != sdk["id"] and direct["contextId"] != sdk["contextId"]


def _get(client: httpx.Client, task_id: str) -> dict[str, Any]:
    body = rpc(client, "GetTask", {"id": task_id})
    assert "error" not in body, body
    task: dict[str, Any] = body["result"]
    return task


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    # The content is a fresh id: the two paths' adds are not duplicates of each other.
    "completed": lambda: tool_message(
        "memory_add",
        {"content": str(uuid.uuid4()), "layer": "user", "metadata": {"n": 3, "big": 2**60}},
        metadata={"user_id": "ada", "priority": 2, "ratio": 0.5},
    ),
    "search": lambda: tool_message("memory_search", {"query": "tea", "user_id": "ada", "limit": 3}),
    "rejected for a secret": lambda: tool_message(
        "memory_add", {"content": f"deploy key {KEY}", "layer": "project", "project_id": "p"}
    ),
    "unknown tool": lambda: tool_message("no_such_tool", {"x": 1}),
    "input required": lambda: tool_message("memory_add", {"layer": "user", "user_id": "ada"}),
    "session context": lambda: tool_message(
        "memory_list", {"limit": 1}, metadata={"user_id": "ada", "session_context": True}
    ),
    "two tools": lambda: {
        "role": "ROLE_USER",
        "parts": [
            {"data": {"tool": "memory_list", "arguments": {}}},
            {"data": {"tool": "memory_get", "arguments": {}}, "mediaType": "application/json"},
        ],
    },
    "identifiers in a data part and text": lambda: {
        "role": "ROLE_USER",
        "parts": [
            {"text": "list them"},
            {"data": {"user_id": "ada"}, "metadata": {"k": [1, 2.5, None, True]}},
            {"data": {"tool": "memory_list", "arguments": {"limit": 2}}},
        ],
    },
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_direct_path_answers_as_the_sdk_does(client: httpx.Client, case: str) -> None:
    direct, sdk = _both(client, CASES[case])
    _same(direct, sdk)
    # Stored once, and read back the same through the SDK's GetTask and ListTasks.
    _same(_get(client, direct["id"]), _get(client, sdk["id"]))
    assert _fresh(_get(client, direct["id"])) == _fresh(direct)
    listed = rpc(client, "ListTasks", {"contextId": direct["contextId"]})["result"]
    assert [t["id"] for t in listed["tasks"]] == [direct["id"]]


def test_the_cases_cover_every_final_state(client: httpx.Client) -> None:
    states = {
        send(client, {**message(), "messageId": str(uuid.uuid4())})["status"]["state"]
        for message in CASES.values()
    }
    assert states == {
        "TASK_STATE_COMPLETED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_INPUT_REQUIRED",
    }


def test_a_secret_never_reaches_the_store_or_the_answer(client: httpx.Client) -> None:
    task = send(client, CASES["rejected for a secret"]())
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    for seen in (task, _get(client, task["id"])):
        assert KEY not in str(seen) and "[REDACTED]" in str(seen["history"])


def test_a_reply_through_the_sdk_completes_a_waiting_direct_task(client: httpx.Client) -> None:
    waiting = send(client, CASES["input required"]())
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    reply = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "taskId": waiting["id"],
        "parts": [{"data": {"content": "Ada drinks green tea"}}],
    }
    done = send(client, reply)
    assert done["id"] == waiting["id"] and done["contextId"] == waiting["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _get(client, waiting["id"])["status"]["state"] == "TASK_STATE_COMPLETED"


def _sdk_rpc(client: httpx.Client, message: dict[str, Any]) -> dict[str, Any]:
    """SendMessage over JSON-RPC by the SDK's path: an (empty) configuration takes it there."""
    return rpc(client, "SendMessage", {"message": message, "configuration": {}})


def test_calls_in_a_named_thread_answer_as_the_sdk_does(client: httpx.Client) -> None:
    first = send(
        client,
        tool_message("memory_add", {"content": "x y", "layer": "user"}, metadata={"user_id": "bo"}),
    )
    assert first["status"]["state"] == "TASK_STATE_COMPLETED"
    later = tool_message("memory_list", {}, contextId=first["contextId"])
    direct = send(client, later)
    sdk = _sdk_rpc(client, {**later, "messageId": str(uuid.uuid4())})["result"]["task"]
    # The thread's identifiers (user_id) reach the later call on both paths.
    assert "'content': 'x y'" in str(direct["artifacts"][0]["parts"][0]["data"])
    assert direct["contextId"] == sdk["contextId"] == first["contextId"]
    assert _fresh(direct) == _fresh(sdk)


def test_a_new_thread_is_written_once_with_what_the_sdk_path_writes(
    live: Running, client: httpx.Client
) -> None:
    """The direct path writes a new thread once, with its task, at the end of the call: the
    thread holds what the SDK's open-then-update leaves (identifiers, turns, pending), and
    later calls in it find them."""

    def thread(context_id: str) -> Any:
        found = live.run(live.server.threads.get("default", context_id))
        assert found is not None
        return found

    for case in ("completed", "input required"):
        direct, sdk = _both(client, CASES[case])
        mine, theirs = thread(direct["contextId"]), thread(sdk["contextId"])
        assert mine.conversation_context.keys() == theirs.conversation_context.keys()

        def turns(t: Any) -> list[tuple[str, str]]:
            return [(x["tool"], x["result"][-12:]) for x in t.conversation_context.get("turns", [])]

        assert turns(mine) == turns(theirs)
        assert mine.identifiers == theirs.identifiers and mine.version == theirs.version == 1
        pending = mine.conversation_context["pending"]
        assert list(pending) == ([direct["id"]] if case == "input required" else [])
        assert mine.created_at == mine.updated_at


def test_a_thread_no_store_can_name_is_refused_as_the_sdk_does(client: httpx.Client) -> None:
    message = tool_message("memory_list", {}, contextId="bad\u0000id")
    direct = rpc(client, "SendMessage", {"message": message})
    sdk = _sdk_rpc(client, message)
    assert direct["error"]["code"] == -32602, direct
    assert "contextId" in direct["error"]["message"]
    assert direct == {**sdk, "id": direct["id"]}


def test_requests_the_direct_path_leaves_to_the_sdk() -> None:
    base = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
    message = tool_message("memory_list", {})
    headers = {"a2a-version": "1.0"}
    assert one_shot({**base, "params": {"message": message}}, headers) is not None
    named = {**message, "contextId": "c"}
    assert one_shot({**base, "params": {"message": named}}, headers) is not None
    declined = [
        ({**base, "params": {"message": message}}, {}),  # no version: 0.3
        ({**base, "params": {"message": message}}, {**headers, "a2a-extensions": "x"}),
        ({**base, "params": {"message": message, "configuration": {}}}, headers),
        ({**base, "id": True, "params": {"message": message}}, headers),
        ({**base, "params": {"message": {**message, "contextId": ""}}}, headers),
        ({**base, "params": {"message": {**message, "contextId": 5}}}, headers),
        ({**base, "params": {"message": {**message, "taskId": "t"}}}, headers),
        ({**base, "params": {"message": {**message, "role": "ROLE_AGENT"}}}, headers),
        ({**base, "params": {"message": {**message, "parts": [{"text": "hi"}]}}}, headers),
        ({**base, "params": {"message": {**message, "parts": [{"raw": "aGk="}]}}}, headers),
        ({**base, "params": {"message": {**message, "metadata": [1]}}}, headers),
        ({**base, "method": "SendStreamingMessage", "params": {"message": message}}, headers),
    ]
    deep: Any = {"tool": "memory_list"}
    for _ in range(30):
        deep = {"a": deep}
    declined.append(
        ({**base, "params": {"message": {**message, "parts": [{"data": deep}]}}}, headers)
    )
    for body, given in declined:
        assert one_shot(body, given) is None, body


def test_wire_numbers_are_those_protobuf_gives_back() -> None:
    assert wire({"a": 3, "b": 3.0, "c": 0.25, "d": [True, None, "s"]}) == {
        "a": 3,
        "b": 3,
        "c": 0.25,
        "d": [True, None, "s"],
    }
    assert wire(2**60) == float(2**60) and isinstance(wire(2**60), float)
    assert wire(2**53) == 2**53 and isinstance(wire(2**53), int)
    for bad in (float("nan"), float("inf"), 10**400, {1: "x"}, object()):
        with pytest.raises(NotWire):
            wire(bad)
