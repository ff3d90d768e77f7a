"""No door drops a write: the same text written 1,000 times through each adapter is read
back 1,000 times (chat histories and sessions keep every message; memory's write-time dedup
is not on their path), on each store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from lamina import Lamina
from lamina.integrations.langchain import LaminaChatMessageHistory
from lamina.integrations.openai_agents import LaminaSession
from lamina.integrations.pydantic_ai import memory_toolset
from tests.fakes.openai_server import FakeOpenAI, Reply

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

N = 1_000
TEXT = "The deploy window is Tuesday at 10:00"


def test_a_chat_history_keeps_a_thousand_identical_messages(on_store: Lamina) -> None:
    history = LaminaChatMessageHistory("lc:same", on_store)
    history.add_messages([HumanMessage(TEXT) for _ in range(N)])
    asyncio.run(history.aadd_messages([HumanMessage(TEXT)]))
    back = LaminaChatMessageHistory("lc:same", on_store).messages
    assert len(back) == N + 1 and all(m == HumanMessage(TEXT) for m in back)
    assert [m.index for m in on_store.sessions.messages("lc:same")] == list(range(N + 1))


def test_a_session_keeps_a_thousand_identical_items(on_store: Lamina) -> None:
    session = LaminaSession("agents:same", on_store)
    asyncio.run(session.add_items([{"role": "user", "content": TEXT} for _ in range(N)]))
    back = asyncio.run(session.get_items())
    assert back == [{"role": "user", "content": TEXT}] * N
    assert len(asyncio.run(session.get_items(limit=N - 1))) == N - 1


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def test_a_thousand_remember_calls_each_answer_with_a_stored_memory(
    on_store: Lamina, llm: FakeOpenAI
) -> None:
    """The toolset's ``remember`` adds a fact: the same fact again in the same scope answers
    with the stored one (memory.dedup, docs/memory.md), so every call's answer names a
    memory that is there; distinct facts are each stored."""
    distinct = [f"{TEXT}, note {n}" for n in range(50)]

    def calls(body: dict[str, Any]) -> str | Reply:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if results:
            return json.dumps([json.loads(r["content"])["id"] for r in results])
        texts = [TEXT] * N if "same" in body["messages"][-1]["content"] else distinct
        return Reply(calls=[("remember", {"content": t}) for t in texts])

    llm.reply = calls
    model = OpenAIChatModel(
        "fake-model", provider=OpenAIProvider(base_url=llm.base_url, api_key="sk-test")
    )
    agent = Agent(model, toolsets=[memory_toolset(on_store, user_id="alice")])
    same = json.loads(asyncio.run(agent.run("remember the same")).output)
    assert len(same) == N and len(set(same)) == 1
    assert on_store.memory.get(same[0]).content == TEXT
    ids = json.loads(asyncio.run(agent.run("remember each")).output)
    assert len(set(ids)) == len(distinct)
    stored = on_store.memory.list(user_id="alice", limit=N).items
    assert sorted(m.content for m in stored) == sorted([TEXT, *distinct])
