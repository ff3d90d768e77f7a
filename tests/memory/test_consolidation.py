"""Consolidation (infer=True) against the fake OpenAI-compatible server, through the real
client: a scripted conversation applies every decision exactly once with complete
history; garbage, cut-short answers, wrong types, unknown ids and timeouts never corrupt or
lose stored memories."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lamina import ErrorCode, FactEvent, Lamina, LaminaError
from lamina.config import Settings
from tests.conftest import chat_settings
from tests.fakes.openai_server import Failure, FakeOpenAI
from tests.pg import empty_database, require_postgres

U = "alice"


@pytest.fixture
def llm(fake_openai: FakeOpenAI) -> FakeOpenAI:
    return fake_openai


def settings(data_dir: Path, server: FakeOpenAI, **memory: Any) -> Settings:
    return chat_settings(data_dir, server, memory=memory)


def stored_refs(body: dict[str, Any]) -> dict[str, str]:
    """Content -> short id of the stored memories a decision prompt shows."""
    prompt = body["messages"][-1]["content"]
    section = prompt.split("Stored memories:\n", 1)[1].split("\n\nNew facts:", 1)[0]
    return {m.group(2): m.group(1) for m in re.finditer(r"^\[(\d+)\] (.*)$", section, re.M)}


def facts_shown(body: dict[str, Any]) -> list[str]:
    prompt = body["messages"][-1]["content"]
    return re.findall(r"^\(\d+\) (.*)$", prompt.split("New facts:\n", 1)[1], re.M)


def is_decision(body: dict[str, Any]) -> bool:
    return "New facts:" in body["messages"][-1]["content"]


CONVERSATION = [
    {
        "role": "user",
        "name": "Alice",
        "content": "I moved to Lisbon last month!",
        "timestamp": "2026-06-01T10:00:00",
    },
    {"role": "assistant", "content": "Congratulations!", "timestamp": "2026-06-01T10:00:05"},
    {
        "role": "user",
        "name": "Alice",
        "content": "I still drink green tea every morning.",
        "timestamp": "2026-06-01T10:01:00",
    },
    {
        "role": "user",
        "name": "Alice",
        "content": "And yes, still at Acme. Eve visits soon.",
        "timestamp": "2026-06-01T10:02:00",
    },
]
EXTRACTED = {
    "facts": [
        {"text": "Alice moved to Lisbon", "sources": [0]},
        {"text": "Alice drinks green tea every morning", "sources": [2]},
        {"text": "Alice works at Acme", "sources": [3]},
        {"text": "Alice's sister Eve visits soon", "sources": [3]},
    ]
}


def decide(body: dict[str, Any]) -> str:
    refs = stored_refs(body)
    assert facts_shown(body) == [f["text"] for f in EXTRACTED["facts"]]
    return json.dumps(
        {
            "decisions": [
                {"fact": 0, "event": "DELETE", "id": refs["Alice lives in Berlin"]},
                {
                    "fact": 1,
                    "event": "UPDATE",
                    "id": refs["Alice likes tea"],
                    "text": "Alice likes tea, green tea every morning",
                },
                {"fact": 2, "event": "NOOP", "id": refs["Alice works at Acme"]},
                {"fact": 3, "event": "ADD"},
            ]
        }
    )


def seed(ms: Lamina) -> dict[str, str]:
    texts = ["Alice lives in Berlin", "Alice likes tea", "Alice works at Acme"]
    return {t: ms.memory.add(t, layer="user", user_id=U).id for t in texts}


def snapshot(ms: Lamina, ids: dict[str, str]) -> Any:
    page = ms.memory.list(user_id=U, include_invalid=True, limit=100)
    return (
        sorted((m.id, m.content, m.valid_until) for m in page.items),
        {mid: [e.operation for e in ms.memory.history(mid)] for mid in ids.values()},
    )


def test_a_scripted_conversation_applies_every_decision_once(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    llm.script(json.dumps(EXTRACTED))
    llm.reply = decide
    with Lamina(settings(data_dir, llm)) as ms:
        ids = seed(ms)
        added = ms.memory.add_messages(CONVERSATION, user_id=U, infer=True)
        assert len(llm.chat_requests) == 2  # one extraction, one decision
        # The messages are stored verbatim, whatever was extracted.
        assert [m.content for m in added.memories] == [m["content"] for m in CONVERSATION]
        message_ids = [m.id for m in added.memories]
        assert added.facts is not None
        moved, tea, acme, eve = added.facts
        assert [f.event for f in added.facts] == [
            FactEvent.DELETE,
            FactEvent.UPDATE,
            FactEvent.NOOP,
            FactEvent.ADD,
        ]
        # DELETE: Berlin invalidated (kept), the new fact stored, linked to its message.
        assert [m.id for m in moved.invalidated] == [ids["Alice lives in Berlin"]]
        assert moved.invalidated[0].valid_until is not None
        assert moved.memory is not None and moved.memory.content == "Alice moved to Lisbon"
        assert moved.sources == [message_ids[0]]
        assert moved.memory.metadata["inferred_from"]["messages"] == [message_ids[0]]
        assert moved.memory.event_at.isoformat() == "2026-06-01T10:00:00+00:00"
        # UPDATE: rewritten in place, old text in its history.
        assert tea.memory is not None and tea.memory.id == ids["Alice likes tea"]
        assert tea.memory.content == "Alice likes tea, green tea every morning"
        assert tea.previous_content == "Alice likes tea"
        tea_history = ms.memory.history(ids["Alice likes tea"])
        assert [(e.operation.value, e.old_content) for e in tea_history] == [
            ("add", None),
            ("update", "Alice likes tea"),
        ]
        assert acme.memory is not None and acme.memory.id == ids["Alice works at Acme"]
        assert eve.memory is not None and eve.memory.content == "Alice's sister Eve visits soon"
        # Each decision applied exactly once: histories are complete and nothing repeats.
        berlin = ms.memory.history(ids["Alice lives in Berlin"])
        assert [e.operation.value for e in berlin] == ["add", "invalidate"]
        assert [e.operation.value for e in ms.memory.history(ids["Alice works at Acme"])] == ["add"]
        assert [e.operation.value for e in ms.memory.history(eve.memory.id)] == ["add"]
        page = ms.memory.list(user_id=U, limit=100)
        contents = sorted(m.content for m in page.items)
        assert contents.count("Alice moved to Lisbon") == 1
        assert "Alice lives in Berlin" not in contents  # invalid: left out by default
        assert page.total_count == 4 + 3 + 1  # messages, seeds (one invalid), two new facts
        every = ms.memory.list(user_id=U, limit=100, include_invalid=True)
        assert every.total_count == page.total_count + 1
        hits = ms.memory.search("Where does Alice live? Berlin", user_id=U, threshold=0)
        assert ids["Alice lives in Berlin"] not in {h.memory.id for h in hits}
        hits = ms.memory.search(
            "Where does Alice live? Berlin", user_id=U, threshold=0, include_invalid=True
        )
        assert ids["Alice lives in Berlin"] in {h.memory.id for h in hits}
        # The decision prompt compared facts with facts only, never with the messages.
        decision = next(b for b in llm.chat_requests if is_decision(b))
        assert "Congratulations!" not in decision["messages"][-1]["content"]


def test_add_with_infer_keeps_the_text_and_reports_the_facts(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    llm.script(
        '```json\n{"facts": ["Bob prefers window seats"]}\n```',  # fenced: read anyway
        'Sure! {"decisions": [{"fact": "0", "event": "add"}]} Hope that helps.',
    )
    with Lamina(settings(data_dir, llm)) as ms:
        entry = ms.memory.add(
            "Please book me a window seat, as always.",
            layer="user",
            user_id="bob",
            infer=True,
            timestamp="2026-01-02T03:04:05Z",
        )
        assert entry.content == "Please book me a window seat, as always."
        assert entry.metadata["conversation"]["role"] == "user"
        assert entry.event_at is not None and entry.event_at.year == 2026
        assert entry.facts is not None and [f.event for f in entry.facts] == [FactEvent.ADD]
        fact = entry.facts[0].memory
        assert fact is not None and fact.content == "Bob prefers window seats"
        assert fact.metadata["inferred_from"]["messages"] == [entry.id]
        # The same statement again: an exact duplicate of the fact is a NOOP, not a row.
        llm.script('{"facts": ["Bob prefers window seats"]}', '{"decisions": []}')
        again = ms.memory.add("Window seat again please.", layer="user", user_id="bob", infer=True)
        assert again.facts is not None and again.facts[0].event is FactEvent.NOOP
        assert again.facts[0].memory is not None and again.facts[0].memory.id == fact.id
        with pytest.raises(LaminaError) as err:
            ms.memory.add("x", layer="user", user_id="bob", infer=True, valid_until="2030-01-01")
        assert err.value.code is ErrorCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "bad",
    [
        "I am sorry, I cannot do that.",
        '{"facts": 42}',
        "",
        Failure(200, delay=2.0),  # longer than the client's timeout
        Failure(500),
        Failure(200, body="not json at all"),
    ],
)
def test_a_bad_answer_every_time_fails_cleanly_and_stores_nothing(
    data_dir: Path, llm: FakeOpenAI, bad: str | Failure
) -> None:
    # The chat model retries a failed call 3 times (llm.max_retries), the shared policy
    # (retry.max_retries, 3) an answer that is not what was asked for: one layer each.
    config = chat_settings(data_dir, llm, llm={"max_retries": 3})
    with Lamina(config) as ms:
        ids = seed(ms)
        before = snapshot(ms, ids)
        llm.reply = lambda body: bad if isinstance(bad, str) else "{}"
        llm.script(*[bad] * 4)  # every attempt (1 + 3 retries)
        with pytest.raises(LaminaError) as err:
            ms.memory.add_messages(CONVERSATION, user_id=U, infer=True)
        assert err.value.code is ErrorCode.PROVIDER_ERROR
        assert snapshot(ms, ids) == before  # not one message, fact or change
        # 4 attempts, not 4 x 4 (a body the client cannot read is not retried).
        assert len(llm.chat_requests) == (1 if bad == Failure(200, body="not json at all") else 4)


def test_garbage_then_a_good_answer_is_retried_and_applied_once(
    data_dir: Path, llm: FakeOpenAI
) -> None:
    cut = json.dumps(EXTRACTED)[:-40]  # cut short inside the fourth fact
    with Lamina(chat_settings(data_dir, llm, llm={"max_retries": 1})) as ms:
        ids = seed(ms)
        llm.script(
            cut,  # extraction: the complete facts are kept
            '{"decisions": "DELETE everything"}',  # wrong type: asked again
            Failure(200, delay=2.0),  # a timeout: retried by the chat model
        )
        llm.reply = lambda body: json.dumps(
            {
                "decisions": [
                    {"fact": 0, "event": "DELETE", "id": "no-such-memory"},  # unknown: ADD
                    {"fact": 1, "event": "UPDATE", "id": "99", "text": "X"},  # unknown: ADD
                    {"fact": 2, "event": "NOOP", "id": "42"},
                    {"fact": 7, "event": "DELETE", "id": "1"},  # no such fact: ignored
                    {"fact": 0, "event": "NOOP"},  # a second decision: ignored
                ]
            }
        )
        added = ms.memory.add_messages(CONVERSATION, user_id=U, infer=True)
        assert added.facts is not None
        assert [(f.fact, f.event) for f in added.facts] == [
            ("Alice moved to Lisbon", FactEvent.ADD),
            ("Alice drinks green tea every morning", FactEvent.ADD),
            ("Alice works at Acme", FactEvent.NOOP),
        ]
        assert added.facts[2].memory is None  # the id it named was never shown
        for mid in ids.values():  # stored memories untouched
            assert [e.operation.value for e in ms.memory.history(mid)] == ["add"]
        assert ms.memory.list(user_id=U).total_count == 4 + 3 + 2


def test_long_inputs_are_cut_into_bounded_prompts(data_dir: Path, llm: FakeOpenAI) -> None:
    turns = [
        {"role": "user", "content": f"Message {i}: " + "the quarterly report needs work " * 8}
        for i in range(12)
    ]
    turns.append({"role": "user", "content": "a very long one " * 400})
    llm.reply = lambda body: '{"decisions": []}' if is_decision(body) else '{"facts": []}'
    with Lamina(settings(data_dir, llm, infer_max_input_tokens=200)) as ms:
        added = ms.memory.add_messages(turns, user_id=U, infer=True)
        assert added.facts == [] and len(added.memories) == 13
        counter = ms.aio.counter
        prompts = [b["messages"][-1]["content"] for b in llm.chat_requests]
        assert len(prompts) >= 10  # several batches, the long message in pieces
        for prompt in prompts:
            body = "\n".join(line.split("): ", 1)[1] for line in prompt.splitlines()[1:])
            assert counter.count(body) <= 200


def test_bulk_consolidation_is_one_transaction(data_dir: Path, llm: FakeOpenAI) -> None:
    answers = {
        "Carol": '{"facts": ["Carol plays chess"]}',
        "Dan": '{"facts": ["Dan plays go"]}',
    }

    def reply(body: dict[str, Any]) -> str:
        if is_decision(body):
            return '{"decisions": [{"fact": 0, "event": "ADD"}]}'
        return next(v for k, v in answers.items() if k in body["messages"][-1]["content"])

    llm.reply = reply
    with Lamina(settings(data_dir, llm)) as ms:
        done = ms.memory.add_messages_bulk(
            [
                {
                    "user_id": "c",
                    "messages": [{"role": "user", "name": "Carol", "content": "chess!"}],
                },
                {"user_id": "d", "messages": [{"role": "user", "name": "Dan", "content": "go!"}]},
            ],
            infer=True,
        )
        assert [[f.fact for f in d.facts or []] for d in done] == [
            ["Carol plays chess"],
            ["Dan plays go"],
        ]
        assert done[1].facts and done[1].facts[0].memory
        assert done[1].facts[0].memory.identifiers == {"user_id": "d"}
        # A failure in the second conversation stores nothing of the first.
        answers["Dan"] = "garbage"
        with pytest.raises(LaminaError):
            ms.memory.add_messages_bulk(
                [
                    {
                        "user_id": "c",
                        "messages": [{"role": "user", "name": "Carol", "content": "x"}],
                    },
                    {"user_id": "d", "messages": [{"role": "user", "name": "Dan", "content": "y"}]},
                ],
                infer=True,
            )
        assert ms.memory.list(user_id="c").total_count == 2


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """None: the SQLite file of the data directory; else a reset PostgreSQL."""
    if request.param == "sqlite":
        return None
    url = require_postgres()
    empty_database(url)
    return url


def test_each_written_fact_has_the_time_of_the_evidence_it_names(
    data_dir: Path, llm: FakeOpenAI, store_url: str | None
) -> None:
    """UPDATE: the rewritten memory's event_at is the new message's time, as its
    inferred_from names that message (it kept the old fact's time); ADD and DELETE's fact:
    their message's time; DELETE's invalidated memory: valid until then."""
    config = settings(data_dir, llm)
    if store_url is not None:
        config = config.model_copy(update={"database_url": store_url})
    with Lamina(config) as ms:
        tea = ms.memory.add("Alice likes tea", layer="user", user_id=U, timestamp="2025-01-01")
        city = ms.memory.add(
            "Alice lives in Berlin", layer="user", user_id=U, timestamp="2025-01-01"
        )
        llm.script(
            json.dumps(
                {
                    "facts": [
                        {"text": "Alice drinks green tea every morning", "sources": [0]},
                        {"text": "Alice moved to Lisbon", "sources": [1]},
                        {"text": "Alice's sister Eve visits soon", "sources": [1]},
                    ]
                }
            )
        )
        llm.reply = lambda body: json.dumps(
            {
                "decisions": [
                    {
                        "fact": 0,
                        "event": "UPDATE",
                        "id": stored_refs(body)["Alice likes tea"],
                        "text": "Alice likes tea, green tea every morning",
                    },
                    {"fact": 1, "event": "DELETE", "id": stored_refs(body)[city.content]},
                    {"fact": 2, "event": "ADD"},
                ]
            }
        )
        said = [
            {"role": "user", "content": "Green tea, every morning.", "timestamp": "2026-03-01"},
            {"role": "user", "content": "Moved to Lisbon! Eve visits.", "timestamp": "2026-04-01"},
        ]
        added = ms.memory.add_messages(said, user_id=U, infer=True)
        march, april = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
        assert added.facts is not None
        update, delete, add = added.facts
        assert (update.event, delete.event, add.event) == (
            FactEvent.UPDATE,
            FactEvent.DELETE,
            FactEvent.ADD,
        )
        assert update.memory is not None and update.memory.id == tea.id
        assert update.memory.event_at == march
        stored = ms.memory.get(tea.id)
        assert stored.content == "Alice likes tea, green tea every morning"
        assert stored.metadata["inferred_from"]["messages"] == [added.memories[0].id]
        assert stored.event_at == march  # not 2025-01-01, the old fact's time
        march_hits = ms.memory.search(
            "green tea", user_id=U, since="2026-03-01", until="2026-03-02", threshold=0
        )
        assert {h.memory.id for h in march_hits} == {tea.id, added.memories[0].id}
        assert [e.operation.value for e in ms.memory.history(tea.id)] == ["add", "update"]
        assert ms.memory.get(city.id).valid_until == april
        for outcome in (delete, add):
            assert outcome.memory is not None and outcome.memory.event_at == april
            assert outcome.memory.metadata["inferred_from"]["messages"] == [added.memories[1].id]


def test_the_extraction_prompt_names_the_user_by_id(data_dir: Path, llm: FakeOpenAI) -> None:
    """add(..., infer=True) and a user's message without a name show the model the user id,
    not "user"; a message's own name wins; an assistant stays "assistant"."""
    llm.reply = lambda body: '{"facts": []}'
    with Lamina(settings(data_dir, llm)) as ms:
        ms.memory.add(
            "I prefer window seats.",
            layer="user",
            user_id="bob",
            infer=True,
            timestamp="2026-01-02T03:04:05Z",
        )
        ms.memory.add_messages(
            [
                {"role": "user", "content": "Book me a flight.", "timestamp": "2026-01-03"},
                {"role": "assistant", "content": "Where to?", "timestamp": "2026-01-03T00:01"},
                {"role": "user", "name": "Robert", "content": "Oslo.", "timestamp": "2026-01-04"},
            ],
            user_id="bob",
            infer=True,
        )
        prompts = [body["messages"][-1]["content"] for body in llm.chat_requests]
        assert prompts == [
            "Conversation:\n[0] bob (2026-01-02T03:04:05+00:00): I prefer window seats.",
            "Conversation:\n"
            "[0] bob (2026-01-03T00:00:00+00:00): Book me a flight.\n"
            "[1] assistant (2026-01-03T00:01:00+00:00): Where to?\n"
            "[2] Robert (2026-01-04T00:00:00+00:00): Oslo.",
        ]
        # The messages themselves are stored as they were said.
        page = ms.memory.list(user_id="bob")
        speakers = {m.content: m.metadata["conversation"]["speaker"] for m in page.items}
        assert speakers["I prefer window seats."] == "user"
        assert speakers["Oslo."] == "Robert"


def test_keyed_items_are_never_consolidated(
    data_dir: Path, llm: FakeOpenAI, store_url: str | None
) -> None:
    """An adapter's item addressed by its own key (bulk_add(keyed=True), the LangGraph
    store's) is not a stored fact consolidation may update or invalidate: the decision
    prompt never shows it, so no model answer can rewrite or retire it."""
    config = settings(data_dir, llm)
    if store_url is not None:
        config = config.model_copy(update={"database_url": store_url})
    with Lamina(config) as ms:
        [item] = ms.memory.bulk_add(
            [{"content": "Alice likes tea", "layer": "user", "user_id": U}], keyed=True
        )
        plain = ms.memory.add("Alice likes coffee", layer="user", user_id=U)
        llm.script(json.dumps({"facts": [{"text": "Alice likes green tea", "sources": [0]}]}))
        shown: list[dict[str, str]] = []

        def answer(body: dict[str, Any]) -> str:
            refs = stored_refs(body)
            shown.append(refs)
            target = refs.get("Alice likes tea", refs["Alice likes coffee"])
            return json.dumps({"decisions": [{"fact": 0, "event": "DELETE", "id": target}]})

        llm.reply = answer
        ms.memory.add_messages(
            [{"role": "user", "content": "Green tea now."}], user_id=U, infer=True
        )
        assert shown and all("Alice likes tea" not in refs for refs in shown)
        kept = ms.memory.get(item.id)
        assert kept is not None and kept.content == "Alice likes tea" and kept.valid_until is None
        assert [e.operation.value for e in ms.memory.history(item.id)] == ["add"]
        assert ms.memory.get(plain.id).valid_until is not None  # the plain fact was retired
