"""The LangGraph store over lamina memory, with the real langgraph package: the BaseStore
operations (sync and async), namespaces mapped to layers, filters, semantic search, and a
compiled graph whose nodes read and write it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from lamina import AsyncLamina, ErrorCode, Lamina, LaminaError
from lamina.integrations.langgraph import LaminaStore
from tests.conftest import fast_settings

ALICE = ("user", "alice", "prefs")


def test_put_get_search_delete_and_namespaces(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        store = LaminaStore(ms, scope={"layer": "project", "project_id": "graph"})
        assert isinstance(store, BaseStore)
        store.put(ALICE, "theme", {"content": "Alice prefers dark mode", "priority": 2})
        store.put(ALICE, "editor", {"content": "Alice edits in vim", "priority": 5})
        store.put(("user", "alice", "notes"), "n1", {"text": "Met Bob on Tuesday"})
        store.put(("docs", "runbooks"), "r1", {"title": "Failover", "status": "active"})

        item = store.get(ALICE, "theme")
        assert item is not None and item.value["priority"] == 2
        assert item.namespace == ALICE and item.key == "theme"
        # The namespace chose the layer: alice's user memories hold it.
        contents = {m.content for m in ms.memory.list(user_id="alice").items}
        assert "Alice prefers dark mode" in contents
        # Others go to the default scope, stored as JSON text.
        assert ms.memory.list(project_id="graph").items[0].content.startswith('{"status"')

        # Put again: replaced, not duplicated.
        store.put(ALICE, "theme", {"content": "Alice prefers light mode", "priority": 3})
        assert store.get(ALICE, "theme").value["content"] == "Alice prefers light mode"  # type: ignore[union-attr]
        assert len(store.search(ALICE)) == 2

        # Filters on the value, with LangGraph's operators; prefixes.
        assert [i.key for i in store.search(ALICE, filter={"priority": {"$gte": 4}})] == ["editor"]
        assert [i.key for i in store.search(ALICE, filter={"priority": 3})] == ["theme"]
        assert {i.key for i in store.search(("user", "alice"))} == {"theme", "editor", "n1"}
        assert [i.key for i in store.search(("user", "alice"), limit=1, offset=2)] != []
        # Semantic search, best first, with a score.
        [best, *_] = store.search(("user", "alice"), query="which text editor does she use?")
        assert best.key == "editor" and best.score is not None and best.score > 0

        assert store.list_namespaces(prefix=("user", "alice")) == [
            ("user", "alice", "notes"),
            ("user", "alice", "prefs"),
        ]
        assert store.list_namespaces(prefix=("user", "alice"), max_depth=2) == [("user", "alice")]
        assert store.list_namespaces(prefix=("user", "alice"), suffix=("notes",)) == [
            ("user", "alice", "notes")
        ]
        # Without a prefix: every namespace the store holds, the default scope's too.
        assert store.list_namespaces() == [
            ("docs", "runbooks"),
            ("user", "alice", "notes"),
            ("user", "alice", "prefs"),
        ]

        store.delete(ALICE, "theme")
        assert store.get(ALICE, "theme") is None
        store.delete(ALICE, "theme")  # deleting again is no error
        assert [i.key for i in store.search(ALICE)] == ["editor"]


def test_bad_namespaces_and_filters_are_clear_errors(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        store = LaminaStore(ms)  # no default scope
        store.put(ALICE, "theme", {"content": "kept"})
        for call in (
            lambda: store.put(("docs",), "k", {"content": "x"}),
            lambda: store.put(("agent", "bot"), "k", {"content": "x"}),  # needs user_id too
        ):
            with pytest.raises(LaminaError) as err:
                call()
            assert err.value.code is ErrorCode.INVALID_ARGUMENT
        with pytest.raises(LaminaError) as err:
            store.search(ALICE, filter={"priority": {"$regex": "x"}})
        assert err.value.code is ErrorCode.INVALID_FILTER
        with pytest.raises(LaminaError) as err:
            LaminaStore(ms, scope={"layer": "galaxy"})
        assert err.value.code is ErrorCode.INVALID_LAYER
        assert store.get(ALICE, "theme").value == {"content": "kept"}  # type: ignore[union-attr]
        # Reads of a namespace nothing can be stored in find nothing, as LangGraph's do.
        assert store.get(("docs",), "k") is None
        assert store.search(("docs",)) == []
        agent = ("agent", "bot", "alice")
        store.put(agent, "k", {"content": "the bot's own note"})
        entry = ms.memory.list(agent_id="bot", user_id="alice", layers=["agent"]).items[0]
        assert entry.identifiers == {"agent_id": "bot", "user_id": "alice"}


class State(TypedDict):
    user: str
    said: str
    answer: str


def remember(state: State) -> dict[str, Any]:
    get_store().put(("user", state["user"], "facts"), "said", {"content": state["said"]})
    return {}


def recall(state: State) -> dict[str, Any]:
    hits = get_store().search(("user", state["user"]), query="where does the user live?")
    return {"answer": hits[0].value["content"] if hits else ""}


async def aremember(state: State) -> dict[str, Any]:
    await get_store().aput(("user", state["user"], "facts"), "said", {"content": state["said"]})
    return {}


async def arecall(state: State) -> dict[str, Any]:
    hits = await get_store().asearch(("user", state["user"]), query="where does the user live?")
    return {"answer": hits[0].value["content"] if hits else ""}


def graph(nodes: tuple[Any, Any], store: BaseStore) -> Any:
    builder = StateGraph(State)
    builder.add_node("remember", nodes[0])
    builder.add_node("recall", nodes[1])
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def test_a_compiled_graph_uses_it_sync_and_async(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir)) as ms:
        app = graph((remember, recall), LaminaStore(ms))
        out = app.invoke({"user": "bob", "said": "Bob lives in Lisbon", "answer": ""})
        assert out["answer"] == "Bob lives in Lisbon"
        assert ms.memory.list(user_id="bob").items[0].content == "Bob lives in Lisbon"

    async def scenario() -> None:
        async with AsyncLamina(fast_settings(data_dir)) as ams:
            app = graph((aremember, arecall), LaminaStore(ams))
            out = await app.ainvoke({"user": "eve", "said": "Eve lives in Oslo", "answer": ""})
            assert out["answer"] == "Eve lives in Oslo"
            # The blocking methods cannot run on lamina's own loop: a clear error.
            with pytest.raises(LaminaError) as err:
                LaminaStore(ams).get(("user", "eve", "facts"), "said")
            assert err.value.code is ErrorCode.CONFIGURATION_ERROR
            item = await LaminaStore(ams).aget(("user", "eve", "facts"), "said")
            assert item is not None and item.value["content"] == "Eve lives in Oslo"

    asyncio.run(scenario())
