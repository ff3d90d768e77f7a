"""LangChain (the real langchain-core) over lamina: the chat-message history in a chain
with RunnableWithMessageHistory, answered by the fake OpenAI-compatible server through
lamina's chat model, and the retriever over memory."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError
from lamina.config import LLMSettings
from lamina.integrations.langchain import LaminaChatMessageHistory, LaminaRetriever, to_chat
from lamina.llm import build_chat_model, request
from tests.conftest import fast_settings
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def chain(ms: Lamina, server: FakeOpenAI) -> Any:
    settings = LLMSettings(model="fake", base_url=server.base_url, max_retries=0)

    def answer(prompt: Any) -> AIMessage:
        messages = [to_chat(m) for m in prompt.to_messages()]
        system = "\n".join(m.content for m in messages if m.role == "system")
        turns = tuple(m for m in messages if m.role != "system")

        async def generate() -> str:
            model = build_chat_model(settings)
            try:
                return (await model.generate(request(*turns, system=system))).content
            finally:
                await model.aclose()

        return AIMessage(content=asyncio.run(generate()))

    prompt = ChatPromptTemplate.from_messages(
        [("system", "You help."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    respond = prompt | RunnableLambda(answer)

    def turn(question: str, session_id: str) -> AIMessage:
        """One turn with the history read from, and the turn written to, lamina."""
        history = LaminaChatMessageHistory(session_id, ms)
        reply: AIMessage = respond.invoke({"history": history.messages, "question": question})
        history.add_messages([HumanMessage(content=question), reply])
        return reply

    return turn


def test_the_history_keeps_a_chain_conversation_in_a_session(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        turn = chain(ms, llm)
        assert turn("I use vim", "lc:1").content == "echo: I use vim"
        turn("which editor?", "lc:1")
        # The second call carried the first turn, read back from lamina.
        sent = [m["content"] for m in llm.chat_requests[-1]["messages"]]
        assert sent == ["You help.", "I use vim", "echo: I use vim", "which editor?"]
        assert [m.role for m in ms.sessions.messages("lc:1")] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]
        history = LaminaChatMessageHistory("lc:1", ms)
        assert isinstance(history.messages[0], HumanMessage)

        # Tool calls and their results keep their ids; system messages are kept.
        history.add_messages(
            [
                SystemMessage(content="be brief"),
                AIMessage(
                    content="", tool_calls=[{"name": "grep", "args": {"q": "x"}, "id": "t1"}]
                ),
                ToolMessage(content="3 hits", tool_call_id="t1"),
            ]
        )
        back = history.messages[-3:]
        assert isinstance(back[0], SystemMessage) and back[0].content == "be brief"
        assert isinstance(back[1], AIMessage) and back[1].tool_calls[0]["args"] == {"q": "x"}
        assert isinstance(back[2], ToolMessage) and back[2].tool_call_id == "t1"
        history.clear()
        assert history.messages == [] and ms.sessions.messages("lc:1") == []

        for bad in ("", "k" * 300):
            with pytest.raises(LaminaError) as err:
                LaminaChatMessageHistory(bad, ms)
            assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_the_history_async_and_recent_only(data_dir: Path) -> None:
    async def scenario() -> None:
        settings = fast_settings(data_dir, observational_memory={"max_message_token_budget": 20})
        async with AsyncLamina(settings) as ms:
            history = LaminaChatMessageHistory("lc:2", ms, recent_only=True)
            await history.aadd_messages(
                [HumanMessage(content=f"message number {n} about the cluster") for n in range(5)]
            )
            recent = await history.aget_messages()
            assert 0 < len(recent) < 5 and recent[-1].content.startswith("message number 4")
            assert len(await LaminaChatMessageHistory("lc:2", ms).aget_messages()) == 5
            await history.aclear()
            assert await history.aget_messages() == []

    asyncio.run(scenario())


def test_the_retriever_searches_memory(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        ms.memory.add("Alice prefers dark mode", layer="user", user_id="alice")
        ms.memory.add("The team deploys on Tuesdays", layer="team", team_id="core")
        ms.memory.add("Bob prefers light mode", layer="user", user_id="bob")
        retriever = LaminaRetriever(lamina=ms, identifiers={"user_id": "alice"}, threshold=0.2)
        docs = retriever.invoke("which colour theme does she like?")
        assert docs[0].page_content == "Alice prefers dark mode"
        assert docs[0].metadata["layer"] == "user" and docs[0].metadata["score"] > 0
        assert all("Bob" not in d.page_content for d in docs)
        docs = asyncio.run(retriever.ainvoke("which colour theme does she like?"))
        assert docs[0].page_content == "Alice prefers dark mode"
        with pytest.raises(LaminaError) as err:
            LaminaRetriever(lamina=ms, identifiers={"customer": "x"})
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
        with pytest.raises(LaminaError) as err:
            LaminaRetriever(lamina=ms, identifiers={}).invoke("anything")
        assert err.value.code is ErrorCode.MISSING_IDENTIFIER
