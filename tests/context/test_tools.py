"""Agent-facing tool definitions (the `lamina context` commands: tests/cli/test_context.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from lamina import AsyncLamina, ErrorCode, LaminaError
from lamina.context.tools import agent_tools
from tests.conftest import fast_settings


def test_agent_tools_round_trip_and_refuse_bad_arguments(data_dir: Path) -> None:
    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir)) as ms:
            tools = {t.name: t for t in agent_tools(ms.context)}
            assert sorted(tools) == [
                "create_skill",
                "list_skills",
                "save_knowledge",
                "save_learning",
                "search_knowledge",
                "search_learnings",
            ]
            for tool in tools.values():
                schema = tool.input_schema
                assert schema["type"] == "object" and not schema["additionalProperties"]
                assert set(schema["required"]) <= set(schema["properties"])
                json.dumps(schema)  # plain JSON, ready for any adapter
                assert tool.description
            saved = await tools["save_knowledge"](
                {"key": "tz", "content": "The user works in CET", "category": "preference"}
            )
            assert saved["saved"]["key"] == "tz" and saved["saved"]["version"] == 1
            found = await tools["search_knowledge"]({"query": "which timezone CET"})
            assert found["results"][0]["item"]["content"] == "The user works in CET"
            await tools["save_learning"](
                {
                    "trigger": "npm ERESOLVE",
                    "fix": "use --legacy-peer-deps",
                    "category": "tool_error",
                }
            )
            hits = await tools["search_learnings"]({"query": "npm ERESOLVE error", "limit": 1})
            assert hits["results"][0]["item"]["fix"] == "use --legacy-peer-deps"
            await tools["create_skill"](
                {
                    "name": "triage",
                    "description": "Triage an incident",
                    "type": "template",
                    "parameters": {"severity": {"type": "string"}},
                }
            )
            page = await tools["list_skills"]({})
            assert [s["name"] for s in page["items"]] == ["triage"]
            assert json.dumps(page)

            bad: list[tuple[str, Any, ErrorCode]] = [
                ("save_knowledge", {"key": "k"}, ErrorCode.INVALID_ARGUMENT),
                (
                    "save_knowledge",
                    {"key": "k", "content": "c", "extra": 1},
                    ErrorCode.INVALID_ARGUMENT,
                ),
                (
                    "save_knowledge",
                    {"key": "k", "content": "c", "category": "nope"},
                    ErrorCode.INVALID_ARGUMENT,
                ),
                ("search_knowledge", {"query": "q" * 10_000}, ErrorCode.QUERY_TOO_LONG),
                ("search_learnings", {"query": "x", "limit": "ten"}, ErrorCode.INVALID_ARGUMENT),
                (
                    "create_skill",
                    {"name": "s", "description": "d", "parameters": "no"},
                    ErrorCode.INVALID_ARGUMENT,
                ),
                ("list_skills", ["not", "an", "object"], ErrorCode.INVALID_ARGUMENT),
            ]
            for name, arguments, code in bad:
                with pytest.raises(LaminaError) as err:
                    await tools[name](arguments)
                assert err.value.code is code, (name, arguments)
            assert (await ms.context.knowledge.list()).total_count == 1

    asyncio.run(scenario())
