"""ms.context end to end on the embedded store: the four layer stores, retrieval, prompts."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.context.models import ContextLayer
from lamina.context.providers import (
    RuntimeContextAdapter,
    ToolDescriptor,
    ToolRegistryAdapter,
)
from lamina.tokens import default_counter
from tests.conftest import fast_settings, openai_settings
from tests.fakes.openai_server import Failure, FakeOpenAI


def code_of(call: Any, *args: Any, **kwargs: Any) -> ErrorCode:
    with pytest.raises(LaminaError) as err:
        call(*args, **kwargs)
    return err.value.code


@pytest.fixture
def filled(ms: Lamina) -> Lamina:
    ctx = ms.context
    ctx.knowledge.save("deploy-day", "Deployments happen on Tuesdays only", category="rule")
    ctx.knowledge.save("db", "The production database is PostgreSQL 16", tags=["infra"])
    ctx.learnings.save(
        "connection reset by the database",
        "retry with exponential backoff",
        diagnosis="the pool hands out dead connections",
        category="tool_error",
    )
    ctx.skills.save("release", "Cut a release: tag, build and publish", type="script")
    ctx.references.save(
        "runbook", "https://wiki.example/runbook", summary="Incident runbook for the database"
    )
    return ms


class RecordingTools:
    """A user-supplied tool provider that records each search it is asked for."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[str] = []
        self.fail = fail
        self.inner = ToolRegistryAdapter(
            [ToolDescriptor(f"tool_{i}", f"does thing {i}") for i in range(5)]
            + [ToolDescriptor("query_db", "Run SQL against the production database")]
        )

    def list_tools(self) -> list[ToolDescriptor]:
        return self.inner.list_tools()

    def search_tools(self, query: str, limit: int) -> list[ToolDescriptor]:
        self.calls.append(query)
        if self.fail:
            raise RuntimeError("tool registry is down")
        return self.inner.search_tools(query, limit)


def test_knowledge_versions_use_counts_and_relevance(filled: Lamina) -> None:
    k = filled.context.knowledge
    newer = k.save("deploy-day", "Deployments happen on Tuesdays and Thursdays", category="rule")
    assert newer.version == 2 and newer.is_latest
    assert [v.version for v in k.versions("deploy-day")] == [2, 1]
    assert k.get("deploy-day").content.endswith("Thursdays")
    assert k.list().total_count == 2
    before = k.get("deploy-day").use_count
    filled.context.retrieve("when are deployments", layers=["user_knowledge"])
    filled.context.flush()  # use counts are written in the background
    assert k.get("deploy-day").use_count == before + 1
    # Saving a new version keeps the use count.
    assert k.save("deploy-day", "Deployments: Tuesdays", category="rule").use_count == before + 1
    # A demoted item ranks below an equally matching one.
    k.save("a", "Coffee is served at nine", relevance_score=0.2)
    k.save("b", "Coffee is served at nine sharp")
    result = filled.context.retrieve("coffee served nine", layers=["user_knowledge"])
    assert [i.key for i in result.items[ContextLayer.USER_KNOWLEDGE]][:2] == ["b", "a"]


def test_learnings_count_occurrences_and_outcomes(filled: Lamina) -> None:
    ln = filled.context.learnings
    again = ln.save("Connection  RESET by the database", diagnosis="")
    assert again.occurrence_count == 2
    assert again.fix == "retry with exponential backoff"  # kept: this save left it empty
    assert again.category.value == "tool_error"
    assert again.confidence == 0.5
    better = ln.record_outcome("connection reset by the database", True)
    assert better.confidence == pytest.approx(2 / 3, abs=1e-6)
    worse = ln.record_outcome("connection reset by the database", False)
    assert (worse.success_count, worse.confidence) == (1, 0.5)
    assert ln.get("CONNECTION reset by the database").id == worse.id
    assert code_of(ln.record_outcome, "never happened", True) is ErrorCode.ITEM_NOT_FOUND
    hits = ln.search("the database keeps resetting connections")
    assert hits[0].item.fix == "retry with exponential backoff"
    assert ln.list(category="tool_error").total_count == 1
    assert ln.delete("connection reset by the DATABASE") == 1
    assert ln.list().total_count == 0


def test_skills_and_references(filled: Lamina) -> None:
    sk, refs = filled.context.skills, filled.context.references
    updated = sk.save(
        "release",
        "Cut a release: tag, build, sign, publish",
        type="script",
        parameters={"version": {"type": "string"}},
    )
    assert updated.version == 2 and updated.parameters["version"] == {"type": "string"}
    assert sk.list(type="script").total_count == 1 and sk.list(type="template").total_count == 0
    assert sk.search("how do I publish a release")[0].item.name == "release"
    ref = refs.get("runbook")
    assert (ref.location, ref.ref_type) == ("https://wiki.example/runbook", "url")
    assert refs.search("incident")[0].item.name == "runbook"
    assert refs.delete("runbook") == 1
    assert code_of(refs.get, "runbook") is ErrorCode.ITEM_NOT_FOUND
    assert code_of(refs.delete, "runbook") is ErrorCode.ITEM_NOT_FOUND


def test_retrieve_default_and_explicit_layers(filled: Lamina) -> None:
    tools = RecordingTools()
    filled.context.tool_registry = tools
    filled.context.runtime_context = RuntimeContextAdapter(active_tool_count=6)
    result = filled.context.retrieve("the production database keeps resetting connections")
    assert set(result.items) == {
        ContextLayer.USER_KNOWLEDGE,
        ContextLayer.SKILL_PATTERNS,
        ContextLayer.EXTERNAL_KNOWLEDGE,
        ContextLayer.AGENT_LEARNINGS,
    }
    assert tools.calls == []  # tools are asked for explicitly
    assert result.items[ContextLayer.USER_KNOWLEDGE][0].key == "db"
    learning = result.items[ContextLayer.AGENT_LEARNINGS][0]
    assert learning.fields["fix"] == "retry with exponential backoff"
    assert learning.layer is ContextLayer.AGENT_LEARNINGS and learning.category == "tool_error"
    assert result.items[ContextLayer.EXTERNAL_KNOWLEDGE][0].source.startswith("https://")

    only = filled.context.retrieve(
        "production database", layers=["tool_registry", "runtime_context"], session_key="x"
    )
    assert set(only.items) == {ContextLayer.TOOL_REGISTRY, ContextLayer.RUNTIME_CONTEXT}
    assert [i.key for i in only.items[ContextLayer.TOOL_REGISTRY]] == ["query_db"]
    runtime = only.items[ContextLayer.RUNTIME_CONTEXT]
    assert [i.key for i in runtime] == ["session-state"]
    assert "Tools: 6" in runtime[0].content

    for n in range(12):
        filled.context.knowledge.save(f"db-{n}", f"database fact number {n}")
    capped = filled.context.retrieve("database fact", max_per_layer=3)
    assert all(len(items) <= 3 for items in capped.items.values())
    assert len(capped.items[ContextLayer.USER_KNOWLEDGE]) == 3


def test_layers_without_providers_return_nothing(filled: Lamina) -> None:
    result = filled.context.retrieve(
        "database",
        layers=["tool_registry", "runtime_context", "observations", "reflections"],
        session_key="s1",
    )
    assert all(items == [] for items in result.items.values()) and len(result.items) == 4


def test_queries_without_keywords_touch_no_layer(filled: Lamina) -> None:
    tools = RecordingTools()
    filled.context.tool_registry = tools
    for query in ["", "   ", "?!...", "the a is of and", "I"]:
        result = filled.context.retrieve(query, layers=["tool_registry", "user_knowledge"])
        assert result.items == {} and result.keywords == []
    assert tools.calls == []


def test_a_failing_layer_is_logged_and_the_others_return(
    filled: Lamina, caplog: pytest.LogCaptureFixture
) -> None:
    filled.context.tool_registry = RecordingTools(fail=True)
    with caplog.at_level(logging.WARNING, logger="lamina.context.retriever"):
        result = filled.context.retrieve(
            "production database", layers=["tool_registry", "user_knowledge"]
        )
    assert result.items[ContextLayer.TOOL_REGISTRY] == []
    assert result.items[ContextLayer.USER_KNOWLEDGE][0].key == "db"
    assert "tool_registry failed" in caplog.text and "tool registry is down" in caplog.text


def test_bad_input_gets_clear_codes_and_stores_nothing(filled: Lamina) -> None:
    ctx = filled.context
    k, ln, sk, rf = ctx.knowledge, ctx.learnings, ctx.skills, ctx.references
    cases = [
        (ErrorCode.INVALID_LAYER, ctx.retrieve, ("db",), {"layers": ["bogus"]}),
        (ErrorCode.INVALID_LAYER, ctx.retrieve, ("db",), {"layers": "user_knowledge,nope"}),
        (ErrorCode.INVALID_ARGUMENT, ctx.retrieve, ("db",), {"max_per_layer": 0}),
        (ErrorCode.INVALID_ARGUMENT, ctx.retrieve, ("db",), {"max_per_layer": -3}),
        (ErrorCode.INVALID_ARGUMENT, ctx.retrieve, ("db",), {"max_per_layer": True}),
        (ErrorCode.INVALID_ARGUMENT, ctx.retrieve, (42,), {}),
        (ErrorCode.QUERY_TOO_LONG, ctx.retrieve, ("database " * 1000,), {}),
        (ErrorCode.INVALID_ARGUMENT, k.save, ("", "x"), {}),
        (ErrorCode.INVALID_ARGUMENT, k.save, ("k", "   "), {}),
        (ErrorCode.INVALID_ARGUMENT, k.save, ("k", "x"), {"category": "gossip"}),
        (ErrorCode.INVALID_ARGUMENT, k.save, ("k", "x"), {"tags": "not-a-list"}),
        (ErrorCode.INVALID_ARGUMENT, k.save, ("k", "x"), {"relevance_score": 2}),
        (ErrorCode.INVALID_ARGUMENT, k.save, ("k" * 300, "x"), {}),
        (ErrorCode.CONTENT_TOO_LONG, k.save, ("k", "x" * 70_000), {}),
        (ErrorCode.INVALID_ARGUMENT, k.search, ("",), {}),
        (ErrorCode.QUERY_TOO_LONG, k.search, ("q" * 5000,), {}),
        (ErrorCode.INVALID_ARGUMENT, k.search, ("db",), {"limit": 0}),
        (ErrorCode.INVALID_ARGUMENT, k.search, ("db",), {"mode": "fuzzy"}),
        (ErrorCode.INVALID_ARGUMENT, k.list, (), {"cursor": "not-a-cursor"}),
        (ErrorCode.INVALID_ARGUMENT, k.list, (), {"limit": 10**9}),
        (ErrorCode.ITEM_NOT_FOUND, k.get, ("missing",), {}),
        (ErrorCode.INVALID_ARGUMENT, ln.save, ("",), {}),
        (ErrorCode.INVALID_ARGUMENT, ln.save, ("t",), {"category": "oops"}),
        (ErrorCode.INVALID_ARGUMENT, ln.record_outcome, ("t", "yes"), {}),
        (ErrorCode.INVALID_ARGUMENT, sk.save, ("s", "d"), {"type": "macro"}),
        (ErrorCode.INVALID_ARGUMENT, sk.save, ("s", "d"), {"parameters": [1, 2]}),
        (ErrorCode.INVALID_ARGUMENT, rf.save, ("r", ""), {}),
        (ErrorCode.INVALID_ARGUMENT, rf.save, ("r", "loc"), {"metadata": {"x": float("nan")}}),
        (ErrorCode.INVALID_ARGUMENT, k.save, ("k", "x"), {"tenant_id": 5}),
        (ErrorCode.MISSING_IDENTIFIER, k.save, ("k", "x"), {"tenant_id": " "}),
    ]
    for code, call, args, kwargs in cases:
        assert code_of(call, *args, **kwargs) is code, (call.__name__, args, kwargs)
    assert k.list().total_count == 2 and ln.list().total_count == 1
    assert sk.list().total_count == 1 and rf.list().total_count == 1
    assert k.get("deploy-day").version == 1


def test_tenants_are_separate(filled: Lamina) -> None:
    k = filled.context.knowledge
    k.save("db", "Tenant two runs MySQL", tenant_id="two")
    assert k.get("db", tenant_id="two").content == "Tenant two runs MySQL"
    assert k.get("db").content.startswith("The production database")
    result = filled.context.retrieve("which database runs MySQL", tenant_id="two")
    contents = [i.content for i in result.items[ContextLayer.USER_KNOWLEDGE]]
    assert contents == ["Tenant two runs MySQL"]


def test_build_prompt_with_memories_and_degradation(filled: Lamina) -> None:
    filled.memory.add("User prefers answers in German", layer="user", user_id="u1")
    filled.memory.add(
        "In this chat the user is debugging replication",
        layer="session",
        user_id="u1",
        session_id="s1",
    )
    filled.memory.add(
        "Another chat: the user planned a holiday",
        layer="session",
        user_id="u1",
        session_id="s2",
    )
    prompt = filled.context.build_prompt(
        "Be brief.",
        "is the user still debugging the database replication?",
        session_key="s1",
        identifiers={"user_id": "u1"},
    )
    assert prompt.startswith("Be brief.\n\n## User Knowledge")
    memories = prompt.split("## Relevant Memories\n", 1)[1]
    assert "debugging replication" in memories
    assert "holiday" not in memories  # another session's memory
    german = filled.context.build_prompt(
        "Be brief.", "in which language should answers be?", identifiers={"user_id": "u1"}
    )
    memories = german.split("## Relevant Memories\n", 1)[1]
    assert "German" in memories and "debugging" not in memories  # no session: none of its
    assert filled.context.build_prompt("Base.", "?!") == "Base."
    with pytest.raises(LaminaError) as err:
        filled.context.build_prompt("Base.", "db", layers=["nope"])
    assert err.value.code is ErrorCode.INVALID_LAYER


def test_relevant_memories_spend_at_most_their_token_budget(data_dir: Path) -> None:
    """context.rag_token_budget bounds the Relevant Memories section (heading included): a
    long memory is passed over for shorter ones that fit, and the prompt's memory ids are
    those of the memories it shows."""
    short = [
        "The deploy pipeline runs on GitHub Actions",
        "Deploy pipeline failures page the on-call engineer",
        "The deploy pipeline needs a second reviewer on Fridays",
    ]
    long = "The deploy pipeline once stalled." + " A runner lost its cached layers." * 60
    query = "how does the deploy pipeline run?"

    def relevant(**context: Any) -> tuple[str, list[str]]:
        with Lamina(fast_settings(data_dir, context={"rag_threshold": 0.0, **context})) as ms:
            if not ms.memory.list(user_id="u1").items:
                for note in [*short, long]:
                    ms.memory.add(note, layer="user", user_id="u1")
            built = ms.context.compose_prompt("", query, identifiers={"user_id": "u1"})
            section = built.text.split("\n\n## Conversation Memory")[0]
            assert section.startswith("## Relevant Memories\n")
            shown = [ms.memory.get(i).content for i in built.memory_ids]
            assert section == "## Relevant Memories\n" + "\n".join(f"- {m}" for m in shown)
            return section, shown

    section, shown = relevant(rag_token_budget=None)
    assert sorted(shown) == sorted([*short, long])  # rag_limit (6) binds, not tokens
    section, shown = relevant()  # the default budget: 220 tokens
    assert sorted(shown) == sorted(short)
    assert default_counter().count(section) <= 220 < default_counter().count(long)
    section, shown = relevant(rag_limit=2)
    assert len(shown) == 2 and set(shown) <= set(short)
    # The spare memories the budget looks at stay within memory.max_limit (the search
    # refused rag_limit + 4 = 10 above it, and the section was left out).
    capped = fast_settings(data_dir, memory={"max_limit": 6}, context={"rag_threshold": 0.0})
    with Lamina(capped) as ms:
        built = ms.context.compose_prompt("", query, identifiers={"user_id": "u1"})
        assert sorted(ms.memory.get(i).content for i in built.memory_ids) == sorted(short)


def test_layer_retrieval_survives_an_embedding_failure(
    data_dir: Path, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    with Lamina(openai_settings(data_dir, fake_openai)) as ms:
        ms.context.knowledge.save("db", "The production database is PostgreSQL 16")
        fake_openai.fail_next(Failure(400))  # the query's embedding is refused
        with caplog.at_level(logging.WARNING):
            result = ms.context.retrieve("production database")
    assert result.items[ContextLayer.USER_KNOWLEDGE][0].key == "db"
    assert "keyword search only" in caplog.text


def test_a_prompt_embeds_its_query_once(data_dir: Path, fake_openai: FakeOpenAI) -> None:
    with Lamina(openai_settings(data_dir, fake_openai)) as ms:
        ms.context.knowledge.save("db", "The production database is PostgreSQL 16")
        ms.memory.add("User manages the database cluster", layer="user", user_id="u1")
        before = len(fake_openai.embedded)
        query = "which database do we run in production"
        ms.context.build_prompt("Base.", query, session_key="s1", identifiers={"user_id": "u1"})
        # Retrieval and the memory search ran concurrently and shared one embedding.
        assert fake_openai.embedded[before:] == [query]
        ms.context.build_prompt("Base.", query, session_key="s1", identifiers={"user_id": "u1"})
        assert len(fake_openai.embedded) == before + 1


def test_every_layer_shares_its_search_and_list_options(filled: Lamina) -> None:
    """Each layer's search and list take their own filter by name (category, type, ref_type)
    and the options every layer shares (lamina.context.layer_store.SearchOptions / ListOptions);
    an unknown keyword is a TypeError, as for any call."""
    ctx = filled.context
    for store, name, value, query in (
        (ctx.knowledge, "category", "rule", "deployments"),
        (ctx.learnings, "category", "tool_error", "connection reset"),
        (ctx.skills, "type", "script", "release"),
        (ctx.references, "ref_type", "url", "incident runbook"),
    ):
        page = store.list(**{name: value}, limit=1, tags=None, cursor=None)
        assert (page.total_count, len(page.items)) == (1, 1)
        hits = store.search(query, **{name: value}, limit=1, mode="keyword", min_score=0.0)
        assert len(hits) == 1 and hits[0].item.id == page.items[0].id
        assert store.list(**{name: value}, tenant_id="elsewhere").total_count == 0
        with pytest.raises(TypeError, match="list\\(\\) got an unexpected keyword argument"):
            store.list(kind=value)
        with pytest.raises(TypeError, match="'page_size'"):
            store.search(query, page_size=3)
    assert code_of(ctx.skills.list, type="galaxy") is ErrorCode.INVALID_ARGUMENT
