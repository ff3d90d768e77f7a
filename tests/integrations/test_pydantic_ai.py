"""The pydantic-ai toolset (the real package): an agent on the fake OpenAI-compatible server
calls remember, then recall, through pydantic-ai's own OpenAI model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from lamina import ErrorCode, Lamina, LaminaError
from lamina.integrations.pydantic_ai import memory_toolset
from tests.conftest import fast_settings
from tests.fakes.openai_server import FakeOpenAI, Reply


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def script(body: dict[str, Any]) -> str | Reply:
    """remember the user's words, then recall them, then answer with what came back."""
    tool_results = [m for m in body["messages"] if m["role"] == "tool"]
    user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    if not tool_results:
        return Reply(calls=[("remember", {"content": user})])
    if len(tool_results) == 1:
        return Reply(calls=[("recall", {"query": "lives in Porto", "limit": 3})])
    return "I found: " + tool_results[-1]["content"]


def test_an_agent_remembers_and_recalls(data_dir: Path, llm: FakeOpenAI) -> None:
    llm.reply = script
    with Lamina(fast_settings(data_dir)) as ms:
        model = OpenAIChatModel(
            "fake-model", provider=OpenAIProvider(base_url=llm.base_url, api_key="sk-test")
        )
        agent = Agent(model, toolsets=[memory_toolset(ms, user_id="alice")])
        result = asyncio.run(agent.run("I live in Porto"))
        assert "I live in Porto" in result.output
        [entry] = ms.memory.list(user_id="alice").items
        assert entry.content == "I live in Porto" and entry.layer.value == "user"
        tools = {t["function"]["name"] for t in llm.chat_requests[0]["tools"]}
        assert tools == {"remember", "recall"}
        found = json.loads(result.output.removeprefix("I found: "))
        assert found["memories"][0]["content"] == "I live in Porto"

        # A bad call is the tool's answer, not a crash; nothing is stored.
        llm.reply = lambda body: (
            Reply(calls=[("remember", {"content": "  "})])
            if not [m for m in body["messages"] if m["role"] == "tool"]
            else "error: " + [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]
        )
        out = asyncio.run(agent.run("remember nothing")).output
        assert json.loads(out.removeprefix("error: "))["error"]["code"] == "INVALID_ARGUMENT"
        assert len(ms.memory.list(user_id="alice").items) == 1
        with pytest.raises(LaminaError) as err:
            memory_toolset(ms, layer="galaxy")
        assert err.value.code is ErrorCode.INVALID_LAYER


def test_remember_and_recall_round_trip_and_a_secret_in_a_shared_layer_is_refused(
    on_store: Lamina, llm: FakeOpenAI
) -> None:
    """On each store: what ``remember`` stored, ``recall`` gives back as it was written; a
    secret bound for a shared layer (project) is the tool's POLICY_VIOLATION, not stored."""

    def one_call(body: dict[str, Any]) -> str | Reply:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if results:
            return results[-1]["content"]
        name, _, argument = body["messages"][-1]["content"].partition(": ")
        key = "content" if name == "remember" else "query"
        return Reply(calls=[(name, {key: argument})])

    llm.reply = one_call
    model = OpenAIChatModel(
        "fake-model", provider=OpenAIProvider(base_url=llm.base_url, api_key="sk-test")
    )
    agent = Agent(model, toolsets=[memory_toolset(on_store, layer="project", project_id="p")])
    fact = "The staging database is db-2 (ünïcode, 'quotes' and \"more\")"
    stored = json.loads(asyncio.run(agent.run(f"remember: {fact}")).output)
    assert stored["content"] == fact and stored["layer"] == "project"
    found = json.loads(asyncio.run(agent.run("recall: which database is staging?")).output)
    assert found["memories"][0]["content"] == fact
    assert on_store.memory.get(stored["id"]).content == fact

    refused = json.loads(asyncio.run(agent.run("remember: key AKIAABCDEFGHIJKLMNOP")).output)
    assert refused["error"]["code"] == "POLICY_VIOLATION"
    assert [m.content for m in on_store.memory.list(project_id="p").items] == [fact]
