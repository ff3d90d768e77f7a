"""LaminaSession against the Agents SDK's own SQLiteSession (in memory): one call script on
both, the same items back, on each store (SQLite and PostgreSQL); and a real run of the SDK
through each session, the same history kept."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session, SessionSettings, SQLiteSession
from openai import AsyncOpenAI

from lamina import ErrorCode, Lamina, LaminaError
from lamina.integrations.openai_agents import LaminaSession
from tests.fakes.openai_server import FakeOpenAI, Reply

set_tracing_disabled(True)


def every_shape() -> list[dict[str, Any]]:
    """An item of every shape the SDK produces or takes as input (the Responses API's)."""
    text = {"type": "output_text", "text": "Three TODOs.", "annotations": [], "logprobs": []}
    return [
        {"role": "user", "content": "What is in the repo?"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and"}]},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "this picture"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVB", "detail": "auto"},
                {"type": "input_file", "file_id": "file-1"},
            ],
        },
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use the tools."},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "ls"}]},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA"},
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "grep",
            "arguments": '{"q": "TODO"}',
            "status": "completed",
        },
        {"type": "function_call", "call_id": "call_2", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "3 hits"},
        {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": [{"type": "input_text", "text": "a.py b.py"}],
        },
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [text],
        },
        {"id": "msg_2", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "x"}},
        {"type": "file_search_call", "id": "fs_1", "queries": ["todo"], "status": "completed"},
        {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_3",
            "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
            "pending_safety_checks": [],
            "status": "completed",
        },
        {
            "type": "computer_call_output",
            "call_id": "call_3",
            "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,x"},
        },
        {
            "type": "local_shell_call",
            "id": "ls_1",
            "call_id": "call_4",
            "action": {"type": "exec", "command": ["ls"], "env": {}},
            "status": "completed",
        },
        {"type": "local_shell_call_output", "id": "call_4", "output": "a.py"},
        {"type": "image_generation_call", "id": "ig_1", "result": None, "status": "generating"},
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "git",
            "name": "log",
            "arguments": "{}",
            "output": "3 commits",
        },
        {"type": "item_reference", "id": "msg_0"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "   "},
        {"role": "assistant", "content": "Done."},
    ]


async def script(session: Session) -> list[Any]:
    """The same calls on any session; what each read shows."""
    seen: list[Any] = []
    items = every_shape()
    await session.add_items(items[:3])
    seen.append(await session.get_items())
    await session.add_items(items[3:])
    await session.add_items([])
    seen.append(await session.get_items())
    for limit in (1, 2, 5, len(items), len(items) + 10, 0, -1):
        seen.append(await session.get_items(limit=limit))
    seen.append(await session.pop_item())
    seen.append(await session.pop_item())
    seen.append(await session.get_items(limit=3))
    await session.clear_session()
    seen.append(await session.get_items())
    seen.append(await session.pop_item())
    await session.add_items(items[5:8])
    seen.append(await session.get_items())
    return seen


def test_the_session_gives_back_what_the_sdks_own_gives_back(on_store: Lamina) -> None:
    theirs = asyncio.run(script(SQLiteSession("conformance")))
    ours = asyncio.run(script(LaminaSession("agents:conformance", on_store)))
    assert ours == theirs
    assert ours[1] == every_shape() and ours[-1] == every_shape()[5:8]
    assert ours[2] == every_shape()[-1:] and ours[7] == [] and ours[8] == every_shape()
    assert ours[9] == every_shape()[-1] and ours[-2] is None


def test_items_come_back_as_json_and_are_not_shared_with_the_caller(on_store: Lamina) -> None:
    session = LaminaSession("agents:json", on_store)
    items = every_shape()
    asyncio.run(session.add_items(items))
    back = asyncio.run(session.get_items())
    back[0]["content"] = "changed by the caller"
    assert asyncio.run(session.get_items()) == every_shape() == items
    # A tuple is stored as JSON stores it, as SQLiteSession does.
    shaped = {"type": "file_search_call", "id": "fs_2", "queries": ("a",), "status": "completed"}
    asyncio.run(session.add_items([shaped]))
    reference = SQLiteSession("json")
    asyncio.run(reference.add_items([copy.deepcopy(shaped)]))
    assert asyncio.run(session.get_items(limit=1)) == asyncio.run(reference.get_items(limit=1))


def test_session_settings_limit_as_the_sdks(on_store: Lamina) -> None:
    async def reads(session: Session) -> list[Any]:
        await session.add_items(every_shape())
        return [await session.get_items(), await session.get_items(limit=4)]

    settings = SessionSettings(limit=2)
    ours = asyncio.run(reads(LaminaSession("agents:limit", on_store, session_settings=settings)))
    theirs = asyncio.run(reads(SQLiteSession("limit", session_settings=settings)))
    assert ours == theirs and [len(r) for r in ours] == [2, 4]


def test_where_lamina_differs_it_says_so_with_a_code_and_stores_none_of_the_batch(
    on_store: Lamina,
) -> None:
    session = LaminaSession("agents:refused", on_store)
    asyncio.run(session.add_items([{"role": "user", "content": "kept"}]))
    too_long = {"role": "user", "content": "x" * (on_store.settings.memory.max_content_length + 1)}
    not_json = {"role": "user", "content": "hi", "extra": {1, 2}}
    limit = on_store.settings.memory.max_content_length + 65_536
    picture = {"type": "input_image", "image_url": "data:image/png;base64," + "A" * limit}
    big = {"role": "user", "content": [{"type": "input_text", "text": "look"}, picture]}
    long_id = {"type": "function_call", "call_id": "c" * 300, "name": "f", "arguments": "{}"}
    for bad, code in (
        (too_long, ErrorCode.CONTENT_TOO_LONG),
        (big, ErrorCode.CONTENT_TOO_LONG),
        (long_id, ErrorCode.INVALID_ARGUMENT),
        (not_json, ErrorCode.INVALID_ARGUMENT),
        ("not an item", ErrorCode.INVALID_ARGUMENT),
    ):
        with pytest.raises(LaminaError) as err:
            asyncio.run(session.add_items([{"role": "user", "content": "one"}, bad]))
        assert err.value.code is code
    # SQLiteSession refuses what JSON cannot hold too (TypeError), before storing any of it.
    with pytest.raises(TypeError):
        asyncio.run(SQLiteSession("refused").add_items([not_json]))
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "kept"}]


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def tool_turn(body: dict[str, Any]) -> str | Reply:
    if body["messages"][-1]["role"] == "tool":
        return "It says: " + body["messages"][-1]["content"]
    return Reply(calls=[("lookup", {"topic": body["messages"][-1]["content"]})])


def test_a_run_of_the_sdk_keeps_the_same_history_in_either_session(
    on_store: Lamina, llm: FakeOpenAI
) -> None:
    llm.reply = tool_turn
    client = AsyncOpenAI(base_url=llm.base_url, api_key="sk-test", max_retries=0)
    model = OpenAIChatCompletionsModel(model="fake-model", openai_client=client)

    @function_tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"notes on {topic}"

    agent = Agent(name="assistant", instructions="Help.", model=model, tools=[lookup])

    async def run(session: Session) -> list[Any]:
        for question in ("printers", "flights"):
            await Runner.run(agent, question, session=session)
        return await session.get_items()

    ours = asyncio.run(run(LaminaSession("agents:run", on_store)))
    theirs = asyncio.run(run(SQLiteSession("run")))
    assert ours == theirs
    kinds = [i.get("type", "message") for i in ours]
    assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
    assert ours[-1]["content"][0]["text"] == "It says: notes on flights"
