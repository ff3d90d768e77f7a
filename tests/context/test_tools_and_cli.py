"""Agent-facing tool definitions and the `lamina context` commands."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from lamina import AsyncLamina, ErrorCode, LaminaError
from lamina.context.tools import agent_tools
from tests.conftest import fast_settings
from tests.test_cli import run, run_json


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


def test_the_cli_mirrors_the_library(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    saved = run_json(
        capsys,
        data_dir,
        "context",
        "knowledge",
        "save",
        "db",
        "Production runs PostgreSQL 16",
        "--category",
        "fact",
        "--tag",
        "infra",
    )
    assert saved["version"] == 1 and saved["tags"] == ["infra"]
    again = run_json(
        capsys, data_dir, "context", "knowledge", "save", "db", "Production runs PostgreSQL 17"
    )
    assert again["version"] == 2
    versions = run_json(capsys, data_dir, "context", "knowledge", "get", "db", "--versions")
    assert [v["version"] for v in versions] == [2, 1]
    hits = run_json(capsys, data_dir, "context", "knowledge", "search", "postgres version")
    assert hits[0]["item"]["content"].endswith("17")
    assert run_json(capsys, data_dir, "context", "knowledge", "list")["total_count"] == 1

    run_json(
        capsys,
        data_dir,
        "context",
        "learning",
        "save",
        "disk full on runner",
        "--fix",
        "prune docker images",
        "--category",
        "tool_error",
    )
    outcome = run_json(
        capsys, data_dir, "context", "learning", "outcome", "disk full on runner", "--success"
    )
    assert outcome["success_count"] == 1
    run_json(
        capsys,
        data_dir,
        "context",
        "skill",
        "save",
        "rollback",
        "Roll back a deploy",
        "--type",
        "script",
        "--parameters",
        '{"release": {"type": "string"}}',
    )
    assert (
        run_json(capsys, data_dir, "context", "skill", "list", "--type", "script")["total_count"]
        == 1
    )
    run_json(
        capsys,
        data_dir,
        "context",
        "ref",
        "save",
        "pg-docs",
        "https://www.postgresql.org/docs/",
        "--summary",
        "PostgreSQL manual",
    )
    assert (
        run_json(capsys, data_dir, "context", "ref", "search", "postgres manual")[0]["item"]["name"]
        == "pg-docs"
    )

    result = run_json(
        capsys, data_dir, "context", "retrieve", "runner disk is full again, postgres docs?"
    )
    assert set(result["items"]) == {
        "user_knowledge",
        "skill_patterns",
        "external_knowledge",
        "agent_learnings",
    }
    assert result["items"]["agent_learnings"][0]["fields"]["fix"] == "prune docker images"
    prompt = run_json(
        capsys, data_dir, "context", "prompt", "runner disk full", "--base", "Be brief."
    )["prompt"]
    assert prompt.startswith("Be brief.\n\n") and "## Known Solutions" in prompt
    code, out, _ = run(capsys, data_dir, "context", "prompt", "?!", "--base", "Only this.")
    assert (code, out) == (0, "Only this.\n")

    deleted = run_json(capsys, data_dir, "context", "knowledge", "delete", "db")
    assert deleted["deleted"] == 2

    errors = [
        (("context", "knowledge", "get", "db"), "ITEM_NOT_FOUND"),
        (("context", "knowledge", "save", "k", "c", "--category", "gossip"), "INVALID_ARGUMENT"),
        (("context", "retrieve", "x y", "--layer", "bogus"), "INVALID_LAYER"),
        (("context", "retrieve", "disk", "--max-per-layer", "0"), "INVALID_ARGUMENT"),
        (("context", "skill", "save", "s", "d", "--parameters", "{nope"), "INVALID_ARGUMENT"),
        (("context", "knowledge", "search", "q" * 5000), "QUERY_TOO_LONG"),
    ]
    for args, code_name in errors:
        code, out, err = run(capsys, data_dir, *args)
        assert code == 1 and f"error: {code_name}:" in err, (args, out, err)
        code, out, _ = run(capsys, data_dir, *args, "--json")
        assert code == 1 and json.loads(out)["error"]["code"] == code_name
    # Human output works too.
    code, out, _ = run(capsys, data_dir, "context", "learning", "list")
    assert code == 0 and "disk full on runner" in out and "1 of 1" in out
