"""LaminaChatMessageHistory against LangChain's own InMemoryChatMessageHistory, and
LaminaRetriever against a retriever of LangChain's InMemoryVectorStore: one call script on
both, the same observable results, on each store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_core._api.deprecation import LangChainDeprecationWarning
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from lamina import ErrorCode, Lamina, LaminaError
from lamina.embeddings.local import LocalEmbedder
from lamina.integrations.langchain import LaminaChatMessageHistory, LaminaRetriever


def reference() -> InMemoryChatMessageHistory:
    """LangChain's own history (deprecated in langchain-core 1.6.4 for LangGraph's
    checkpointers, still the reference every BaseChatMessageHistory is held to)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=LangChainDeprecationWarning)
        return InMemoryChatMessageHistory()


def every_kind() -> list[BaseMessage]:
    """A message of every type, with every field a chat model or an agent fills in."""
    return [
        HumanMessage("What is in the repo?", name="alice", id="h-1"),
        HumanMessage([{"type": "text", "text": "a text-only "}, {"type": "text", "text": "list"}]),
        HumanMessage(
            [
                {"type": "text", "text": "and this picture"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0"}},
            ],
            additional_kwargs={"source": "upload"},
        ),
        SystemMessage("Be brief.", id="sys-1", name="policy"),
        AIMessage(
            "",
            id="run-7f3c",
            tool_calls=[
                {"name": "grep", "args": {"q": "TODO", "limit": 5}, "id": "call_1"},
                {"name": "ls", "args": {}, "id": "call_2"},
            ],
            additional_kwargs={"refusal": None},
            response_metadata={"model_name": "gpt-x", "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 12, "output_tokens": 9, "total_tokens": 21},
        ),
        ToolMessage("3 hits", tool_call_id="call_1", name="grep", artifact={"hits": [1, 2, 3]}),
        ToolMessage([{"type": "text", "text": "a.py b.py"}], tool_call_id="call_2", status="error"),
        AIMessage(
            [{"type": "text", "text": "Three TODOs.", "annotations": []}],
            name="assistant",
            response_metadata={"finish_reason": "stop"},
        ),
        AIMessage(
            "broken call",
            invalid_tool_calls=[
                {"name": "grep", "args": "{oops", "id": "call_3", "error": "bad JSON"}
            ],
        ),
        AIMessage("a call without an id", tool_calls=[{"name": "f", "args": {}, "id": None}]),
        ToolMessage("an answer to no call", tool_call_id="call_404"),
        AIMessage(""),
        HumanMessage("   "),
        AIMessageChunk("streamed", id="chunk-1"),
        ChatMessage("a critic's note", role="critic"),
        ChatMessage("an assistant's note", role="assistant"),
        FunctionMessage("42", name="legacy_function"),
        AIMessage("plain answer"),
    ]


def script(history: BaseChatMessageHistory) -> list[list[BaseMessage]]:
    """The same calls on any chat history; what each read shows (copied: the reference's
    reads are its own list, which later calls change)."""
    seen: list[list[BaseMessage]] = []
    history.add_message(HumanMessage("hello"))
    history.add_user_message("a user line")
    history.add_ai_message("an AI line")
    seen.append(list(history.messages))
    history.add_messages(every_kind())
    history.add_messages([])
    seen.append(list(history.messages))
    asyncio.run(history.aadd_messages([AIMessage("async", id="a-1"), HumanMessage("again")]))
    seen.append(list(asyncio.run(history.aget_messages())))
    history.clear()
    seen.append(list(history.messages))
    history.add_messages(every_kind()[:3])
    seen.append(list(history.messages))
    asyncio.run(history.aclear())
    seen.append(list(asyncio.run(history.aget_messages())))
    return seen


def test_the_history_shows_what_langchains_own_shows(on_store: Lamina) -> None:
    ours = script(LaminaChatMessageHistory("lc:conformance", on_store))
    theirs = script(reference())
    assert ours == theirs
    assert [len(s) for s in ours] == [3, 3 + len(every_kind()), 5 + len(every_kind()), 0, 3, 0]
    assert ours[1][3:] == every_kind()
    # Field by field too (equality of messages is pydantic's; this says what is kept).
    for mine, given in zip(ours[1][3:], every_kind(), strict=True):
        assert type(mine) is type(given) and mine.model_dump() == given.model_dump()
    assert ours[1][4].content == [
        {"type": "text", "text": "a text-only "},
        {"type": "text", "text": "list"},
    ]


def test_a_history_reads_back_on_a_new_instance_and_the_session_holds_the_text(
    on_store: Lamina,
) -> None:
    LaminaChatMessageHistory("lc:again", on_store).add_messages(every_kind())
    assert LaminaChatMessageHistory("lc:again", on_store).messages == every_kind()
    stored = on_store.sessions.messages("lc:again")
    assert [m.role for m in stored[:8]] == [
        "user",
        "user",
        "user",
        "system",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    # What observational memory reads is the text; the fields kept are not counted.
    assert stored[1].content == "a text-only list" and stored[2].content == "and this picture"
    plain = on_store.sessions.append("lc:plain", "user", "What is in the repo?")
    assert stored[0].token_count == plain.token_count
    assert [c["name"] for c in stored[4].tool_calls if not c.get("kept")] == ["grep", "ls"]
    # A ChatMessage is stored under its role when lamina has it, else as the user's.
    roles = {m.content: m.role for m in stored}
    assert roles["a critic's note"] == "user" and roles["an assistant's note"] == "assistant"


def refused(history: LaminaChatMessageHistory, messages: Any) -> LaminaError:
    with pytest.raises(LaminaError) as err:
        history.add_messages(messages)
    return err.value


def test_where_lamina_differs_it_says_so_with_a_code_and_stores_none_of_the_batch(
    on_store: Lamina,
) -> None:
    history = LaminaChatMessageHistory("lc:refused", on_store)
    history.add_messages([HumanMessage("kept")])
    too_long = HumanMessage("x" * (on_store.settings.memory.max_content_length + 1))
    assert refused(history, [HumanMessage("one"), too_long]).code is ErrorCode.CONTENT_TOO_LONG
    # Content parts (a picture) and metadata are kept up to max_content_length + 64 KiB.
    limit = on_store.settings.memory.max_content_length + 65_536
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * limit}}
    big = HumanMessage([{"type": "text", "text": "look"}, picture])
    assert refused(history, [HumanMessage("one"), big]).code is ErrorCode.CONTENT_TOO_LONG
    long_id = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c" * 300}])
    error = refused(history, [long_id])
    assert error.code is ErrorCode.INVALID_ARGUMENT and "256" in error.message
    not_json = HumanMessage("hi", additional_kwargs={"raw": b"\x00\x01"})
    assert refused(history, [HumanMessage("one"), not_json]).code is ErrorCode.INVALID_ARGUMENT
    # InMemoryChatMessageHistory appends anything; lamina takes messages only.
    assert refused(history, [HumanMessage("one"), "just a string"]).code is (
        ErrorCode.INVALID_ARGUMENT
    )
    assert refused(history, None).code is ErrorCode.INVALID_ARGUMENT
    assert history.messages == [HumanMessage("kept")]


class LocalEmbeddings(Embeddings):
    """LangChain's embeddings interface over lamina's local model: both sides of the
    retriever comparison see the same vectors."""

    def __init__(self, embedder: LocalEmbedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self.embedder.embed_sync(texts)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


FACTS = [
    ("Alice's printer is a LaserJet 4000", {"topic": "hardware"}),
    ("Alice flies to Lisbon on Friday", {"topic": "travel"}),
    ("Alice prefers dark mode in every editor", {"topic": "preferences"}),
    ("The office coffee machine is broken", {"topic": "office"}),
]
QUESTIONS = [
    "which printer does she have?",
    "when is her flight to Lisbon?",
    "what colour theme does she like?",
]


def found(retriever: BaseRetriever, query: str) -> list[Document]:
    docs = retriever.invoke(query)
    assert asyncio.run(retriever.ainvoke(query)) == docs
    assert all(isinstance(d, Document) for d in docs)
    return docs


def test_the_retriever_finds_what_an_in_memory_vector_store_finds(on_store: Lamina) -> None:
    store = InMemoryVectorStore(LocalEmbeddings(LocalEmbedder()))
    store.add_texts([t for t, _ in FACTS], metadatas=[m for _, m in FACTS])
    for text, metadata in FACTS:
        on_store.memory.add(text, layer="user", user_id="alice", metadata=metadata, dedup=False)
    theirs = store.as_retriever(search_kwargs={"k": 2})
    # No threshold, as the vector store's retriever (lamina's default is memory.search_threshold).
    ours = LaminaRetriever(lamina=on_store, identifiers={"user_id": "alice"}, k=2, threshold=0.0)
    close = LaminaRetriever(lamina=on_store, identifiers={"user_id": "alice"}, k=2)
    for question in QUESTIONS:
        assert [d.page_content for d in found(close, question)] == [
            b.page_content for b in found(ours, question)
        ][: len(close.invoke(question))]
        a, b = found(ours, question), found(theirs, question)
        assert len(a) == len(b) == 2
        # The best document is the same, with the same content and the metadata given.
        assert a[0].page_content == b[0].page_content
        assert a[0].metadata | b[0].metadata == a[0].metadata  # ours: given + lamina's own
        assert {"id", "layer", "score", "created_at"} <= set(a[0].metadata)
        assert a[0].id == a[0].metadata["id"] and b[0].id is not None
    # Both answer a batch, as a Runnable does.
    assert [len(d) for d in ours.batch(QUESTIONS)] == [len(d) for d in theirs.batch(QUESTIONS)]


def test_the_retriever_refuses_what_it_cannot_search(on_store: Lamina) -> None:
    retriever = LaminaRetriever(lamina=on_store, identifiers={"user_id": "alice"})
    with pytest.raises(LaminaError) as err:
        retriever.invoke("x" * 100_000)
    assert err.value.code is ErrorCode.QUERY_TOO_LONG
    # A vector store's retriever answers an empty query with documents; lamina refuses it.
    for empty in ("", "   "):
        with pytest.raises(LaminaError) as err:
            asyncio.run(retriever.ainvoke(empty))
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert retriever.invoke("anything at all") == []
