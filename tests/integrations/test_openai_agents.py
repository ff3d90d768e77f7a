"""The OpenAI Agents SDK (the real package) over lamina: a session kept in lamina, memory
tools, and instructions with the session's memory, against the fake OpenAI-compatible
server through the SDK's own Chat Completions model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.memory import Session
from openai import AsyncOpenAI

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError
from lamina.integrations.openai_agents import (
    LaminaSession,
    memory_instructions,
    memory_tools,
    to_item,
    to_record,
)
from lamina.observational.models import SessionMessage
from tests.conftest import fast_settings
from tests.fakes.openai_server import FakeOpenAI, Reply

set_tracing_disabled(True)


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def agent_model(server: FakeOpenAI) -> OpenAIChatCompletionsModel:
    client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    return OpenAIChatCompletionsModel(model="fake-model", openai_client=client)


def tool_loop(body: dict[str, Any]) -> str | Reply:
    """Remember what the user says, then answer from the tool's result."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return "Noted: " + last["content"]
    return Reply(calls=[("remember", {"content": last["content"]})])


def test_a_run_keeps_its_items_in_the_session_and_uses_the_memory_tools(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    llm.reply = tool_loop

    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir)) as ms:
            session = LaminaSession("agents:alice:1", ms)
            assert isinstance(session, Session)
            agent = Agent(
                name="assistant",
                instructions="You help Alice.",
                model=agent_model(llm),
                tools=memory_tools(ms, user_id="alice"),
            )
            result = await Runner.run(agent, "I live in Lisbon", session=session)
            assert result.final_output.startswith("Noted: ")
            # The tool stored the memory for alice.
            [entry] = (await ms.memory.list(user_id="alice")).items
            assert entry.content == "I live in Lisbon"
            # The session holds the turn: user, the call, its output, the answer.
            stored = await ms.sessions.messages("agents:alice:1")
            assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
            assert stored[1].tool_calls[0]["name"] == "remember"
            items = await session.get_items()
            assert items[0] == {"role": "user", "content": "I live in Lisbon"}
            assert (
                items[1]["type"] == "function_call" and items[2]["type"] == "function_call_output"
            )
            assert await session.get_items(limit=1) == [items[-1]]

            # The next run sends the history from lamina.
            llm.reply = lambda body: "You live in Lisbon."
            await Runner.run(agent, "where do I live?", session=session)
            sent = llm.chat_requests[-1]["messages"]
            assert [m["role"] for m in sent] == [
                "system",
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
            ]
            assert sent[1]["content"] == "I live in Lisbon"

            # recall searches the identifiers' layers; bad arguments are the tool's answer.
            recall = {t.name: t for t in memory_tools(ms, user_id="alice")}["recall"]
            found = json.loads(await recall.on_invoke_tool(None, '{"query": "Lisbon", "limit": 3}'))  # type: ignore[arg-type]
            assert found["memories"][0]["content"] == "I live in Lisbon"
            bad = json.loads(await recall.on_invoke_tool(None, '{"query": 5, "limit": 3}'))  # type: ignore[arg-type]
            assert bad["error"]["code"] == "INVALID_ARGUMENT"
            broken = json.loads(await recall.on_invoke_tool(None, "not json"))  # type: ignore[arg-type]
            assert broken["error"]["code"] == "INVALID_ARGUMENT"

            # pop_item and clear_session.
            last = await session.pop_item()  # the SDK's message item, whole
            assert last is not None and last["role"] == "assistant" and last["id"]
            assert last["content"][0]["text"] == "You live in Lisbon."
            assert len(await session.get_items()) == 5
            await session.clear_session()
            assert await session.get_items() == [] and await session.pop_item() is None

    asyncio.run(scenario())


def test_instructions_bring_the_session_memory_to_a_follow_up(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        ms.context.knowledge.save("lisbon", "Alice's office is in Lisbon")
        session = LaminaSession("agents:alice:2", ms)
        agent = Agent(
            name="assistant",
            instructions=memory_instructions(
                ms, "You help Alice.", session_id="agents:alice:2", user_id="alice"
            ),
            model=agent_model(llm),
        )

        async def turns() -> None:  # on another loop than the facade's own
            await Runner.run(agent, "where is the Lisbon office?", session=session)
            await Runner.run(agent, "why?", session=session)

        asyncio.run(turns())
        system = llm.chat_requests[-1]["messages"][0]["content"]
        assert system.startswith("You help Alice.")
        assert "Alice's office is in Lisbon" in system  # the topic, not "why?"
        assert [m.content for m in ms.sessions.messages("agents:alice:2")][::2] == [
            "where is the Lisbon office?",
            "why?",
        ]


def test_items_round_trip_and_bad_input(data_dir: Path) -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "developer", "content": "be brief"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"type": "reasoning", "id": "r1", "summary": []},
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        },
    ]
    with Lamina(fast_settings(data_dir)) as ms:
        session = LaminaSession("rt", ms)
        ms._run(session.add_items(items))
        back = ms._run(session.get_items())
        assert back == items  # the developer role, the message's id and status kept
        assert ms.sessions.messages("rt")[1].role == "system"
        assert [
            to_item(SessionMessage.model_validate({**m.model_dump()}))
            for m in ms.sessions.messages("rt")
        ] == back
        assert to_record({"role": "user", "content": ""})["tool_calls"][0]["input"] == {
            "role": "user",
            "content": "",
        }
        for bad in ("", "k" * 300):
            with pytest.raises(LaminaError) as err:
                LaminaSession(bad, ms)
            assert err.value.code is ErrorCode.INVALID_ARGUMENT
        with pytest.raises(LaminaError) as err:
            memory_tools(ms, layer="galaxy")
        assert err.value.code is ErrorCode.INVALID_LAYER
        with pytest.raises(LaminaError) as err:
            memory_tools(ms, tenant="x")  # type: ignore[arg-type]
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
        with pytest.raises(LaminaError) as err:
            LaminaSession("ok", "not lamina")  # type: ignore[arg-type]
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
