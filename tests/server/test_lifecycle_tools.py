"""memory_history, memory_delete_all and the hierarchy tools over the real servers: the A2A
server (JSON-RPC) with two API keys, and `lamina mcp --transport http` as a process; another
tenant sees and changes nothing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lamina.server.auth import hash_key, new_key
from tests.server.harness import (
    Running,
    mcp_http_process,
    result_of,
    running_server,
    send,
    server_settings,
    tool_message,
)

KEY_A, KEY_B = new_key(), new_key()
A, B = {"X-API-Key": KEY_A}, {"X-API-Key": KEY_B}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    settings = server_settings(
        tmp_path_factory.mktemp("lifecycle") / "data",
        api_keys=[
            {"key_hash": hash_key(KEY_A), "tenant_id": "acme", "tier": "default"},
            {"key_hash": hash_key(KEY_B), "tenant_id": "globex", "tier": "default"},
        ],
    )
    with running_server(settings) as running:
        yield running


@pytest.fixture
def client(live: Running) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live.url, timeout=30) as c:
        yield c


def call(client: httpx.Client, who: dict[str, str], tool: str, args: dict[str, Any]) -> Any:
    task = send(client, tool_message(tool, args), headers=who)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", (tool, task["status"])
    return result_of(task)


def refused(client: httpx.Client, who: dict[str, str], tool: str, args: dict[str, Any]) -> Any:
    task = send(client, tool_message(tool, args), headers=who)
    assert task["status"]["state"] == "TASK_STATE_REJECTED", (tool, task["status"])
    return task["status"]["message"]["parts"][1]["data"]["error"]


def add(client: httpx.Client, who: dict[str, str], content: str, **ids: str) -> str:
    layer = "agent" if "agent_id" in ids else "user"
    added = call(client, who, "memory_add", {"content": content, "layer": layer, **ids})
    return str(added["id"])


def test_history_and_delete_all_stay_in_their_tenant(client: httpx.Client) -> None:
    mine = add(client, A, "Acme's quixotrel launch date", user_id="u1")
    add(client, A, "Acme agent note", user_id="u1", agent_id="bot")
    kept = add(client, A, "Another user", user_id="u2")
    theirs = add(client, B, "Globex note", user_id="u1")
    call(client, A, "memory_update", {"memory_id": mine, "content": "Acme's launch moved"})
    history = call(client, A, "memory_history", {"memory_id": mine})["history"]
    assert [e["operation"] for e in history] == ["add", "update"]
    assert history[1]["old_content"] == "Acme's quixotrel launch date"
    # Tenant B: A's memory has no history for it, and delete_all deletes only B's own.
    assert refused(client, B, "memory_history", {"memory_id": mine})["code"] == "MEMORY_NOT_FOUND"
    assert call(client, B, "memory_delete_all", {"user_id": "u1"}) == {"deleted": 1}
    assert call(client, A, "memory_get", {"memory_id": mine})["content"] == "Acme's launch moved"
    assert call(client, B, "memory_get", {"memory_id": theirs}) is None
    # Refused: no identifier, a bad layer, an unknown argument; nothing is deleted.
    for args, code in [
        ({}, "MISSING_IDENTIFIER"),
        ({"layers": ["user"]}, "MISSING_IDENTIFIER"),
        ({"user_id": "u1", "layers": ["moon"]}, "INVALID_LAYER"),
        ({"user_id": "u1", "tenant_id": "globex"}, "INVALID_ARGUMENT"),
    ]:
        assert refused(client, A, "memory_delete_all", args)["code"] == code, args
    assert call(client, A, "memory_list", {"user_id": "u1"})["total_count"] == 1
    # A forgets u1: the user and agent memories, not u2's.
    assert call(client, A, "memory_delete_all", {"user_id": "u1", "layers": ["agent"]}) == {
        "deleted": 1
    }
    assert call(client, A, "memory_delete_all", {"user_id": "u1"}) == {"deleted": 1}
    history = call(client, A, "memory_history", {"memory_id": mine})["history"]
    assert [e["operation"] for e in history] == ["add", "update", "delete"]
    assert all(e["old_content"] is None and e["new_content"] is None for e in history)
    assert call(client, A, "memory_get", {"memory_id": kept})["content"] == "Another user"


def test_hierarchy_tools_stay_in_their_tenant(client: httpx.Client) -> None:
    links = call(
        client, A, "hierarchy_register", {"project_id": "atlas", "team_id": "core", "org_id": "rd"}
    )["links"]
    assert links == [
        {"level": "project", "child_id": "atlas", "parent_id": "core"},
        {"level": "team", "child_id": "core", "parent_id": "rd"},
    ]
    defaults = call(client, A, "hierarchy_defaults", {"company_id": "acme-co"})["links"]
    assert defaults == [{"level": "org", "child_id": "*", "parent_id": "acme-co"}]
    resolved = call(client, A, "hierarchy_resolve", {"user_id": "u", "project_id": "atlas"})
    assert resolved["identifiers"] == {
        "user_id": "u",
        "project_id": "atlas",
        "team_id": "core",
        "org_id": "rd",
        "company_id": "acme-co",
    }
    assert resolved["layers"] == ["user", "project", "team", "org", "company"]
    other = call(client, B, "hierarchy_resolve", {"project_id": "atlas"})["identifiers"]
    assert other["team_id"] != "core" and other["company_id"] != "acme-co"
    assert refused(client, A, "hierarchy_register", {"project_id": "a\x00"})["code"] in (
        "INVALID_ARGUMENT",
        "MISSING_IDENTIFIER",
    )


def test_card_lists_the_tools_with_schemas(client: httpx.Client) -> None:
    card = client.get("/.well-known/agent-card.json").json()
    tools = {t["name"]: t for t in card["capabilities"]["extensions"][0]["params"]["tools"]}
    for name in (
        "memory_history",
        "memory_delete_all",
        "hierarchy_register",
        "hierarchy_defaults",
        "hierarchy_resolve",
    ):
        assert tools[name]["skill"] == "memory" and tools[name]["description"]
    assert tools["memory_history"]["input_schema"]["required"] == ["memory_id"]
    assert "layers" in tools["memory_delete_all"]["input_schema"]["properties"]
    assert tools["memory_delete_all"]["input_schema"]["additionalProperties"] is False


def test_mcp_over_http_with_two_tenants(tmp_path: Path) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    config = tmp_path / "lamina.toml"
    config.write_text(
        "".join(
            f'[[server.api_keys]]\nkey_hash = "{hash_key(key)}"\ntenant_id = "{tenant}"\n'
            for key, tenant in ((KEY_A, "acme"), (KEY_B, "globex"))
        ),
        encoding="utf-8",
    )
    with mcp_http_process(tmp_path / "d", config, "--user-id", "u1") as url:

        async def as_tenant(key: str, steps: list[tuple[str, dict[str, Any]]]) -> list[Any]:
            import httpx2

            out = []
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60) as h,
                streamable_http_client(url, http_client=h) as (read, write, *_),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                listed = {t.name: t for t in (await session.list_tools()).tools}
                assert listed["memory_history"].annotations.read_only_hint is True
                # The default user fills memory tools, never a hierarchy registration.
                delete_all = listed["memory_delete_all"].input_schema["properties"]
                assert delete_all["user_id"]["default"] == "u1"
                register = listed["hierarchy_register"].input_schema["properties"]
                assert register["project_id"].get("default") is None
                for tool, args in steps:
                    result = await session.call_tool(tool, args)
                    out.append(json.loads(result.content[0].text))
            return out

        added, history = asyncio.run(
            as_tenant(
                KEY_A,
                [
                    ("memory_add", {"content": "mcp memory", "layer": "user"}),
                    ("memory_list", {}),
                ],
            )
        )
        memory_id = added["id"]
        assert history["total_count"] == 1
        theirs = asyncio.run(
            as_tenant(
                KEY_B,
                [
                    ("memory_history", {"memory_id": memory_id}),
                    ("memory_delete_all", {}),
                    ("hierarchy_register", {"team_id": "core", "org_id": "rd"}),
                ],
            )
        )
        assert theirs[0]["error"]["code"] == "MEMORY_NOT_FOUND"
        assert theirs[1] == {"deleted": 0}  # the default user u1 of tenant globex has none
        assert theirs[2] == {"links": [{"level": "team", "child_id": "core", "parent_id": "rd"}]}
        mine = asyncio.run(
            as_tenant(
                KEY_A,
                [("memory_history", {"memory_id": memory_id}), ("memory_delete_all", {})],
            )
        )
        assert [e["operation"] for e in mine[0]["history"]] == ["add"]
        assert mine[1] == {"deleted": 1}


def test_delete_all_with_sessions_counts_each_kind(client: httpx.Client) -> None:
    call(
        client,
        A,
        "memory_add",
        {"content": "u7 session note", "layer": "session", "session_id": "s7", "user_id": "u7"},
    )
    hello = [{"role": "user", "content": "hi"}]
    for key in ("s7", "s8"):
        call(client, A, "session_append", {"session_key": key, "messages": hello})
    call(client, B, "session_append", {"session_key": "s7", "messages": hello})
    done = call(client, A, "memory_delete_all", {"user_id": "u7", "include_sessions": True})
    assert done == {
        "deleted": 1,
        "sessions": ["s7"],
        "session_messages": 1,
        "observations": 0,
        "reflections": 0,
        "graph_relations": 0,
    }
    assert call(client, A, "session_messages", {"session_key": "s7"})["messages"] == []
    assert len(call(client, A, "session_messages", {"session_key": "s8"})["messages"]) == 1
    assert len(call(client, B, "session_messages", {"session_key": "s7"})["messages"]) == 1
    # A session named by session_id is forgotten even without memories.
    named = call(
        client,
        A,
        "memory_delete_all",
        {"session_id": "s8", "user_id": "u7", "include_sessions": True},
    )
    assert (named["deleted"], named["sessions"], named["session_messages"]) == (0, ["s8"], 1)
    assert refused(client, A, "memory_delete_all", {"include_sessions": True})["code"] == (
        "MISSING_IDENTIFIER"
    )
