"""The memory tools' lifecycle arguments: time fields, dedup, invalidation, time windows and
consolidation (infer) through the tools, with their bad inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.server.tools import ServerTool, build_tools
from tests.conftest import chat_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.server.test_tools import call


@pytest.fixture
def tools(ms: Lamina) -> dict[str, ServerTool]:
    return {t.name: t for t in build_tools(ms.aio)}


def test_time_fields_dedup_invalidate_and_windows(ms: Lamina, tools: dict[str, ServerTool]) -> None:
    add, search, lst = tools["memory_add"], tools["memory_search"], tools["memory_list"]
    first = call(
        ms,
        add,
        {
            "content": "Alice lives in Berlin",
            "layer": "user",
            "user_id": "alice",
            "timestamp": "2020-01-01T00:00:00Z",
            "valid_from": "2020-01-01T00:00:00Z",
        },
    )
    assert first["event_at"].startswith("2020-01-01T00:00:00")
    again = call(ms, add, {"content": "alice lives in berlin", "layer": "user", "user_id": "alice"})
    assert again["id"] == first["id"] and again["deduplicated"] is True
    other = call(
        ms,
        add,
        {"content": "alice lives in berlin", "layer": "user", "user_id": "alice", "dedup": False},
    )
    assert other["id"] != first["id"]
    done = call(ms, tools["memory_invalidate"], {"memory_ids": [first["id"], other["id"]]})
    assert [m["valid_until"] is not None for m in done["invalidated"]] == [True, True]
    assert call(ms, lst, {"user_id": "alice"})["total_count"] == 0
    assert call(ms, lst, {"user_id": "alice", "include_invalid": True})["total_count"] == 2
    hits = call(
        ms, search, {"query": "where does Alice live", "user_id": "alice", "include_invalid": True}
    )
    # Both are invalid now and found again; search keeps one of two identical texts.
    assert [h["memory"]["id"] for h in hits["results"]] in ([first["id"]], [other["id"]])
    none = call(ms, search, {"query": "where does Alice live", "user_id": "alice"})
    assert none["results"] == []
    old = {"user_id": "alice", "include_invalid": True, "until": "2021-01-01T00:00:00Z"}
    assert [m["id"] for m in call(ms, lst, old)["items"]] == [first["id"]]
    note = {"content": "A short note", "layer": "session", "session_id": "s", "user_id": "alice"}
    call(ms, add, {**note, "ttl": 600})
    session = call(ms, lst, {"session_id": "s", "user_id": "alice", "layers": ["session"]})[
        "items"
    ][0]
    assert session["expires_at"] is not None


@pytest.mark.parametrize(
    ("tool", "args", "code"),
    [
        ("memory_add", {"ttl": 0}, ErrorCode.INVALID_ARGUMENT),
        ("memory_add", {"timestamp": "yesterday"}, ErrorCode.INVALID_ARGUMENT),
        (
            "memory_add",
            {"valid_from": "2030-01-01", "valid_until": "2020-01-01"},
            ErrorCode.INVALID_ARGUMENT,
        ),
        ("memory_add", {"dedup": "maybe"}, ErrorCode.INVALID_ARGUMENT),
        ("memory_add", {"infer": True}, ErrorCode.CONFIGURATION_ERROR),
        ("memory_search", {"query": "x", "since": "soon"}, ErrorCode.INVALID_ARGUMENT),
        ("memory_list", {"since": "2030-01-01", "until": "2020-01-01"}, ErrorCode.INVALID_ARGUMENT),
        ("memory_invalidate", {"memory_ids": []}, ErrorCode.INVALID_ARGUMENT),
        ("memory_invalidate", {"memory_ids": ["nope"]}, ErrorCode.MEMORY_NOT_FOUND),
        ("memory_invalidate", {"memory_ids": ["x"], "at": "whenever"}, ErrorCode.INVALID_ARGUMENT),
    ],
)
def test_bad_lifecycle_arguments_change_nothing(
    ms: Lamina, tools: dict[str, ServerTool], tool: str, args: dict[str, Any], code: ErrorCode
) -> None:
    kept = call(ms, tools["memory_add"], {"content": "kept", "layer": "user", "user_id": "u"})
    base = {"content": "new", "layer": "user", "user_id": "u"} if tool == "memory_add" else {}
    base = {**base, "user_id": "u"} if tool != "memory_invalidate" else {}
    with pytest.raises(LaminaError) as err:
        call(ms, tools[tool], {**base, **args})
    assert err.value.code is code
    page = call(ms, tools["memory_list"], {"user_id": "u", "include_invalid": True})
    assert [m["id"] for m in page["items"]] == [kept["id"]]
    assert page["items"][0]["valid_until"] is None


def test_infer_through_the_tools(data_dir: Path) -> None:
    with FakeOpenAI() as llm:
        llm.script(
            '{"facts": ["Zoe is vegetarian"]}', '{"decisions": [{"fact": 0, "event": "ADD"}]}'
        )
        with Lamina(chat_settings(data_dir, llm)) as ms:
            tools = {t.name: t for t in build_tools(ms.aio)}
            done = call(
                ms,
                tools["memory_add_messages"],
                {
                    "messages": [{"role": "user", "name": "Zoe", "content": "I don't eat meat."}],
                    "user_id": "zoe",
                    "infer": True,
                },
            )
            assert [(f["fact"], f["event"]) for f in done["facts"]] == [
                ("Zoe is vegetarian", "add")
            ]
            assert json.dumps(done)  # plain JSON all the way down
            page = call(ms, tools["memory_list"], {"user_id": "zoe"})
            assert sorted(m["content"] for m in page["items"]) == [
                "I don't eat meat.",
                "Zoe is vegetarian",
            ]
