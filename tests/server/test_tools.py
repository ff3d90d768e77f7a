"""The server's tools (memory, knowledge, governance skills), without any transport."""

from __future__ import annotations

import math
from typing import Any

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.server.tools import ServerTool, build_tools


@pytest.fixture
def tools(ms: Lamina) -> dict[str, ServerTool]:
    return {t.name: t for t in build_tools(ms.aio)}


def call(ms: Lamina, tool: ServerTool, args: Any, tenant: str = "a") -> Any:
    return ms._run(tool.run(args, tenant))


def test_the_tools_and_their_schemas(tools: dict[str, ServerTool]) -> None:
    assert sorted(tools) == sorted(
        [
            "memory_add",
            "memory_add_messages",
            "memory_search",
            "memory_get",
            "memory_update",
            "memory_delete",
            "memory_invalidate",
            "memory_list",
            "memory_history",
            "memory_delete_all",
            "hierarchy_register",
            "hierarchy_defaults",
            "hierarchy_resolve",
            "knowledge_query",
            "knowledge_get",
            "knowledge_create",
            "knowledge_update",
            "knowledge_status",
            "knowledge_history",
            "governance_validate",
            "governance_drift",
            "governance_policies",
        ]
    )
    assert {t.skill for t in tools.values()} == {"memory", "knowledge", "governance"}
    schema = tools["memory_add"].input_schema
    assert schema["type"] == "object" and set(schema["required"]) == {"content", "layer"}
    assert schema["additionalProperties"] is False
    assert tools["memory_search"].read_only and not tools["knowledge_create"].read_only


def test_every_tool_runs_and_stays_in_its_tenant(ms: Lamina, tools: dict[str, ServerTool]) -> None:
    added = call(
        ms,
        tools["memory_add"],
        {"content": "Alice prefers dark mode", "layer": "user", "user_id": "alice"},
    )
    mid = added["id"]
    hits = call(ms, tools["memory_search"], {"query": "theme preference", "user_id": "alice"})
    assert hits["results"][0]["memory"]["id"] == mid
    assert call(ms, tools["memory_get"], {"memory_id": mid})["content"] == "Alice prefers dark mode"
    call(ms, tools["memory_update"], {"memory_id": mid, "content": "Alice prefers light mode"})
    assert call(ms, tools["memory_list"], {"user_id": "alice"})["total_count"] == 1
    made = call(
        ms,
        tools["knowledge_create"],
        {"type": "adr", "title": "Use PostgreSQL", "layer": "company", "status": "accepted"},
    )
    kid = made["item"]["id"]
    assert (
        call(ms, tools["knowledge_query"], {"query": "database"})["results"][0]["item"]["id"] == kid
    )
    call(ms, tools["knowledge_update"], {"id": kid, "summary": "Only PostgreSQL."})
    call(ms, tools["knowledge_status"], {"id": kid, "status": "deprecated"})
    assert call(ms, tools["knowledge_get"], {"id": kid})["status"] == "deprecated"
    assert len(call(ms, tools["knowledge_history"], {"id": kid})["history"]) == 3
    call(
        ms,
        tools["knowledge_create"],
        {
            "type": "policy",
            "title": "deps",
            "layer": "company",
            "status": "accepted",
            "rules": [
                {
                    "id": "r",
                    "target": "dependency",
                    "operator": "must_not_use",
                    "value": "requests",
                    "severity": "block",
                }
            ],
        },
    )
    result = call(ms, tools["governance_validate"], {"context": {"dependencies": ["requests"]}})
    assert result["is_valid"] is False
    drift = call(ms, tools["governance_drift"], {"contexts": [{"dependencies": ["requests"]}]})
    assert drift["score"] == 1.0
    assert [p["id"] for p in call(ms, tools["governance_policies"], {})["policies"]][
        -1
    ] == "policy-0001"

    # Tenant b sees none of it and can change none of it.
    assert call(ms, tools["memory_get"], {"memory_id": mid}, tenant="b") is None
    assert (
        call(ms, tools["memory_search"], {"query": "theme", "user_id": "alice"}, "b")["results"]
        == []
    )
    with pytest.raises(LaminaError):
        call(ms, tools["memory_update"], {"memory_id": mid, "content": "x"}, tenant="b")
    call(ms, tools["memory_delete"], {"memory_id": mid}, tenant="b")
    assert (
        call(ms, tools["memory_get"], {"memory_id": mid})["content"] == "Alice prefers light mode"
    )
    with pytest.raises(LaminaError) as err:
        call(ms, tools["knowledge_get"], {"id": kid}, tenant="b")
    assert err.value.code is ErrorCode.ITEM_NOT_FOUND
    assert (
        call(ms, tools["knowledge_query"], {"query": "database", "status": "any"}, "b")["results"]
        == []
    )
    with pytest.raises(LaminaError):
        call(ms, tools["knowledge_status"], {"id": kid, "status": "superseded"}, tenant="b")
    assert call(ms, tools["governance_validate"], {"context": {"dependencies": ["requests"]}}, "b")[
        "is_valid"
    ]
    call(ms, tools["memory_delete"], {"memory_id": mid})
    assert call(ms, tools["memory_get"], {"memory_id": mid}) is None


def test_missing_and_invalid_arguments(ms: Lamina, tools: dict[str, ServerTool]) -> None:
    with pytest.raises(LaminaError) as err:
        call(ms, tools["memory_add"], {"layer": "user"})
    assert err.value.details["missing"] == ["content"]
    with pytest.raises(LaminaError) as err:
        call(ms, tools["memory_search"], {"query": 5})
    assert err.value.details["field"] == "query" and "missing" not in err.value.details
    with pytest.raises(LaminaError) as err:
        call(ms, tools["memory_search"], {"query": "x", "unknown": 1})
    assert err.value.details["field"] == "unknown"
    with pytest.raises(LaminaError) as err:
        call(ms, tools["memory_list"], ["not", "an", "object"])
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    with pytest.raises(LaminaError) as err:
        call(ms, tools["memory_add"], {"content": "x", "layer": "galaxy"})
    assert err.value.code is ErrorCode.INVALID_LAYER
    with pytest.raises(LaminaError) as err:
        call(
            ms,
            tools["knowledge_create"],
            {"type": "adr", "title": "x", "layer": "team", "layer_id": "../../etc"},
        )
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    with pytest.raises(LaminaError) as err:
        call(
            ms,
            tools["memory_add"],
            {"content": "AKIAIOSFODNN7EXAMPLE", "layer": "org", "org_id": "o"},
        )
    assert err.value.code is ErrorCode.POLICY_VIOLATION


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("memory_add", {"content": "x", "layer": "user", "user_id": "u", "ttl": math.inf}, "ttl"),
        ("memory_search", {"query": "x", "user_id": "u", "threshold": math.nan}, "threshold"),
        ("memory_search", {"query": "x", "user_id": "u", "limit": 5.0}, "limit"),
        ("memory_list", {"user_id": "u", "tags": ("a", "b")}, "tags"),
    ],
)
def test_numbers_and_arrays_are_taken_only_as_json_has_them(
    ms: Lamina, tools: dict[str, ServerTool], tool: str, arguments: dict[str, Any], field: str
) -> None:
    """What only a Python caller (an adapter) can pass: NaN and Infinity, a float where an
    integer is asked, a tuple for an array. Each is INVALID_ARGUMENT naming the field, and
    nothing is stored."""
    with pytest.raises(LaminaError) as err:
        call(ms, tools[tool], arguments)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert err.value.details["field"] == field
    assert ms.memory.list(user_id="u").items == []
