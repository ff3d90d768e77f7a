"""A2A 1.0 compliance, written from the specification: the Agent Card, every JSON-RPC
method, the HTTP+JSON binding, the error codes, SSE event order and the version header."""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.harness import (
    HEADERS,
    Running,
    result_of,
    rpc,
    running_server,
    send,
    server_settings,
    sse_events,
    text_message,
    tool_message,
)

TOOLS = {
    "memory": [
        "memory_add",
        "memory_add_messages",
        "memory_search",
        "memory_get",
        "memory_update",
        "memory_delete",
        "memory_list",
        "memory_history",
        "memory_delete_all",
        "hierarchy_register",
        "hierarchy_defaults",
        "hierarchy_resolve",
    ],
    "knowledge": [
        "knowledge_query",
        "knowledge_get",
        "knowledge_create",
        "knowledge_update",
        "knowledge_status",
        "knowledge_history",
    ],
    "governance": ["governance_validate", "governance_drift", "governance_policies"],
    "context": [
        "session_append",
        "session_messages",
        "session_observations",
        "session_reflections",
        "context_prompt",
    ],
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_server(server_settings(tmp_path_factory.mktemp("a2a") / "data")) as running:
        yield running


def _add(client: httpx.Client, content: str, user: str = "alice", **extra: Any) -> dict[str, Any]:
    return send(
        client,
        tool_message("memory_add", {"content": content, "layer": "user", "user_id": user}),
        **extra,
    )


# -- Agent Card --------------------------------------------------------------------------


def test_card_has_the_required_fields_and_every_tool(client: httpx.Client) -> None:
    card = client.get("/.well-known/agent-card.json").json()
    for field in (
        "name",
        "description",
        "supportedInterfaces",
        "version",
        "capabilities",
        "defaultInputModes",
        "defaultOutputModes",
        "skills",
    ):
        assert card[field], field
    bindings = {i["protocolBinding"] for i in card["supportedInterfaces"]}
    assert bindings == {"JSONRPC", "HTTP+JSON"}
    assert all(
        i["protocolVersion"] == "1.0" and i["url"].startswith("http://127.0.0.1:")
        for i in card["supportedInterfaces"]
    )
    # Clients append "/message:send": the URL must not end in "/" (no "//message:send").
    rest = next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] != "JSONRPC")
    assert not rest.endswith("/")
    sent = client.post(
        f"{rest}/message:send",
        json={"message": {"messageId": "m-card", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
        headers={"A2A-Version": "1.0"},
    )
    assert sent.status_code == 200, sent.text
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"].get("pushNotifications", False) is False
    skills = {s["id"]: s for s in card["skills"]}
    assert set(skills) == set(TOOLS)
    for skill in skills.values():
        assert skill["name"] and skill["description"] and skill["tags"]
    [ext] = card["capabilities"]["extensions"]
    params = ext["params"]
    assert params["a2a_spec_version"] == "1.0"
    assert params["state_transition_history"] is True
    tools = {t["name"]: t for t in params["tools"]}
    for skill, names in TOOLS.items():
        for name in names:
            assert tools[name]["skill"] == skill
            assert tools[name]["description"]
            schema = tools[name]["input_schema"]
            assert schema["type"] == "object" and "properties" in schema
    assert "content" in tools["memory_add"]["input_schema"]["required"]


# -- SendMessage, GetTask, ListTasks -----------------------------------------------------


def test_send_message_runs_the_tool_without_an_llm(client: httpx.Client) -> None:
    task = _add(client, "Alice prefers dark mode")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    stored = result_of(task)
    assert stored["content"] == "Alice prefers dark mode"
    assert task["artifacts"][0]["name"] == "memory_add"
    got = rpc(client, "GetTask", {"id": task["id"]})["result"]
    assert got["id"] == task["id"] and got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result_of(got)["id"] == stored["id"]


def test_list_tasks_filters_by_context_and_pages(client: httpx.Client) -> None:
    first = _add(client, "list one")
    ctx = first["contextId"]
    for i in range(4):
        _add(client, f"list {i}", message_extra=None) if False else send(
            client,
            tool_message("memory_list", {"user_id": "alice"}, contextId=ctx),
        )
    page = rpc(client, "ListTasks", {"contextId": ctx, "pageSize": 2})["result"]
    assert page["totalSize"] == 5 and len(page["tasks"]) == 2 and page["nextPageToken"]
    seen = [t["id"] for t in page["tasks"]]
    while page.get("nextPageToken"):
        page = rpc(
            client,
            "ListTasks",
            {"contextId": ctx, "pageSize": 2, "pageToken": page["nextPageToken"]},
        )["result"]
        seen += [t["id"] for t in page["tasks"]]
    assert len(seen) == len(set(seen)) == 5 and first["id"] in seen
    done = rpc(client, "ListTasks", {"contextId": ctx, "status": "TASK_STATE_COMPLETED"})
    assert done["result"]["totalSize"] == 5


# -- input-required, CancelTask, SubscribeToTask ---------------------------------------


def test_missing_argument_asks_for_input_and_the_reply_completes_it(client: httpx.Client) -> None:
    task = send(client, tool_message("memory_add", {"layer": "user", "user_id": "alice"}))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    parts = task["status"]["message"]["parts"]
    assert "content" in parts[0]["text"]
    assert parts[1]["data"]["error"]["details"]["missing"] == ["content"]
    reply = {
        "messageId": "r-" + task["id"],
        "role": "ROLE_USER",
        "taskId": task["id"],
        "contextId": task["contextId"],
        "parts": [{"data": {"content": "late content"}}],
    }
    done = send(client, reply)
    assert done["id"] == task["id"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result_of(done)["content"] == "late content"


def test_the_card_is_cacheable_and_revalidated(client: httpx.Client) -> None:
    first = client.get("/.well-known/agent-card.json")
    assert first.status_code == 200
    assert "max-age=300" in first.headers["cache-control"]
    etag, modified = first.headers["etag"], first.headers["last-modified"]
    assert etag.startswith('"') and modified.endswith("GMT")
    again = client.get("/.well-known/agent-card.json", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    other = client.get("/.well-known/agent-card.json", headers={"If-None-Match": '"other"'})
    assert other.status_code == 200 and other.json() == first.json()


def test_getting_an_unknown_memory_answers_null(client: httpx.Client) -> None:
    done = send(client, tool_message("memory_get", {"memory_id": "no-such-memory"}))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert result_of(done) is None


def test_a_reply_to_an_input_required_task_needs_no_context_id(client: httpx.Client) -> None:
    task = send(client, tool_message("memory_add", {"layer": "user", "user_id": "alice"}))
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    reply = {
        "messageId": "r2-" + task["id"],
        "role": "ROLE_USER",
        "taskId": task["id"],  # the task names its context: the client need not repeat it
        "parts": [{"data": {"content": "reply without a context id"}}],
    }
    done = send(client, reply)
    assert done["id"] == task["id"] and done["contextId"] == task["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    assert result_of(done)["content"] == "reply without a context id"


def test_cancel_task(client: httpx.Client) -> None:
    waiting = send(client, tool_message("memory_get", {}))
    assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    cancelled = rpc(client, "CancelTask", {"id": waiting["id"]})["result"]
    assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
    done = _add(client, "cannot cancel me")
    error = rpc(client, "CancelTask", {"id": done["id"]})["error"]
    assert error["code"] == -32002  # TaskNotCancelableError


def test_a_message_to_a_finished_task_is_refused_and_starts_nothing(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """Completed, rejected or cancelled: every door answers UnsupportedOperation (-32004,
    400 on REST), the task stays as it was, no other task appears, and the server logs no
    traceback and leaves no asyncio task pending."""
    completed = send(client, tool_message("memory_get", {"memory_id": "nothing"}))
    rejected = send(client, tool_message("memory_get", {"no_such_argument": 1}))
    waiting = send(client, tool_message("memory_get", {}))
    cancelled = rpc(client, "CancelTask", {"id": waiting["id"]})["result"]
    finished = [completed, rejected, cancelled]
    assert [t["status"]["state"] for t in finished] == [
        "TASK_STATE_COMPLETED",
        "TASK_STATE_REJECTED",
        "TASK_STATE_CANCELED",
    ]
    before = rpc(client, "ListTasks", {"pageSize": 100})["result"]["totalSize"]
    with caplog.at_level(logging.WARNING):
        for task in finished:
            again = tool_message("memory_get", {"memory_id": "x"}, taskId=task["id"])
            error = rpc(client, "SendMessage", {"message": again})["error"]
            assert error["code"] == -32004, error
            assert error["data"][0]["reason"] == "UNSUPPORTED_OPERATION"
            assert "takes no more messages" in error["message"]
            stream = client.post(
                "/",
                json={
                    "jsonrpc": "2.0",
                    "id": "s",
                    "method": "SendStreamingMessage",
                    "params": {"message": again},
                },
                headers={**HEADERS, "Accept": "text/event-stream"},
            )
            assert '"code":-32004' in stream.text.replace(" ", ""), stream.text
            rest = client.post("/message:send", json={"message": again}, headers=HEADERS)
            assert rest.status_code == 400 and "takes no more messages" in rest.text
            old = client.post(
                "/",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "message/send",
                    "params": {
                        "message": {
                            "messageId": "m-" + task["id"],
                            "role": "user",
                            "taskId": task["id"],
                            "parts": [{"kind": "text", "text": "hello again"}],
                        }
                    },
                },
            )
            assert old.json()["error"]["code"] == -32004
            legacy = client.post(
                "/tasks/send",
                json={"id": task["id"], "message": {"parts": [{"type": "text", "text": "hi"}]}},
            )
            assert legacy.status_code == 400 and "takes no more messages" in legacy.text
            got = rpc(client, "GetTask", {"id": task["id"]})["result"]
            assert got["status"] == task["status"]
        gc.collect()  # an abandoned asyncio task is reported when it is collected
    after = rpc(client, "ListTasks", {"pageSize": 100})["result"]["totalSize"]
    assert after == before
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert logged == [], [r.getMessage() for r in logged]


def test_subscribe_to_a_waiting_task_then_answer_it(client: httpx.Client) -> None:
    waiting = send(client, tool_message("memory_add", {"layer": "user", "user_id": "alice"}))
    import threading

    events: list[dict[str, Any]] = []

    def listen() -> None:
        with httpx.Client(base_url=str(client.base_url), timeout=30) as other:
            events.extend(sse_events(other, "SubscribeToTask", {"id": waiting["id"]}))

    listener = threading.Thread(target=listen)
    listener.start()
    import time

    time.sleep(0.5)
    reply = {
        "messageId": "s-" + waiting["id"],
        "role": "ROLE_USER",
        "taskId": waiting["id"],
        "contextId": waiting["contextId"],
        "parts": [{"data": {"content": "via subscribe"}}],
    }
    send(client, reply)
    listener.join(30)
    states = [
        e["result"]["statusUpdate"]["status"]["state"]
        for e in events
        if "statusUpdate" in e.get("result", {})
    ]
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert any("artifactUpdate" in e["result"] for e in events)


# -- SSE -------------------------------------------------------------------------------


def test_streaming_events_come_in_order(client: httpx.Client) -> None:
    message = tool_message(
        "memory_add", {"content": "streamed", "layer": "user", "user_id": "alice"}
    )
    events = sse_events(client, "SendStreamingMessage", {"message": message})
    kinds = [next(iter(e["result"])) for e in events]
    assert kinds[0] == "task"
    assert events[0]["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    states = [
        e["result"]["statusUpdate"]["status"]["state"]
        for e in events
        if "statusUpdate" in e["result"]
    ]
    assert states == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    first_artifact = kinds.index("artifactUpdate")
    assert kinds.index("statusUpdate") < first_artifact < len(kinds) - 1
    assert kinds[-1] == "statusUpdate"
    artifact = events[first_artifact]["result"]["artifactUpdate"]["artifact"]
    assert artifact["parts"][0]["data"]["content"] == "streamed"


def test_rest_binding(client: httpx.Client) -> None:
    message = tool_message(
        "memory_add", {"content": "over rest", "layer": "user", "user_id": "alice"}
    )
    response = client.post("/message:send", json={"message": message}, headers=HEADERS)
    assert response.status_code == 200, response.text
    task = response.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    got = client.get(f"/tasks/{task['id']}", headers=HEADERS).json()
    assert got["id"] == task["id"]
    listed = client.get("/tasks", params={"contextId": task["contextId"]}, headers=HEADERS)
    assert [t["id"] for t in listed.json()["tasks"]] == [task["id"]]
    missing = client.get("/tasks/no-such-task", headers=HEADERS)
    assert missing.status_code == 404
    with client.stream(
        "POST",
        "/message:stream",
        json={"message": message},
        headers={**HEADERS, "Accept": "text/event-stream"},
    ) as stream:
        lines = [line for line in stream.iter_lines() if line.startswith("data:")]
    assert len(lines) >= 4


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {}}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod", "params": {}}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 5}}', -32602),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}', -32001),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig", '
            b'"params": {"taskId": "x", "url": "http://127.0.0.1:1/"}}',
            -32003,
        ),
    ],
)
def test_json_rpc_error_codes(client: httpx.Client, body: bytes, code: int) -> None:
    response = client.post(
        "/", content=body, headers={**HEADERS, "Content-Type": "application/json"}
    )
    assert response.json()["error"]["code"] == code, response.text


def test_a_newer_version_gets_the_spec_answer_and_a_warning(
    client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        body = rpc(client, "GetTask", {"id": "x"}, headers={"A2A-Version": "2.0"})
    assert body["error"]["code"] == -32009  # VersionNotSupportedError
    assert any("newer than the supported" in r.getMessage() for r in caplog.records)


def test_v03_compatibility_and_legacy_routes(client: httpx.Client) -> None:
    old = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "old-1",
                "role": "user",
                "parts": [
                    {
                        "kind": "data",
                        "data": {"tool": "memory_list", "arguments": {"user_id": "alice"}},
                    }
                ],
            }
        },
    }
    body = client.post("/", json=old).json()  # no A2A-Version header: 0.3
    assert body["result"]["status"]["state"] == "completed", body
    legacy = client.post(
        "/tasks/send",
        json={
            "id": "legacy-task-1",
            "sessionId": "legacy-s",
            "message": {
                "role": "user",
                "parts": [
                    {
                        "type": "data",
                        "data": {
                            "tool": "memory_add",
                            "arguments": {
                                "content": "from 0.1",
                                "layer": "user",
                                "user_id": "alice",
                            },
                        },
                    }
                ],
            },
        },
    ).json()
    assert legacy["id"] == "legacy-task-1" and legacy["sessionId"] == "legacy-s"
    assert legacy["status"]["state"] == "completed"
    assert legacy["artifacts"][0]["parts"][0]["data"]["content"] == "from 0.1"
    polled = client.get("/tasks/legacy-task-1/get").json()
    assert polled["status"]["state"] == "completed" and polled["artifacts"]
    assert client.get("/tasks/unknown/get").status_code == 404
    bad = client.post("/tasks/send", json={"id": "../x", "message": {"parts": []}})
    assert bad.status_code == 400


def test_free_text_without_a_router_is_a_read_only_search(client: httpx.Client) -> None:
    _add(client, "Alice's favourite editor is Helix")
    task = send(client, text_message("favourite editor", metadata={"user_id": "alice"}))
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    found = result_of(task)
    assert found["mode"] == "search" and "No LLM router" in found["note"]
    assert any("Helix" in m["content"] for m in found["memories"])
    assert "No LLM router" in task["status"]["message"]["parts"][0]["text"]


def test_whole_numbers_stay_whole_through_every_route(live: Running, client: httpx.Client) -> None:
    """Protobuf's Struct holds numbers as doubles: 3 must not come back, or be stored, as 3.0."""
    meta = {"priority": 3, "ratio": 0.5, "nested": {"n": [1, 2, -7]}, "huge": 2**60}
    added = result_of(
        send(
            client,
            tool_message(
                "memory_add",
                {"content": "whole numbers", "layer": "user", "user_id": "nums", "metadata": meta},
            ),
        )
    )
    expected = {**meta, "huge": float(2**60)}  # past 2**53 a double is all there is
    assert added["metadata"] == expected
    assert type(added["metadata"]["priority"]) is int
    assert type(added["metadata"]["nested"]["n"][0]) is int
    assert type(added["metadata"]["ratio"]) is float
    # Stored as sent: the library reads ints back.
    stored = live.run(live.server.ms.memory.get(added["id"]))
    assert stored is not None and type(stored.metadata["priority"]) is int
    listed = tool_message("memory_list", {"user_id": "nums", "limit": 5})
    page = result_of(send(client, listed))
    assert type(page["total_count"]) is int and page["total_count"] == 1
    # The same over REST, the legacy route and SSE.
    rest = client.post("/message:send", json={"message": listed}, headers=HEADERS)
    assert '"total_count":1' in rest.text.replace(" ", ""), rest.text
    assert "1.0" not in rest.text.split('"total_count"')[1][:8]
    legacy = client.post(
        "/tasks/send",
        json={
            "message": {
                "parts": [
                    {
                        "type": "data",
                        "data": {"tool": "memory_list", "arguments": {"user_id": "nums"}},
                    }
                ]
            }
        },
    ).json()
    assert type(legacy["artifacts"][0]["parts"][0]["data"]["total_count"]) is int
    events = sse_events(client, "SendStreamingMessage", {"message": listed})
    datas = [
        p["data"]
        for e in events
        for a in [e.get("result", {}).get("artifactUpdate", {}).get("artifact", {})]
        for p in a.get("parts", [])
        if "data" in p
    ]
    assert any(type(d.get("total_count")) is int for d in datas), events
