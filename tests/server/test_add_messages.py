"""The memory_add_messages tool: its schema, its checks, tenants, default identifiers (the
MCP server's), and a conversation over the real A2A HTTP server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.server.defaults import IdentifierDefaults
from lamina.server.tools import ServerTool, build_tools
from tests.server.harness import result_of, running_server, send, server_settings, tool_message

TURNS = [
    {"role": "user", "name": "Caroline", "content": "I adopted a puppy named Oscar 🐶"},
    {"role": "assistant", "content": "  Congratulations!  ", "timestamp": "2023-05-08T13:56Z"},
]


@pytest.fixture
def tool(ms: Lamina) -> ServerTool:
    return next(t for t in build_tools(ms.aio) if t.name == "memory_add_messages")


def call(ms: Lamina, tool: ServerTool, args: Any, tenant: str = "a") -> Any:
    return ms._run(tool.run(args, tenant))


def test_schema(tool: ServerTool) -> None:
    schema = tool.input_schema
    assert schema["required"] == ["messages"] and schema["additionalProperties"] is False
    assert not tool.read_only and tool.skill == "memory"
    message = schema["$defs"]["ChatMessage"]
    assert message["properties"]["role"]["enum"] == ["user", "assistant", "system", "tool"]
    assert set(message["required"]) == {"role", "content"}


def test_stores_in_the_callers_tenant(ms: Lamina, tool: ServerTool) -> None:
    added = call(ms, tool, {"messages": TURNS, "user_id": "u", "conversation_id": "c"})
    assert added["conversation_id"] == "c" and added["layer"] == "user"
    assert [m["content"] for m in added["memories"]] == [t["content"] for t in TURNS]
    assert {m["tenant_id"] for m in added["memories"]} == {"a"}
    conv = added["memories"][1]["metadata"]["conversation"]
    assert conv["position"] == 1 and conv["timestamp"] == "2023-05-08T13:56:00+00:00"
    assert ms.memory.list(user_id="u", tenant_id="b").total_count == 0
    assert ms.memory.list(user_id="u", tenant_id="a").total_count == 2


@pytest.mark.parametrize(
    ("args", "code", "field"),
    [
        ({"messages": [], "user_id": "u"}, ErrorCode.INVALID_ARGUMENT, "messages"),
        ({"messages": ["hi"], "user_id": "u"}, ErrorCode.INVALID_ARGUMENT, "messages.0"),
        (
            {"messages": [TURNS[0], {"role": "robot", "content": "x"}], "user_id": "u"},
            ErrorCode.INVALID_ARGUMENT,
            "messages.1.role",
        ),
        (
            {"messages": [TURNS[0], {"role": "user", "content": " "}], "user_id": "u"},
            ErrorCode.INVALID_ARGUMENT,
            "messages[1].content",
        ),
        (
            {"messages": [{"role": "user", "content": "x", "timestamp": "later"}], "user_id": "u"},
            ErrorCode.INVALID_ARGUMENT,
            "messages[0].timestamp",
        ),
        (
            {"messages": [{"role": "user", "content": "x", "who": 1}], "user_id": "u"},
            ErrorCode.INVALID_ARGUMENT,
            "messages.0.who",
        ),
        (
            {"messages": [{"role": "user", "content": "x" * 70_000}], "user_id": "u"},
            ErrorCode.CONTENT_TOO_LONG,
            "messages[0].content",
        ),
        # No chat model configured: infer=True is refused before anything is stored.
        ({"messages": TURNS, "user_id": "u", "infer": True}, ErrorCode.CONFIGURATION_ERROR, None),
        ({"messages": TURNS, "user_id": "u", "ttl": -1}, ErrorCode.INVALID_ARGUMENT, "ttl"),
        (
            {"messages": TURNS, "user_id": "u", "metadata": {"conversation": {}}},
            ErrorCode.INVALID_ARGUMENT,
            "metadata.conversation",
        ),
        ({"messages": TURNS}, ErrorCode.MISSING_IDENTIFIER, None),
    ],
)
def test_bad_arguments_store_nothing(
    ms: Lamina, tool: ServerTool, args: dict[str, Any], code: ErrorCode, field: str | None
) -> None:
    with pytest.raises(LaminaError) as err:
        call(ms, tool, args)
    assert err.value.code is code
    if field is not None:
        assert err.value.details["field"] == field
    assert ms.memory.list(user_id="u", tenant_id="a").total_count == 0


def test_default_identifiers_apply(ms: Lamina, tool: ServerTool) -> None:
    defaults = IdentifierDefaults({"user_id": "alice"})
    assert defaults.applies_to(tool) == ["user_id"]
    assert defaults.schema(tool)["properties"]["user_id"]["default"] == "alice"
    added = call(ms, tool, defaults.fill(tool, {"messages": TURNS}))
    assert added["memories"][0]["identifiers"] == {"user_id": "alice"}
    mine = call(ms, tool, defaults.fill(tool, {"messages": TURNS, "user_id": "bob"}))
    assert mine["memories"][0]["identifiers"] == {"user_id": "bob"}


@pytest.fixture(scope="module")
def live_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = server_settings(tmp_path_factory.mktemp("msgs") / "data")
    with running_server(settings) as running:
        yield running.url


def test_over_the_a2a_http_server(live_url: str) -> None:
    with httpx.Client(base_url=live_url, timeout=60) as client:
        args = {"messages": TURNS, "user_id": "h", "conversation_id": "conv-1"}
        task = send(client, tool_message("memory_add_messages", args))
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        added = result_of(task)
        assert [m["content"] for m in added["memories"]] == [t["content"] for t in TURNS]
        again = result_of(send(client, tool_message("memory_add_messages", args)))
        assert again["memories"][0]["metadata"]["conversation"]["position"] == 2
        bad = {"messages": [TURNS[0], {"role": "user", "content": ""}], "user_id": "h"}
        rejected = send(client, tool_message("memory_add_messages", bad))
        assert rejected["status"]["state"] == "TASK_STATE_REJECTED"
        error = rejected["status"]["message"]["parts"][1]["data"]["error"]
        assert error["code"] == "INVALID_ARGUMENT"
        assert error["details"]["field"] == "messages[1].content"
        found = result_of(
            send(client, tool_message("memory_search", {"query": "puppy Oscar", "user_id": "h"}))
        )
        assert found["results"][0]["memory"]["content"] == TURNS[0]["content"]
        listed = result_of(send(client, tool_message("memory_list", {"user_id": "h"})))
        assert listed["total_count"] == 4
