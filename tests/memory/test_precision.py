"""Precision (issue 36): what a default search returns is what is relevant, on the embedded
store and on PostgreSQL, with the real local embedder. Hand-written scenarios, each with
the exact set of memories a default search (threshold 0.7) must return: a name alone, a
paraphrase, a stale fact, an off-topic question, small talk, a question about another user.

The stale fact goes through consolidation with the fake OpenAI-compatible chat server."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lamina import FactEvent, Lamina
from lamina.memory.scoring import EVIDENCE_FULL, QUESTION_SHARE
from tests.conftest import chat_settings, fast_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.pg import empty_database, require_postgres

#: Each conversation is one session of one topic (a conversation id each), as chats are.
CHATS: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("alice", "breakfast"): [
        {
            "role": "user",
            "name": "Alice",
            "content": "I usually have oatmeal with blueberries for breakfast.",
        },
        {"role": "assistant", "content": "Sounds healthy!"},
    ],
    ("alice", "editor"): [
        {"role": "user", "name": "Alice", "content": "I write all my code in Neovim these days."},
        {"role": "assistant", "content": "Nice editor choice."},
    ],
    ("alice", "errands"): [
        {"role": "user", "name": "Alice", "content": "Can you remind me to renew my passport?"},
        {"role": "assistant", "content": "Sure, I'll remind you next week."},
        {"role": "user", "name": "Alice", "content": "Thanks, that's all for today."},
    ],
    ("bob", "school"): [
        {"role": "user", "name": "Bob", "content": "My daughter Mia starts school in September."},
        {"role": "assistant", "content": "Exciting times!"},
    ],
    ("bob", "music"): [
        {"role": "user", "name": "Bob", "content": "I play bass in a jazz band on weekends."},
        {"role": "assistant", "content": "Sounds fun!"},
    ],
}
NOTES = {
    "alice": [
        "Replica db-2 sits behind a slow WAN link",
        "The deploy pipeline runs on GitHub Actions",
        "Alice prefers dark mode in every editor",
        "Alice is allergic to peanuts",
    ]
}

#: (user, query, the exact contents a default search returns).
SCENARIOS: list[tuple[str, str, set[str]]] = [
    # A name alone: every turn Alice said gets nothing from her name without evidence.
    (
        "alice",
        "what does Alice eat for breakfast?",
        {
            "I usually have oatmeal with blueberries for breakfast.",
            "Sounds healthy!",
            "Alice is allergic to peanuts",
        },
    ),
    (
        "alice",
        "what editor does alice use",
        {
            "Alice prefers dark mode in every editor",
            "I write all my code in Neovim these days.",
            "Nice editor choice.",
        },
    ),
    ("bob", "what instrument does Bob play?", {"I play bass in a jazz band on weekends."}),
    # Said another way (a few words shared), and said the same way.
    ("alice", "which database replica is slow?", {"Replica db-2 sits behind a slow WAN link"}),
    (
        "alice",
        "where do we run the deploy pipeline?",
        {"The deploy pipeline runs on GitHub Actions"},
    ),
    # Off-topic questions.
    ("alice", "what is the capital of Australia?", set()),
    ("alice", "how do I bake sourdough bread?", set()),
    # Small talk.
    ("alice", "hi, how are you?", set()),
    ("alice", "good morning!", set()),
    # A question about another user: nothing of theirs is in this scope.
    ("alice", "when does Mia start school?", set()),
    ("alice", "what instrument does Bob play?", set()),
    (
        "bob",
        "when does Mia start school?",
        {"My daughter Mia starts school in September.", "Exciting times!"},
    ),
]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> str | None:
    """None: the SQLite file of the data directory; else a reset PostgreSQL."""
    if request.param == "sqlite":
        return None
    url = require_postgres()
    empty_database(url)
    return url


@pytest.fixture
def lm(store: str | None, data_dir: Path) -> Iterator[Lamina]:
    extra = {} if store is None else {"database_url": store}
    with Lamina(fast_settings(data_dir, **extra)) as ms:
        for (user, chat), messages in CHATS.items():
            ms.memory.add_messages(messages, user_id=user, conversation_id=chat)
        for user, notes in NOTES.items():
            for note in notes:
                ms.memory.add(note, layer="user", user_id=user)
        yield ms


def test_a_default_search_returns_exactly_what_is_relevant(lm: Lamina) -> None:
    wrong = {}
    for user, query, expected in SCENARIOS:
        got = {h.memory.content for h in lm.memory.search(query, user_id=user)}
        if got != expected:
            wrong[(user, query)] = sorted(got)
    assert wrong == {}


def test_boosts_never_create_relevance(lm: Lamina) -> None:
    """A hit without semantic or keyword evidence has no speaker, date or conversation
    part, whatever the query names; a little evidence gets a little of them."""
    queries = [q for _, q, _ in SCENARIOS] + ["What did Alice say in June 2026?"]
    seen = 0
    for user in ("alice", "bob"):
        for query in queries:
            for hit in lm.memory.search(query, user_id=user, threshold=0, limit=50):
                p = hit.parts
                evidence = p.semantic_weight * (p.semantic or 0.0)
                evidence += (1 - p.semantic_weight) * (p.keyword or 0.0) + p.phrase
                share = min(evidence / EVIDENCE_FULL, 1.0)
                assert p.speaker <= 0.3 * share + 1e-12, (query, hit.memory.content)
                assert p.date <= 0.2 * share + 1e-12, (query, hit.memory.content)
                if evidence == 0:
                    seen += 1
                    assert p.conversation == 0 and hit.score == 0, (query, hit.memory.content)
    assert seen > 0  # name-only turns were among the candidates


def test_the_thanks_line_stays_out_of_a_question_naming_its_speaker(lm: Lamina) -> None:
    """The issue's first case: "Thanks, that's all for today." said by Alice, for a
    question about Alice it does not answer."""
    hits = lm.memory.search("what does Alice eat for breakfast?", user_id="alice", threshold=0)
    thanks = next(h for h in hits if h.memory.content == "Thanks, that's all for today.")
    assert thanks.score < 0.7
    assert thanks.parts.speaker < 0.3  # scaled down: almost no evidence


def test_a_paraphrase_ranks_first_and_clears_half_the_bar(lm: Lamina) -> None:
    """The issue's second case: "why is replication lagging?" shares no word with "Replica
    db-2 sits behind a slow WAN link" (Porter2 stems them apart): its meaning alone scores
    it about 0.6, first of the scope, but under the default 0.7 (which keeps out over 90 %
    of LoCoMo questions asked of the wrong user, docs/search.md); threshold=0.5 finds it."""
    query = "why is replication lagging?"
    top = lm.memory.search(query, user_id="alice", threshold=0)[0]
    assert top.memory.content == "Replica db-2 sits behind a slow WAN link"
    assert top.parts.keyword == 0 and 0.5 < top.score < 0.7
    found = lm.memory.search(query, user_id="alice", threshold=0.5)
    assert [h.memory.content for h in found] == ["Replica db-2 sits behind a slow WAN link"]


# -- a stale fact ---------------------------------------------------------------------------

BERLIN = {"role": "user", "name": "Alice", "content": "I live in Berlin with my two cats."}
MUNICH = {"role": "user", "name": "Alice", "content": "I moved to Munich last week."}


def _refs(body: dict[str, Any]) -> dict[str, str]:
    """Content -> short id of the stored memories a decision prompt shows."""
    prompt = body["messages"][-1]["content"]
    section = prompt.split("Stored memories:\n", 1)[1].split("\n\nNew facts:", 1)[0]
    return {m.group(2): m.group(1) for m in re.finditer(r"^\[(\d+)\] (.*)$", section, re.M)}


def _model(body: dict[str, Any]) -> str:
    """Extraction: one fact per message; decision: Munich replaces Berlin."""
    prompt = body["messages"][-1]["content"]
    if "New facts:" not in prompt:
        fact = "Alice lives in Munich" if "Munich" in prompt else "Alice lives in Berlin"
        return json.dumps({"facts": [{"text": fact, "sources": [0]}]})
    refs = _refs(body) if "Stored memories:" in prompt else {}
    if "Alice lives in Berlin" in refs and "(0) Alice lives in Munich" in prompt:
        decision = {"fact": 0, "event": "DELETE", "id": refs["Alice lives in Berlin"]}
    else:
        decision = {"fact": 0, "event": "ADD"}
    return json.dumps({"decisions": [decision]})


def test_a_superseded_message_ranks_below_the_current_fact(
    store: str | None, data_dir: Path, fake_openai: FakeOpenAI
) -> None:
    config = chat_settings(data_dir, fake_openai)
    if store is not None:
        config = config.model_copy(update={"database_url": store})
    fake_openai.reply = _model
    with Lamina(config) as ms:
        said = ms.memory.add_messages(
            [{**BERLIN, "timestamp": "2026-01-10T09:00:00"}], user_id="alice", infer=True
        )
        assert said.facts is not None and said.facts[0].memory is not None
        berlin_fact = said.facts[0].memory.id
        message = said.memories[0].id
        query = "where does Alice live?"
        before = [h.memory.id for h in ms.memory.search(query, user_id="alice")]
        assert before[:1] in ([berlin_fact], [message]) and set(before) == {berlin_fact, message}
        moved = ms.memory.add_messages(
            [{**MUNICH, "timestamp": "2026-05-02T09:00:00"}], user_id="alice", infer=True
        )
        assert moved.facts is not None and moved.facts[0].event is FactEvent.DELETE
        munich = moved.facts[0].memory
        assert munich is not None and munich.content == "Alice lives in Munich"
        # The message is kept, unchanged but for its mark, and says which fact it fed.
        kept = ms.memory.get(message)
        assert kept.content == BERLIN["content"]
        assert kept.metadata["superseded"]["fact"] == berlin_fact
        assert [e.operation.value for e in ms.memory.history(message)] == ["add", "update"]
        # Today: the current fact first, the stale message below it, ranked down.
        hits = ms.memory.search(query, user_id="alice", threshold=0)
        order = [h.memory.id for h in hits]
        assert order.index(munich.id) < order.index(message)
        assert berlin_fact not in order  # invalid: left out
        stale = hits[order.index(message)]
        assert stale.parts.stale < 0
        assert math.isclose(stale.parts.raw, -stale.parts.stale, rel_tol=1e-9)  # half lost
        default = [h.memory.id for h in ms.memory.search(query, user_id="alice")]
        assert default[0] == munich.id and berlin_fact not in default
        # Asked about the past, or with invalid facts: the message as it was.
        for window in (
            {"include_invalid": True},
            {"since": "2026-01-01", "until": "2026-02-01"},
        ):
            past = ms.memory.search(query, user_id="alice", threshold=0, **window)
            found = {h.memory.id: h for h in past}
            assert found[message].parts.stale == 0, window
        everything = ms.memory.search(query, user_id="alice", threshold=0, include_invalid=True)
        assert berlin_fact in {h.memory.id for h in everything}


def test_a_question_ranks_below_the_statement_that_answers_it(lm: Lamina) -> None:
    """A memory whose sentences ask loses QUESTION_SHARE of its score (in proportion to the
    share of its sentences that are questions): asked about the passport, the reminder
    request still passes, and its question part rebuilds the score."""
    lm.memory.add("Alice renewed her passport in March", layer="user", user_id="alice")
    hits = lm.memory.search("did Alice renew her passport?", user_id="alice", threshold=0.0)
    order = [h.memory.content for h in hits]
    statement = order.index("Alice renewed her passport in March")
    asking = order.index("Can you remind me to renew my passport?")
    assert statement < asking
    asked = hits[asking].parts
    assert asked.question < 0 and hits[statement].parts.question == 0
    before = asked.raw - asked.question
    assert math.isclose(asked.question, -QUESTION_SHARE * before, rel_tol=1e-9)
