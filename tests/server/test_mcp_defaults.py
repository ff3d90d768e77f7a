"""The rules of an adapter's default identifiers (server/defaults.py), over the real tool
table: which tool takes which default, an explicit null is "none", memory_delete_all takes
only the owner's default, and each tool's MCP description and schema say what it applies.
(tests/server/test_mcp_forget.py shows the same through a running `lamina mcp`.)"""

from __future__ import annotations

from typing import Any

import pytest

from lamina import Lamina
from lamina.server.defaults import IdentifierDefaults
from lamina.server.tools import ServerTool, all_tools

DEFAULTS = IdentifierDefaults(
    {"agent_id": "desk", "user_id": "alice", "project_id": "atlas", "team_id": "core"}
)
ALL = {"agent_id": "desk", "user_id": "alice", "project_id": "atlas", "team_id": "core"}


@pytest.fixture
def tools(ms: Lamina) -> dict[str, ServerTool]:
    return {t.name: t for t in all_tools(ms.aio)}


@pytest.mark.parametrize(
    ("tool", "given", "filled"),
    [
        ("memory_search", {"query": "q"}, {"query": "q", **ALL}),
        (
            "memory_add",
            {"content": "c", "layer": "user", "user_id": "bob"},
            {"content": "c", "layer": "user", **ALL, "user_id": "bob"},
        ),
        # null is "none": the default is not applied
        (
            "memory_search",
            {"query": "q", "agent_id": None},
            {"query": "q", **ALL, "agent_id": None},
        ),
        ("memory_list", {"user_id": None}, {**ALL, "user_id": None}),
        # another project keeps its own team; a null project names none
        ("memory_list", {"project_id": "other"}, {**ALL, "project_id": "other", "team_id": None}),
        ("memory_list", {"project_id": None}, {**ALL, "project_id": None}),
        # memory_delete_all: the user only, when nothing but layers a user owns is named
        ("memory_delete_all", {}, {"user_id": "alice"}),
        ("memory_delete_all", {"layers": ["user"]}, {"layers": ["user"], "user_id": "alice"}),
        ("memory_delete_all", {"agent_id": None}, {"agent_id": None, "user_id": "alice"}),
        ("memory_delete_all", {"agent_id": "x"}, {"agent_id": "x", "user_id": "alice"}),
        ("memory_delete_all", {"session_id": "s"}, {"session_id": "s", "user_id": "alice"}),
        ("memory_delete_all", {"project_id": "atlas"}, {"project_id": "atlas"}),
        ("memory_delete_all", {"user_id": None}, {"user_id": None}),
        ("memory_delete_all", {"user_id": "bob"}, {"user_id": "bob"}),
        # no identifiers, or exactly the links named
        ("hierarchy_register", {"project_id": "p"}, {"project_id": "p"}),
        ("knowledge_query", {"query": "q"}, {"query": "q"}),
        ("session_messages", {"session_key": "k"}, {"session_key": "k"}),
    ],
)
def test_fill(
    tools: dict[str, ServerTool], tool: str, given: dict[str, Any], filled: dict[str, Any]
) -> None:
    result = DEFAULTS.fill(tools[tool], given)
    expected = {k: v for k, v in filled.items() if v is not None or k in given}
    assert result == expected
    tools[tool].parse(result)  # what the tool runs with is valid


def test_anything_but_an_object_is_left_to_the_tool(tools: dict[str, ServerTool]) -> None:
    assert DEFAULTS.fill(tools["memory_add"], ["x"]) == ["x"]


def test_every_tool_says_the_defaults_it_applies(tools: dict[str, ServerTool]) -> None:
    takes = {n for n, t in tools.items() if DEFAULTS.applies_to(t)}
    assert takes == {
        "memory_add",
        "memory_add_messages",
        "memory_search",
        "memory_list",
        "memory_delete_all",
        "hierarchy_resolve",
        "context_prompt",
    }
    for name, tool in tools.items():
        text, schema = DEFAULTS.description(tool), DEFAULTS.schema(tool)
        names = DEFAULTS.applies_to(tool)
        if not names:
            assert text == tool.description and schema == tool.input_schema, name
            continue
        assert text.startswith(tool.description) and text.endswith("null means none."), name
        for ident in names:
            value, option = DEFAULTS.values[ident], "--" + ident.replace("_", "-")
            assert f"{ident} defaults to {value!r} (server {option})" in text, name
            assert schema["properties"][ident]["default"] == value, name
        for ident in set(DEFAULTS.values) - set(names):
            assert f"{ident} defaults to" not in text, name
    assert DEFAULTS.applies_to(tools["memory_delete_all"]) == ["user_id"]
    team = DEFAULTS.description(tools["memory_search"])
    assert "team_id defaults to 'core' (server --team-id) unless project_id is given" in team


def test_without_defaults_nothing_is_added(tools: dict[str, ServerTool]) -> None:
    none = IdentifierDefaults()
    for tool in tools.values():
        assert none.fill(tool, {}) == {}
        assert none.description(tool) == tool.description
