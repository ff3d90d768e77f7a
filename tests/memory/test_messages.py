"""Conversations in (memory/messages.py): add_messages and add_messages_bulk on a real SQLite
file with the local embedder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lamina import AddedMessages, ErrorCode, Lamina, LaminaError
from lamina.memory.messages import MAX_MESSAGES
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres


def _turns() -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "name": "Caroline",
            "content": "  I went to the LGBTQ support group yesterday 🌈\n  it was powerful.  ",
            "timestamp": "2023-05-08T13:56:00",
            "metadata": {"dia_id": "D1:1"},
        },
        {
            "role": "assistant",
            "content": "Ça a dû être émouvant — tell me more!",
            "timestamp": "2023-05-08T15:56:00+02:00",
        },
        {"role": "user", "name": "Melanie", "content": "I painted a sunrise over the lake."},
    ]


def test_round_trip_keeps_content_speaker_time_and_order(ms: Lamina) -> None:
    added = ms.memory.add_messages(_turns(), user_id="u", metadata={"source": "chat"})
    assert isinstance(added, AddedMessages) and added.layer.value == "user"
    assert len(added.conversation_id) == 36  # generated (a UUID)
    first, second, third = added.memories
    assert [m.content for m in added.memories] == [t["content"] for t in _turns()]
    conv = first.metadata["conversation"]
    assert conv == {
        "id": added.conversation_id,
        "position": 0,
        "speaker": "Caroline",
        "role": "user",
        "timestamp": "2023-05-08T13:56:00+00:00",
    }
    assert first.metadata["dia_id"] == "D1:1" and first.metadata["source"] == "chat"
    assert second.metadata["conversation"]["speaker"] == "assistant"  # no name: the role
    assert second.metadata["conversation"]["timestamp"] == "2023-05-08T13:56:00+00:00"
    assert third.metadata["conversation"]["position"] == 2
    assert third.metadata["conversation"]["timestamp"] >= "2024"  # no timestamp: now
    stored = ms.memory.get(first.id)
    assert stored is not None and stored.content == _turns()[0]["content"]
    assert stored.metadata == first.metadata and stored.embedding_generated

    more = ms.memory.add_messages(
        [{"role": "user", "name": "Caroline", "content": "Session two starts here."}],
        user_id="u",
        conversation_id=added.conversation_id,
    )
    assert more.conversation_id == added.conversation_id
    assert more.memories[0].metadata["conversation"]["position"] == 3


def test_positions_continue_for_a_given_conversation_id(ms: Lamina) -> None:
    one = ms.memory.add_messages(_turns()[:2], user_id="u", conversation_id="conv-26")
    two = ms.memory.add_messages(_turns(), user_id="u", conversation_id="conv-26")
    other = ms.memory.add_messages(_turns()[:1], user_id="u", conversation_id="conv-44")
    positions = [m.metadata["conversation"]["position"] for m in one.memories + two.memories]
    assert positions == [0, 1, 2, 3, 4]
    assert other.memories[0].metadata["conversation"]["position"] == 0
    found = ms.memory.list(user_id="u", filters={"conversation.id": "conv-26"}, limit=100)
    assert found.total_count == 5


def test_layer_is_inferred_from_the_identifiers(ms: Lamina) -> None:
    msg = [{"role": "user", "content": "hello there"}]
    cases = [
        ({"user_id": "u"}, "user"),
        ({"user_id": "u", "agent_id": "a"}, "agent"),
        ({"user_id": "u", "session_id": "s"}, "session"),
        ({"user_id": "u", "project_id": "p"}, "user"),
        ({"project_id": "p"}, "project"),
        ({"agent_id": "a", "project_id": "p"}, "project"),
        ({"team_id": "t"}, "team"),
        ({"org_id": "o"}, "org"),
        ({"company_id": "c"}, "company"),
    ]
    for ids, layer in cases:
        added = ms.memory.add_messages(msg, **ids)
        assert added.layer.value == layer, ids
        assert added.memories[0].layer.value == layer
    explicit = ms.memory.add_messages(msg, user_id="u", project_id="p", layer="project")
    assert explicit.layer.value == "project"
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages(msg, agent_id="a")
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER


def test_search_finds_the_messages(ms: Lamina) -> None:
    ms.memory.add_messages(_turns(), user_id="u", conversation_id="c1")
    hits = ms.memory.search("painting a sunrise by the lake", user_id="u", mode="hybrid")
    assert hits and hits[0].memory.content == "I painted a sunrise over the lake."
    assert hits[0].memory.metadata["conversation"]["speaker"] == "Melanie"


def test_bulk_stores_several_conversations_in_order(ms: Lamina) -> None:
    results = ms.memory.add_messages_bulk(
        [
            {"messages": _turns()[:2], "user_id": "u", "conversation_id": "a"},
            {"messages": _turns(), "project_id": "p", "metadata": {"k": 1}},
            {"messages": _turns()[2:], "user_id": "u", "conversation_id": "a"},
        ]
    )
    assert [len(r.memories) for r in results] == [2, 3, 1]
    assert results[1].layer.value == "project" and results[1].memories[0].metadata["k"] == 1
    assert results[2].memories[0].metadata["conversation"]["position"] == 2
    assert ms.memory.add_messages_bulk([]) == []


def _stored(ms: Lamina) -> int:
    return sum(
        ms.memory.list(**ids, limit=1).total_count
        for ids in ({"user_id": "u"}, {"project_id": "p"})
    )


BAD: list[tuple[Any, str, ErrorCode]] = [
    ([], "messages", ErrorCode.INVALID_ARGUMENT),
    ("hello", "messages", ErrorCode.INVALID_ARGUMENT),
    ([{"role": "user", "content": "ok"}, "not a dict"], "messages[1]", ErrorCode.INVALID_ARGUMENT),
    ([{"role": "user", "content": "ok"}, {"role": "user"}], "messages[1].content", None),
    (
        [{"role": "user", "content": "ok"}, {"role": "user", "content": "  "}],
        "messages[1].content",
        None,
    ),
    ([{"role": "user", "content": 3}], "messages[0].content", ErrorCode.INVALID_ARGUMENT),
    ([{"role": "robot", "content": "x"}], "messages[0].role", ErrorCode.INVALID_ARGUMENT),
    ([{"content": "x"}], "messages[0].role", ErrorCode.INVALID_ARGUMENT),
    ([{"role": "user", "content": "x", "timestamp": "yesterday"}], "messages[0].timestamp", None),
    ([{"role": "user", "content": "x", "timestamp": 12}], "messages[0].timestamp", None),
    (
        [{"role": "user", "content": "x", "timestamp": "0001-01-01T00:00:00+01:00"}],
        "messages[0].timestamp",
        None,
    ),
    (
        [{"role": "user", "content": "x", "timestamp": "9999-12-31T23:59:59-01:00"}],
        "messages[0].timestamp",
        None,
    ),
    ([{"role": "user", "content": "x", "name": ""}], "messages[0].name", None),
    ([{"role": "user", "content": "x", "metadata": []}], "messages[0].metadata", None),
    (
        [{"role": "user", "content": "x", "metadata": {"conversation": {"id": "forged"}}}],
        "messages[0].metadata.conversation",
        None,
    ),
    ([{"role": "user", "content": "x", "speaker": "A"}], "messages[0].speaker", None),
    (
        [{"role": "user", "content": "x" * 70_000}],
        "messages[0].content",
        ErrorCode.CONTENT_TOO_LONG,
    ),
]


@pytest.mark.parametrize(("messages", "field", "code"), BAD)
def test_bad_messages_name_index_and_field_and_store_nothing(
    ms: Lamina, messages: Any, field: str, code: ErrorCode | None
) -> None:
    ms.memory.add("before", layer="user", user_id="u")
    good = [{"role": "user", "content": "this one is fine"}] * 3
    msgs = good + messages if isinstance(messages, list) and messages else messages
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages(msgs, user_id="u")
    assert err.value.code is (code or ErrorCode.INVALID_ARGUMENT)
    if msgs is messages:
        assert err.value.details["field"] == field
    else:  # three good messages come first: the index moves by three
        at = int(field[9]) + 3
        expected = f"messages[{at}]{field[11:]}"
        assert err.value.details["field"] == expected and err.value.details["index"] == at
        assert expected in err.value.message
    assert _stored(ms) == 1


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"metadata": {"conversation": 1}}, "metadata.conversation"),
        ({"metadata": "x"}, "metadata"),
        ({"conversation_id": ""}, "conversation_id"),
        ({"conversation_id": 5}, "conversation_id"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": "1h"}, "ttl"),
        ({"infer": "yes"}, "infer"),
    ],
)
def test_bad_call_arguments_store_nothing(ms: Lamina, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages([{"role": "user", "content": "x"}], user_id="u", **kwargs)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert err.value.details["field"] == field
    assert _stored(ms) == 0


@pytest.mark.parametrize("patch", [{"conversation": {"position": 0}}, {"conversation": None}])
def test_update_cannot_change_a_message_s_place(ms: Lamina, patch: dict[str, Any]) -> None:
    added = ms.memory.add_messages([{"role": "user", "content": "x"}], user_id="u")
    before = added.memories[0]
    with pytest.raises(LaminaError) as err:
        ms.memory.update(before.id, metadata=patch)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert err.value.details["field"] == "metadata.conversation"
    assert "metadata.conversation" in err.value.message
    after = ms.memory.get(before.id)
    assert after is not None and after.metadata == before.metadata
    ms.memory.update(before.id, metadata={"note": "other keys still change"})


def test_infer_without_a_chat_model_is_a_configuration_error(ms: Lamina) -> None:
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages([{"role": "user", "content": "x"}], user_id="u", infer=True)
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR and "llm.model" in err.value.message
    with pytest.raises(LaminaError) as err:
        ms.memory.add("x", layer="user", user_id="u", infer=True)
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    assert ms.memory.list(user_id="u").total_count == 0  # nothing stored


def test_bad_identifier_and_layer(ms: Lamina) -> None:
    msg = [{"role": "user", "content": "x"}]
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages(msg, user_id="")
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages(msg, user_id="u", layer="galaxy")
    assert err.value.code is ErrorCode.INVALID_LAYER
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages(msg, user_id="u", layer="project")
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER
    assert _stored(ms) == 0


def test_too_many_messages(ms: Lamina) -> None:
    msgs = [{"role": "user", "content": "x"}] * (MAX_MESSAGES + 1)
    with pytest.raises(LaminaError) as err:
        ms.memory.add_messages(msgs, user_id="u")
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert err.value.details["max_messages"] == MAX_MESSAGES
    half = [{"role": "user", "content": "x"}] * (MAX_MESSAGES // 2 + 1)
    with pytest.raises(LaminaError):
        ms.memory.add_messages_bulk(
            [{"messages": half, "user_id": "u"}, {"messages": half, "user_id": "u"}]
        )
    assert _stored(ms) == 0


def test_bulk_bad_conversation_stores_none(ms: Lamina) -> None:
    good = {"messages": _turns(), "user_id": "u"}
    for bad, field in [
        ({"messages": [{"role": "user", "content": ""}], "user_id": "u"}, "content"),
        ({"messages": _turns(), "user_id": "u", "colour": "red"}, "colour"),
        ({"user_id": "u"}, "messages"),
    ]:
        with pytest.raises(LaminaError) as err:
            ms.memory.add_messages_bulk([good, bad])
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
        assert err.value.details["field"].startswith("conversations[1]")
        assert field in err.value.details["field"]
    assert _stored(ms) == 0


def test_progress_follows_the_embedding_batches(ms: Lamina) -> None:
    seen: list[tuple[int, int | None]] = []
    msgs = [{"role": "user", "content": f"message number {i}"} for i in range(300)]
    ms.memory.add_messages(msgs, user_id="u", on_progress=lambda d, t: seen.append((d, t)))
    assert seen == [(256, 300), (300, 300)]


def test_on_postgres(tmp_path: Path) -> None:
    url = require_postgres()
    empty_database(url)
    with Lamina(fast_settings(tmp_path, database_url=url)) as pg:
        one = pg.memory.add_messages(_turns(), user_id="u", conversation_id="conv-26")
        two = pg.memory.add_messages(_turns()[:1], user_id="u", conversation_id="conv-26")
        assert [m.content for m in one.memories] == [t["content"] for t in _turns()]
        assert two.memories[0].metadata["conversation"]["position"] == 3
        stored = pg.memory.get(one.memories[1].id)
        assert stored is not None and stored.metadata == one.memories[1].metadata
        with pytest.raises(LaminaError):
            pg.memory.add_messages([*_turns(), {"role": "x", "content": "y"}], user_id="u")
        assert pg.memory.list(user_id="u").total_count == 4
        hits = pg.memory.search("sunrise painting", user_id="u", mode="hybrid")
        assert hits[0].memory.metadata["conversation"]["speaker"] == "Melanie"
