"""`lamina mcp` started exactly as docs/mcp.md's Claude Desktop snippet says (its command,
arguments and environment read from the page), over stdio with the official mcp client, on
both stores: ``memory_delete_all {}`` forgets the default user's memories in every layer the
user owns, ``{"agent_id": null}`` and ``{"layers": ["user"]}`` do what the page says, each
tool says which defaults it applies, and bad input gets its ErrorCode and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina import Lamina
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres
from tests.server.mcp_support import (
    call,
    command_of,
    expected_defaults,
    mcp_session,
    ok,
    run,
    server_entry,
    snippets,
)

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

ENTRY = server_entry("claude-desktop", snippets()["claude-desktop"])
DEFAULTS = expected_defaults(ENTRY)
USER, AGENT = DEFAULTS["user_id"], DEFAULTS["agent_id"]
OTHER_AGENT = "cursor"

#: The default user's memories: user layer, the default agent's and another agent's, and a
#: session's (the snippet's defaults fill in the rest).
MINE = {
    "user": {"content": f"{USER} prefers dark mode", "layer": "user"},
    "agent": {"content": f"{USER} asked {AGENT} for a haiku", "layer": "agent"},
    "other agent": {
        "content": f"{USER} asked {OTHER_AGENT} for tests",
        "layer": "agent",
        "agent_id": OTHER_AGENT,
    },
    "session": {"content": f"{USER} planned a trip in s1", "layer": "session", "session_id": "s1"},
}
#: Memories of others, which no deletion of the default user's may touch.
THEIRS = (
    {"content": "bob prefers light mode", "layer": "user", "user_id": "bob"},
    {"content": f"bob asked {AGENT} for a poem", "layer": "agent", "user_id": "bob"},
    {"content": "atlas ships on fridays", "layer": "project", "project_id": "atlas"},
)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The server's environment for the store: nothing (SQLite in the data directory) or
    LAMINA_DATABASE_URL (an empty PostgreSQL database)."""
    if request.param == "sqlite":
        yield {}
        return
    url = require_postgres()
    empty_database(url)
    yield {"LAMINA_DATABASE_URL": url}


def library(data: Path, env: dict[str, str]) -> Lamina:
    """The same store, opened by the library (to check what the server left)."""
    return Lamina(fast_settings(data, database_url=env.get("LAMINA_DATABASE_URL")))


def session_of(data: Path, env: dict[str, str], errlog: Path) -> Any:
    """A client session with the server started as the snippet says (on ``env``'s store)."""
    return mcp_session(
        command_of(ENTRY), ENTRY["args"], {**ENTRY.get("env", {}), **env}, data, errlog
    )


async def add(session: Any, *memories: dict[str, Any]) -> None:
    for memory in memories:
        await ok(session, "memory_add", memory)


async def mine_found(session: Any) -> set[str]:
    """The default user's memories the server finds, over every layer the user owns."""
    found: set[str] = set()
    for scope in ({}, {"agent_id": OTHER_AGENT}, {"session_id": "s1"}):
        listed = await ok(session, "memory_list", scope)
        found |= {m["content"] for m in listed["items"]}
    hits = await ok(session, "memory_search", {"query": USER, "mode": "keyword"})
    return found | {h["memory"]["content"] for h in hits["results"]}


async def theirs_found(session: Any) -> set[str]:
    """Bob's and the project's memories the server finds (null: not the defaults)."""
    bob = await ok(session, "memory_list", {"user_id": "bob"})
    scope = {"project_id": "atlas", "user_id": None, "agent_id": None}
    project = await ok(session, "memory_list", scope)
    return {m["content"] for m in bob["items"] + project["items"]}


def contents(*keys: str) -> set[str]:
    return {MINE[k]["content"] for k in keys}


async def deleted(session: Any, arguments: dict[str, Any]) -> int:
    count: int = (await ok(session, "memory_delete_all", arguments))["deleted"]
    return count


def test_delete_all_forgets_the_default_user(store: dict[str, str], tmp_path: Path) -> None:
    data = tmp_path / "d"

    async def scenario() -> None:
        async with session_of(data, store, tmp_path / "err") as s:
            await s.initialize()
            await add(s, *MINE.values(), *THEIRS)
            assert await mine_found(s) == contents(*MINE)

            # {}: every layer the user owns, every agent and session of theirs.
            assert await deleted(s, {}) == len(MINE)
            assert await mine_found(s) == set()

            await add(s, *MINE.values())
            assert await deleted(s, {"layers": ["user"]}) == 1
            assert await mine_found(s) == contents("agent", "other agent", "session")
            # A named agent narrows to it, still the default user's.
            assert await deleted(s, {"agent_id": OTHER_AGENT}) == 1
            assert await mine_found(s) == contents("agent", "session")
            # null: no agent default (the server's agent would narrow to its memories).
            assert await deleted(s, {"agent_id": None}) == 2
            assert await mine_found(s) == set()
            assert await theirs_found(s) == {m["content"] for m in THEIRS}

            # include_sessions: the user's sessions' messages go too.
            await add(s, *MINE.values())
            message = {"role": "user", "content": "book the train"}
            await ok(s, "session_append", {"session_key": "s1", "messages": [message]})
            done = await ok(s, "memory_delete_all", {"include_sessions": True})
            assert done["deleted"] == len(MINE)
            assert done["sessions"] == ["s1"] and done["session_messages"] == 1
            assert (await ok(s, "session_messages", {"session_key": "s1"}))["messages"] == []
            assert await mine_found(s) == set()

            # A project named: its memories, no user default (they belong to no user).
            assert await deleted(s, {"project_id": "atlas"}) == 1
            assert await theirs_found(s) == {m["content"] for m in THEIRS[:2]}

    run(scenario)
    assert "Traceback" not in (tmp_path / "err").read_text(encoding="utf-8")
    with library(data, store) as ms:
        assert ms.memory.count_all(user_id=USER) == 0
        assert ms.memory.count_all(user_id="bob") == 2
        assert ms.memory.count_all(project_id="atlas") == 0


def test_each_tool_says_which_defaults_it_applies(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with session_of(tmp_path / "d", {}, tmp_path / "err") as s:
            init = await s.initialize()
            assert "memory_delete_all: user_id only" in (init.instructions or "")
            tools = {t.name: t for t in (await s.list_tools()).tools}
            user = f"user_id defaults to {USER!r} (server --user-id)"
            agent = f"agent_id defaults to {AGENT!r} (server --agent-id)"
            for name in ("memory_add", "memory_add_messages", "memory_search", "memory_list"):
                assert user in (tools[name].description or ""), name
                assert agent in (tools[name].description or ""), name
                assert "null means none" in (tools[name].description or ""), name
            for name in ("hierarchy_resolve", "context_prompt"):
                assert user in (tools[name].description or ""), name
            forget = tools["memory_delete_all"]
            assert user in (forget.description or "")
            assert agent not in (forget.description or "")
            assert "defaults for agent_id are not applied" in (forget.description or "")
            assert forget.input_schema["properties"]["user_id"]["default"] == USER
            assert forget.input_schema["properties"]["agent_id"].get("default") is None
            for name in ("hierarchy_register", "knowledge_query", "session_append"):
                assert "defaults to" not in (tools[name].description or ""), name

            # What the descriptions say is what the calls do.
            resolved = await ok(s, "hierarchy_resolve", {})
            assert resolved["layers"] == ["agent", "user"]
            assert (await ok(s, "hierarchy_resolve", {"agent_id": None}))["layers"] == ["user"]
            added = await ok(
                s, "memory_add_messages", {"messages": [{"role": "user", "content": "hi"}]}
            )
            assert added["memories"][0]["layer"] == "agent"
            assert added["memories"][0]["identifiers"] == {"agent_id": AGENT, "user_id": USER}
            query = {"query": "hi", "mode": "keyword"}
            hits = (await ok(s, "memory_search", query))["results"]
            assert [h["memory"]["content"] for h in hits] == ["hi"]
            assert (await ok(s, "memory_search", {**query, "agent_id": None}))["results"] == []

    run(scenario)


BAD: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
    # a bad layer
    ("memory_add", {"content": "x", "layer": "galaxy"}, "INVALID_LAYER", {"layer": "galaxy"}),
    ("memory_delete_all", {"layers": ["galaxy"]}, "INVALID_LAYER", {"layer": "galaxy"}),
    ("memory_search", {"query": "x", "layers": ["galaxy"]}, "INVALID_LAYER", {"layer": "galaxy"}),
    # an unknown argument
    ("memory_delete_all", {"user": "bob"}, "INVALID_ARGUMENT", {"field": "user"}),
    (
        "memory_add",
        {"content": "x", "layer": "user", "tag": "a"},
        "INVALID_ARGUMENT",
        {"field": "tag"},
    ),
    # a wrong type
    ("memory_delete_all", {"layers": "user"}, "INVALID_ARGUMENT", {"field": "layers"}),
    ("memory_delete_all", {"user_id": 7}, "INVALID_ARGUMENT", {"field": "user_id"}),
    ("memory_add", {"content": ["x"], "layer": "user"}, "INVALID_ARGUMENT", {"field": "content"}),
    ("memory_list", {"limit": "many"}, "INVALID_ARGUMENT", {"field": "limit"}),
    # no identifier left: an explicit null removes the default
    ("memory_delete_all", {"user_id": None}, "MISSING_IDENTIFIER", {}),
    ("memory_nuke", {}, "UNKNOWN_TOOL", {"tool": "memory_nuke"}),
]


def test_bad_input_gets_its_error_code_and_changes_nothing(
    store: dict[str, str], tmp_path: Path
) -> None:
    data = tmp_path / "d"

    async def scenario() -> None:
        async with session_of(data, store, tmp_path / "err") as s:
            await s.initialize()
            await add(s, *MINE.values(), *THEIRS)
            before = await ok(s, "memory_list", {})
            first = before["items"][0]
            for tool, arguments, code, details in BAD:
                error, result = await call(s, tool, arguments)
                assert error, (tool, arguments, result)
                assert result["error"]["code"] == code, (tool, arguments, result)
                assert result["error"]["message"], (tool, arguments)
                assert result["error"]["details"].items() >= details.items(), result
            error, result = await call(s, "memory_update", {"memory_id": first["id"], "content": 5})
            assert error and result["error"]["details"]["field"] == "content"
            assert await ok(s, "memory_list", {}) == before
            assert await mine_found(s) == contents(*MINE)

    run(scenario)
    with library(data, store) as ms:
        assert ms.memory.count_all(user_id=USER) == len(MINE)
        assert ms.memory.count_all(user_id="bob") == 2
        assert ms.memory.count_all(project_id="atlas") == 1
