"""The context skill over a real server: sessions appended and read, observations and
reflections, the prompt for a query; every tenant sees only its own sessions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lamina.server.auth import hash_key, new_key
from tests.fakes.openai_server import FakeOpenAI
from tests.server.harness import (
    Running,
    result_of,
    rpc,
    running_server,
    send,
    server_settings,
    tool_message,
)

KEY_A, KEY_B = new_key(), new_key()
A = {"Authorization": f"Bearer {KEY_A}"}
B = {"Authorization": f"Bearer {KEY_B}"}
S = "slack:T1:C7"


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        server.reply = lambda body: "The user reported replication lag on the staging cluster."
        yield server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, llm: FakeOpenAI) -> Iterator[Running]:
    settings = server_settings(
        tmp_path_factory.mktemp("context") / "data",
        api_keys=[
            {"key_hash": hash_key(KEY_A), "tenant_id": "acme", "tier": "default"},
            {"key_hash": hash_key(KEY_B), "tenant_id": "globex", "tier": "default"},
        ],
        tiers={"default": {"requests_per_minute": 10_000}},
        _settings={
            "llm": {"model": "fake", "base_url": llm.base_url, "max_retries": 0},
            "observational_memory": {"enabled": True, "message_token_threshold": 100_000},
        },
    )
    with running_server(settings) as running:
        yield running


def call(client: httpx.Client, headers: dict[str, str], tool: str, args: dict[str, Any]) -> Any:
    task = send(client, tool_message(tool, args), headers=headers)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return result_of(task)


def refused(client: httpx.Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    task = send(client, tool_message(tool, args), headers=A)
    assert task["status"]["state"] == "TASK_STATE_REJECTED", task
    error: dict[str, Any] = task["status"]["message"]["parts"][1]["data"]["error"]
    return error


def test_the_card_lists_the_context_skill_with_schemas(client: httpx.Client) -> None:
    card = client.get("/.well-known/agent-card.json").json()
    [skill] = [s for s in card["skills"] if s["id"] == "context"]
    for tool in ("session_append", "session_messages", "context_prompt"):
        assert tool in skill["tags"]
    [extension] = card["capabilities"]["extensions"]
    tools = {t["name"]: t for t in extension["params"]["tools"]}
    schema = tools["context_prompt"]["input_schema"]
    assert schema["required"] == ["query"] and "session_key" in schema["properties"]
    assert tools["session_observations"]["skill"] == "context"


def test_sessions_and_prompts_over_a2a_stay_in_their_tenant(
    client: httpx.Client, live: Running, llm: FakeOpenAI
) -> None:
    appended = call(
        client,
        A,
        "session_append",
        {
            "session_key": S,
            "messages": [
                {"role": "user", "content": "the staging cluster lags behind"},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "pg_stat", "input": {"db": "staging"}}],
                },
                {
                    "role": "tool",
                    "content": "30 s behind",
                    "tool_calls": [{"id": "c1", "name": "pg_stat"}],
                },
            ],
        },
    )["messages"]
    assert [m["index"] for m in appended] == [0, 1, 2]
    assert appended[1]["tool_calls"][0]["id"] == "c1"
    read = call(client, A, "session_messages", {"session_key": S})["messages"]
    assert [m["content"] for m in read] == ["the staging cluster lags behind", "", "30 s behind"]
    assert call(client, A, "session_messages", {"session_key": S, "recent": True})["messages"]

    # An observation and a reflection (the observer runs on the server's own model).
    ms = live.server.ms
    live.run(ms.sessions.observe(S, tenant_id="acme"))
    observations = call(client, A, "session_observations", {"session_key": S})["observations"]
    assert observations[0]["content"].startswith("The user reported replication lag")
    live.run(ms.sessions.reflect(S, tenant_id="acme"))
    reflections = call(client, A, "session_reflections", {"session_key": S})["reflections"]
    assert reflections[0]["generation"] == 1
    live.run(ms.context.knowledge.save("db", "Staging runs PostgreSQL 16", tenant_id="acme"))

    # A short follow-up: the session's memory is there whatever the query.
    built = call(
        client, A, "context_prompt", {"query": "why?", "base": "You are ops.", "session_key": S}
    )
    assert built["prompt"].startswith("You are ops.")
    assert "## Conversation Memory" in built["prompt"]
    assert "replication lag" in built["prompt"]
    built = call(client, A, "context_prompt", {"query": "which PostgreSQL version on staging?"})
    assert "Staging runs PostgreSQL 16" in built["prompt"] and built["messages"] == []

    # Tenant B: the same session key is another (empty) session; A's knowledge is not there.
    assert call(client, B, "session_messages", {"session_key": S})["messages"] == []
    assert call(client, B, "session_observations", {"session_key": S})["observations"] == []
    assert call(client, B, "session_reflections", {"session_key": S})["reflections"] == []
    other = call(
        client,
        B,
        "context_prompt",
        {"query": "which PostgreSQL version on staging? why?", "base": "B.", "session_key": S},
    )
    assert other["prompt"] == "B." and other["messages"] == []
    call(
        client,
        B,
        "session_append",
        {"session_key": S, "messages": [{"role": "user", "content": "hi"}]},
    )
    assert len(call(client, A, "session_messages", {"session_key": S})["messages"]) == 3


def test_bad_input_is_refused_and_stores_nothing(client: httpx.Client) -> None:
    key = "bad:input"
    cases: list[tuple[str, dict[str, Any]]] = [
        ("session_append", {"session_key": key, "messages": []}),
        ("session_append", {"session_key": key, "messages": [{"role": "robot", "content": "x"}]}),
        ("session_append", {"session_key": key, "messages": [{"role": "user", "content": "  "}]}),
        ("session_append", {"session_key": "", "messages": [{"role": "user", "content": "x"}]}),
        (
            "session_append",
            {"session_key": "k" * 300, "messages": [{"role": "user", "content": "x"}]},
        ),
        (
            "session_append",
            {
                "session_key": key,
                "messages": [
                    {"role": "user", "content": "fine"},
                    {"role": "user", "content": "x", "tool_calls": [{"name": ""}]},
                ],
            },
        ),
        ("session_messages", {"session_key": key, "start": -1}),
        ("session_observations", {"session_key": key, "limit": 0}),
        ("context_prompt", {"query": "x", "layers": ["no_such_layer"]}),
        ("context_prompt", {"query": "x", "unknown": 1}),
    ]
    for tool, args in cases:
        error = refused(client, tool, args)
        assert error["code"] in ("INVALID_ARGUMENT", "INVALID_LAYER"), (tool, args, error)
    assert call(client, A, "session_messages", {"session_key": key})["messages"] == []
    missing = send(client, tool_message("session_append", {"session_key": key}), headers=A)
    assert missing["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", missing
    body = rpc(client, "GetTask", {"id": missing["id"]}, headers=A)
    assert "error" not in body
