"""Keyword extraction, prompt assembly (with its budget property) and the providers."""

from __future__ import annotations

import random
import threading

import pytest

from lamina.context.keywords import extract_keywords
from lamina.context.models import ContextItem, ContextLayer
from lamina.context.prompt import (
    assemble_prompt,
    memories_section,
    memory_section,
    pack_memories,
)
from lamina.context.providers import (
    RuntimeContextAdapter,
    ToolDescriptor,
    ToolRegistryAdapter,
    channel_of,
    session_scope,
)
from lamina.errors import ErrorCode, LaminaError
from lamina.tokens import HeuristicTokenCounter


def test_keywords_follow_the_rules() -> None:
    assert extract_keywords("What is the status of the CI pipeline?") == [
        "status",
        "ci",
        "pipeline",
    ]
    # Two-character technical terms stay; one-character words and stop words go.
    assert extract_keywords("Is Go or JS better for a UI on OS X?") == [
        "go",
        "js",
        "better",
        "ui",
        "os",
    ]
    # "IT" in capitals is the department, "it" the pronoun.
    assert extract_keywords("Ask IT about it") == ["ask", "it"]
    assert extract_keywords("'quoted' (parens) [brackets] end.") == [
        "quoted",
        "parens",
        "brackets",
        "end",
    ]
    assert extract_keywords("node.js, c++ and gpt-4!") == ["node.js", "c++", "gpt-4"]
    assert extract_keywords("Deploy deploy DEPLOY") == ["deploy"]
    assert extract_keywords("") == []
    assert extract_keywords("?! ... the a is of") == []
    assert len(extract_keywords(" ".join(f"word{i}" for i in range(100)))) == 12
    assert extract_keywords("x" * 60 + " ok") == ["ok"]


def item(layer: ContextLayer, key: str, content: str = "", **fields: object) -> ContextItem:
    return ContextItem(layer=layer, key=key, content=content, score=1.0, fields=dict(fields))


def test_nothing_retrieved_gives_the_base_prompt_unchanged() -> None:
    assert assemble_prompt("You are helpful.  ", []) == "You are helpful.  "
    assert assemble_prompt("base", {}, [], []) == "base"


def test_sections_come_in_the_specified_order_and_format() -> None:
    items = [
        item(
            ContextLayer.EXTERNAL_KNOWLEDGE,
            "wiki",
            name="wiki",
            location="https://w",
            summary="Team wiki",
        ),
        item(ContextLayer.SKILL_PATTERNS, "release", name="release", description="Cut one"),
        item(ContextLayer.AGENT_LEARNINGS, "timeout", trigger="DB timeout", fix="Raise it"),
        item(ContextLayer.AGENT_LEARNINGS, "flaky", trigger="Flaky test"),
        ContextItem(
            layer=ContextLayer.USER_KNOWLEDGE, key="tz", content="CET", score=1, category="fact"
        ),
        item(ContextLayer.TOOL_REGISTRY, "grep", name="grep", description="Search files"),
        item(ContextLayer.RUNTIME_CONTEXT, "session-state", "Session: s | Channel: direct"),
    ]
    prompt = assemble_prompt("Base.", items, ["R1"], ["O1"], memories=["remembered"])
    assert prompt == (
        "Base.\n\n"
        "## Runtime Context\n- Session: s | Channel: direct\n\n"
        "## Available Tools\n- **grep**: Search files\n\n"
        "## User Knowledge\n- [fact] tz: CET\n\n"
        "## Known Solutions\n- When 'DB timeout' occurs: Raise it\n- When 'Flaky test' occurs\n\n"
        "## Available Skills\n- release: Cut one\n\n"
        "## External References\n- wiki (https://w): Team wiki\n\n"
        "## Relevant Memories\n- remembered\n\n"
        "## Conversation Memory\n\n### Summary\nR1\n\n### Recent Observations\n- O1"
    )


def test_relevant_memories_are_packed_best_first_within_their_budget() -> None:
    counter = HeuristicTokenCounter()
    memories = ["a" * 40, "b" * 400, "   ", "c" * 40, "d" * 40, "e" * 40]  # 10/100/-/10 tokens
    # No budget: the first ``limit`` with text, in order (a blank one is never shown).
    assert pack_memories(memories, 3, None, counter) == [0, 1, 3]
    # Room for the heading and three short ones: the long one is passed over for the next
    # ones that fit, and the limit still binds.
    budget = counter.count(memories_section(memories[3:5] + memories[:1]))
    assert pack_memories(memories, 10, budget, counter) == [0, 3, 4]
    assert pack_memories(memories, 2, budget, counter) == [0, 3]
    # The best memory shows whatever its length: a relevant memory never leaves the section
    # empty; the budget binds from the second on.
    assert pack_memories(memories[1:], 10, 5, counter) == [0]
    shown = memories_section([memories[i] for i in pack_memories(memories, 10, budget, counter)])
    assert counter.count(shown) <= budget
    assert shown == "## Relevant Memories\n- " + "\n- ".join(["a" * 40, "c" * 40, "d" * 40])
    assert memories_section(["  ", ""]) == ""


def test_the_memory_budget_keeps_reflections_first_and_the_newest() -> None:
    counter = HeuristicTokenCounter()
    reflections = ["r" * 400, "s" * 400]  # 100 tokens each, oldest first
    observations = ["o" * 200, "p" * 200, "q" * 200]  # oldest first
    whole = memory_section(reflections, observations, 10_000, counter)
    assert "### Summary" in whole and whole.count("\n- ") == 3
    # Shown oldest first, as stored.
    assert whole.index("r" * 400) < whole.index("s" * 400)
    assert whole.index("o" * 200) < whole.index("p" * 200) < whole.index("q" * 200)
    # Room for both reflections and one observation: the newest one stays, the older ones
    # are dropped.
    budget = counter.count(memory_section(reflections, observations[-1:], 10_000, counter))
    cut = memory_section(reflections, observations, budget, counter)
    assert "q" * 200 in cut and "p" * 200 not in cut and "o" * 200 not in cut
    two = counter.count(memory_section(reflections, observations[-2:], 10_000, counter))
    cut = memory_section(reflections, observations, two, counter)
    assert cut.index("p" * 200) < cut.index("q" * 200) and "o" * 200 not in cut
    # Reflections alone over the budget: the newest that fit and no observations at all.
    tight = memory_section(reflections, observations, 120, counter)
    assert "s" * 400 in tight and "r" * 400 not in tight and "Observations" not in tight
    assert memory_section(reflections, observations, 5, counter) == ""


def test_property_the_memory_section_never_exceeds_its_budget() -> None:
    counter = HeuristicTokenCounter()
    rng = random.Random(1234)
    alphabet = "abcdefghij klmnop 東京大学 ü."
    for _ in range(600):
        refl = [
            "".join(rng.choices(alphabet, k=rng.randint(0, 300))) for _ in range(rng.randint(0, 6))
        ]
        obs = [
            "".join(rng.choices(alphabet, k=rng.randint(0, 200))) for _ in range(rng.randint(0, 30))
        ]
        budget = rng.randint(0, 1500)
        section = memory_section(refl, obs, budget, counter)
        assert counter.count(section) <= budget
        prompt = assemble_prompt("base", [], refl, obs, token_budget=budget)
        assert counter.count(prompt[len("base") :].strip()) <= budget


def test_token_heuristic() -> None:
    counter = HeuristicTokenCounter()
    assert counter.count("abcd" * 10) == 10
    assert counter.count("東京大学") == 2
    assert counter.count("") == 0
    assert counter.count_messages(["abcd", "abcdefgh"]) == 1 + 2 + 8


def test_tool_registry_adapter_copies_and_searches_case_insensitively() -> None:
    tools = [
        ToolDescriptor("Deploy", "Ship a SERVICE"),
        {"name": "query_db", "description": "Run SQL"},
    ]
    adapter = ToolRegistryAdapter(tools)
    tools.clear()
    assert [t.name for t in adapter.list_tools()] == ["Deploy", "query_db"]
    assert [t.name for t in adapter.search_tools("service", 5)] == ["Deploy"]
    assert [t.name for t in adapter.search_tools("DEPLOY", 5)] == ["Deploy"]
    assert [t.name for t in adapter.search_tools("", 1)] == ["Deploy"]
    assert adapter.search_tools("sql", 0) == []
    listed = adapter.list_tools()
    listed.clear()
    assert len(adapter.list_tools()) == 2
    with pytest.raises(TypeError):
        ToolRegistryAdapter([{"description": "no name"}])


def test_runtime_adapter_channels_and_threads() -> None:
    adapter = RuntimeContextAdapter(active_tool_count=3)
    state = adapter.get_runtime_context()
    assert (state.session_key, state.channel_type) == ("", "direct")
    for key, channel in [
        ("telegram:1:2", "telegram"),
        ("discord:9", "discord"),
        ("slack:T1:C2", "slack"),
        ("irc:x:y", "direct"),
        ("plain", "direct"),
    ]:
        adapter.set_session(key)
        assert adapter.get_runtime_context().channel_type == channel == channel_of(key)
    assert adapter.get_runtime_context().describe() == (
        "Session: plain | Channel: direct | Tools: 3 | Encryption: false | Knowledge: true | "
        "Memory: true"
    )
    # Inside a call's session scope the call's own session wins.
    with session_scope("slack:A:B"):
        assert adapter.get_runtime_context().session_key == "slack:A:B"
    errors: list[BaseException] = []

    def hammer(n: int) -> None:
        try:
            for i in range(2000):
                adapter.set_session(f"telegram:{n}:{i}")
                state = adapter.get_runtime_context()
                assert state.channel_type == "telegram"
                assert state.session_key.startswith("telegram:")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_layer_names_parse_or_fail_with_invalid_layer() -> None:
    assert ContextLayer.parse("User_Knowledge") is ContextLayer.USER_KNOWLEDGE
    with pytest.raises(LaminaError) as err:
        ContextLayer.parse("tools")
    assert err.value.code is ErrorCode.INVALID_LAYER
    assert len(ContextLayer) == 8
