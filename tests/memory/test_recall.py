"""Recall (memory/scoring.py): conversation neighbourhoods, score parts, the default mode and
threshold, on the embedded store and on PostgreSQL, through the public library."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.memory.models import SCORE_RATE, ScoreParts
from lamina.memory.scoring import QuerySignals, raw_of
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", "postgres"])
def lm(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[Lamina]:
    extra: dict[str, Any] = {}
    if request.param == "postgres":
        url = require_postgres()
        empty_database(url)
        extra["database_url"] = url
    with Lamina(fast_settings(data_dir, **extra)) as ms:
        yield ms


def _raw_rows(ms: Lamina, sql: str, value: str) -> list[Any]:
    """The rows of ``sql`` + a placeholder bound to ``value``, read from the raw tables of
    either store."""
    url = ms.settings.database_url
    if url and url.startswith("postgres"):
        with psycopg.connect(url) as conn:
            return conn.execute(sql + "%s", (value,)).fetchall()
    with sqlite3.connect(ms.settings.sqlite_path()) as conn:
        return conn.execute(sql + "?", (value,)).fetchall()


def _raw_context(ms: Lamina, memory_id: str) -> tuple[str | None, bool]:
    """(context, has a neighbourhood vector) of a memory, read from the raw table."""
    sql = "SELECT context, context_embedding IS NOT NULL FROM memories WHERE id = "
    [row] = _raw_rows(ms, sql, memory_id)
    return row[0], bool(row[1])


PAINTING = [
    {"role": "user", "name": "Caroline", "content": "What did you paint last weekend?"},
    {
        "role": "assistant",
        "name": "Melanie",
        "content": "A sunrise over the lake, it took me hours.",
        "timestamp": "2023-05-08T13:56:00",
    },
    {"role": "user", "name": "Caroline", "content": "Lovely. I spent mine hiking."},
]


def test_a_message_is_found_through_its_neighbourhood(lm: Lamina) -> None:
    added = lm.memory.add_messages(PAINTING, user_id="u", conversation_id="c1")
    question, answer, _ = added.memories
    # The answer holds none of the query's words: its previous turn and speaker do.
    hits = lm.memory.search("What did Melanie paint?", user_id="u")
    assert hits and hits[0].memory.id == answer.id
    parts = hits[0].parts
    assert parts.keyword is not None and parts.keyword > 0
    assert parts.speaker > 0 and parts.conversation > 0
    context, has_vector = _raw_context(lm, answer.id)
    assert context is not None and "paint last weekend" in context and "Melanie" in context
    assert "8 May 2023" in context and has_vector
    # The first turn has no previous turn: the two next ones, its speaker and date.
    first_context, first_vector = _raw_context(lm, question.id)
    assert first_context is not None and first_context.startswith("A sunrise over the lake")
    assert "hiking" in first_context and "Caroline" in first_context and first_vector
    # A later call continues the neighbourhood from the stored turns, and the two stored
    # turns before it gain it as a next turn; the one before them does not.
    later = lm.memory.add_messages(
        [{"role": "assistant", "name": "Melanie", "content": "Where did you walk?"}],
        user_id="u",
        conversation_id="c1",
    ).memories[0]
    later_context, _ = _raw_context(lm, later.id)
    assert later_context is not None and "sunrise" in later_context and "hiking" in later_context
    assert "walk" in (_raw_context(lm, answer.id)[0] or "")
    assert "walk" in (_raw_context(lm, added.memories[2].id)[0] or "")
    assert _raw_context(lm, question.id) == (first_context, True)
    hits = lm.memory.search("walk", user_id="u", mode="keyword", threshold=0.0)
    assert {h.memory.id for h in hits} == {later.id, answer.id, added.memories[2].id}


def test_deleting_or_rewriting_a_turn_leaves_nothing_of_it_in_its_neighbours(lm: Lamina) -> None:
    added = lm.memory.add_messages(PAINTING, user_id="u", conversation_id="c1")
    question, answer, hiking = added.memories
    assert lm.memory.search("paint weekend", user_id="u", mode="keyword", threshold=0.0)
    assert lm.memory.delete(question.id)
    # Nothing holds the deleted words any more: neither the answer nor the turn after.
    assert lm.memory.search("paint weekend", user_id="u", mode="keyword", threshold=0.0) == []
    context, has_vector = _raw_context(lm, answer.id)
    assert context is not None and "paint" not in context and "hiking" in context
    assert has_vector  # its own and the next turn's
    hiking_context, _ = _raw_context(lm, hiking.id)
    assert hiking_context is not None and "paint" not in hiking_context
    assert "sunrise" in hiking_context
    lm.memory.update(answer.id, content="A sunset over the sea.")
    hiking_context, hiking_vector = _raw_context(lm, hiking.id)
    assert hiking_context is not None and "sunset" in hiking_context
    assert "sunrise" not in hiking_context and hiking_vector
    assert lm.memory.search("sunrise", user_id="u", mode="keyword", threshold=0.0) == []
    # Rewriting a turn renews the turns before it too (it is their next turn).
    lm.memory.update(hiking.id, content="I spent mine swimming.")
    context, _ = _raw_context(lm, answer.id)
    assert context is not None and "swimming" in context and "hiking" not in context
    assert lm.memory.search("hiking", user_id="u", mode="keyword", threshold=0.0) == []
    # Deleting the last turn leaves the one before it with its speaker and date only.
    assert lm.memory.delete(hiking.id)
    context, has_vector = _raw_context(lm, answer.id)
    assert context is not None and "swimming" not in context and not has_vector


def _neighbourhoods(ms: Lamina, tenant: str) -> dict[str, tuple[Any, ...]]:
    """Each memory's place, neighbourhood words and vector and keyword-index columns, read
    from the raw table, by id."""
    import numpy as np

    sql = (
        "SELECT id, conversation_id, conversation_position, context, context_embedding, "
        "lexicon FROM memories WHERE tenant_id = "
    )
    found = _raw_rows(ms, sql, tenant)

    def floats(vector: Any) -> tuple[float, ...] | None:
        if vector is None:
            return None
        if isinstance(vector, bytes):
            return tuple(np.frombuffer(vector, dtype=np.float32).tolist())
        return tuple(float(v) for v in str(vector).strip("[]").split(","))

    return {str(r[0]): (*r[1:4], floats(r[4]), r[5]) for r in found}


def test_an_import_gives_each_turn_the_neighbourhood_it_had(lm: Lamina, tmp_path: Path) -> None:
    """Conversations added call by call, exported, then imported under another tenant in
    batches of two records, in the reverse order of the file (each conversation's later
    turns first, its turns across batches): every turn gets the neighbourhood words,
    vector and keyword-index columns the add_messages calls gave it."""
    from lamina.memory.records import dump_record

    talk = [f"turn {i} about {w}" for i, w in enumerate(["tea", "boats", "rain", "jazz", "bread"])]
    for n, (start, stop) in enumerate([(0, 2), (2, 3), (3, 5)]):
        for user, cid in [("ann", "c1"), ("bob", "c2")]:
            lm.memory.add_messages(
                [
                    {"role": "user", "name": user, "content": f"{user} {t}"}
                    for t in talk[start:stop]
                ],
                user_id=user,
                conversation_id=cid,
            )
        if n == 1:
            lm.memory.add("A plain note about tea", layer="user", user_id="ann")
    records = [dump_record(r) for r in lm.memory.export(embeddings=True)]
    path = tmp_path / "turns.jsonl"
    path.write_text("".join(f"{r}\n" for r in reversed(records)), encoding="utf-8")
    report = lm.memory.import_(path, tenant_id="copy", batch_size=2)
    assert report.imported == len(records) == 11
    source, copy = _neighbourhoods(lm, "default"), _neighbourhoods(lm, "copy")
    assert copy == source
    assert (
        sum(
            context is not None and vector is not None
            for _, _, context, vector, _ in source.values()
        )
        == 10
    )


def test_turns_imported_at_one_position_keep_the_order_they_were_stored_in(
    lm: Lamina, tmp_path: Path
) -> None:
    """Two turns of a file at one position (hand-made, or two exports merged) are in the
    order they were stored, on both stores and whichever path makes the neighbourhood:
    the turn two places after them sees the second of them, before and after a renewal."""
    from lamina.memory.records import dump_record

    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    added = lm.memory.add_messages(
        [{"role": "user", "content": w} for w in words], user_id="u", conversation_id="c"
    ).memories
    records = [dump_record(r) for r in lm.memory.export(embeddings=True)]
    tied = []
    for line in records:
        record = json.loads(line)
        if record["content"] == "charlie":  # charlie at bravo's position
            record["metadata"]["conversation"]["position"] = 1
        tied.append(json.dumps(record))
    path = tmp_path / "tied.jsonl"
    path.write_text("".join(f"{r}\n" for r in tied), encoding="utf-8")
    assert lm.memory.import_(path, tenant_id="copy").imported == 5

    def echo_context() -> str:
        by_id = _neighbourhoods(lm, "copy")
        return str(by_id[added[4].id][2])

    # echo (position 4) follows delta (3): its two previous turns are charlie and delta.
    assert "charlie" in echo_context() and "bravo" not in echo_context()
    lm.memory.update(added[3].id, content="foxtrot", tenant_id="copy")  # renews echo in SQL
    assert "charlie" in echo_context() and "foxtrot" in echo_context()
    assert "bravo" not in echo_context()


def test_a_conversation_id_reused_by_another_user_lends_no_words(lm: Lamina) -> None:
    lm.memory.add_messages(
        [{"role": "user", "content": "My bank PIN is zanzibar4471"}],
        user_id="alice",
        conversation_id="chat",
    )
    bob = lm.memory.add_messages(
        [{"role": "user", "content": "hello there"}], user_id="bob", conversation_id="chat"
    ).memories[0]
    assert lm.memory.search("zanzibar4471", user_id="bob", mode="keyword", threshold=0) == []
    context, has_vector = _raw_context(lm, bob.id)
    assert context is not None and "zanzibar" not in context and not has_vector
    # Deleting alice's turn renews nothing of bob's either.
    alice = lm.memory.search("bank PIN", user_id="alice")[0].memory
    assert lm.memory.delete(alice.id)
    assert _raw_context(lm, bob.id) == (context, False)


def test_conversation_metadata_is_reserved_for_add_messages(lm: Lamina) -> None:
    forged = {"conversation": {"id": "c1", "position": 0, "speaker": "Melanie"}}
    with pytest.raises(LaminaError) as err:
        lm.memory.add("I painted the lake", layer="user", user_id="u", metadata=forged)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert err.value.details["field"] == "metadata.conversation"
    with pytest.raises(LaminaError):
        lm.memory.bulk_add([{"content": "x", "layer": "user", "user_id": "u", "metadata": forged}])
    assert lm.memory.list(user_id="u").total_count == 0
    # Ids a store cannot hold (NUL, lone surrogates) are refused before any SQL.
    for bad in ("a\x00b", "\ud800"):
        for call in (lm.memory.get, lm.memory.delete, lm.memory.history):
            with pytest.raises(LaminaError) as err:
                call(bad)
            assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_every_score_is_rebuilt_from_its_parts(lm: Lamina) -> None:
    lm.memory.add_messages(PAINTING, user_id="u", conversation_id="c1")
    lm.memory.add("Prefers dark mode in every editor", layer="user", user_id="u")
    for mode in ("hybrid", "semantic", "keyword"):
        hits = lm.memory.search(
            'did Melanie paint a "sunrise over the lake" in May 2023?',
            user_id="u",
            mode=mode,
            threshold=0.0,
        )
        assert hits, mode
        for hit in hits:
            p = hit.parts
            w = p.semantic_weight
            raw = w * (p.semantic or 0.0) + (1 - w) * (p.keyword or 0.0)
            raw += p.speaker + p.conversation + p.phrase + p.date + p.stale + p.question
            assert math.isclose(hit.score, 1 - math.exp(-SCORE_RATE * raw), rel_tol=1e-9)
            assert 0.0 <= hit.score <= 1.0
            assert hit.semantic_score == p.semantic and hit.keyword_score == p.keyword
            assert (p.semantic is None) == (mode == "keyword")
            assert (p.keyword is None) == (mode == "semantic")
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        sunrise = next(h for h in hits if "sunrise" in h.memory.content)
        assert sunrise.parts.phrase > 0 and sunrise.parts.date > 0, mode
        # The turn that asks loses a share of its score; the others lose nothing.
        for hit in hits:
            asks = hit.memory.content.endswith("?")
            assert (hit.parts.question < 0) == asks and hit.parts.stale == 0, mode


def test_the_date_signal_reads_the_event_time_of_any_memory(lm: Lamina) -> None:
    """Not only a message's timestamp: the event time a plain memory was given counts, and a
    hit's whole row (metadata, times) comes back although ranking read only its parts."""
    dated = lm.memory.add(
        "Moved the team offsite to the lake house",
        layer="user",
        user_id="u",
        metadata={"source": "calendar", "n": 3},
        timestamp="2021-06-12T09:00:00+00:00",
    )
    lm.memory.add("Moved the team offsite to the city hall", layer="user", user_id="u")
    hits = lm.memory.search("where was the offsite in June 2021?", user_id="u", threshold=0)
    assert hits[0].memory.id == dated.id
    assert hits[0].parts.date > 0 and hits[1].parts.date == 0
    assert hits[0].memory.metadata == {"source": "calendar", "n": 3}
    assert hits[0].memory.event_at == dated.event_at
    assert hits[0].memory == lm.memory.get(dated.id)


def test_the_date_signal_is_the_same_day_whatever_the_server_time_zone(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL hands times back in its session's TimeZone (libpq takes PGTZ): the event's
    day is still its UTC day, as on the embedded store."""
    url = require_postgres()
    empty_database(url)
    monkeypatch.setenv("PGTZ", "Pacific/Kiritimati")  # UTC+14: 20:00 UTC is the next day
    with Lamina(fast_settings(data_dir, database_url=url)) as ms:
        dated = ms.memory.add(
            "Closed the quarter with a team dinner",
            layer="user",
            user_id="u",
            timestamp="2021-06-30T20:00:00+00:00",
        )
        hits = ms.memory.search("what happened in June 2021?", user_id="u", threshold=0)
        assert [h.memory.id for h in hits] == [dated.id] and hits[0].parts.date > 0
        assert hits[0].memory.event_at == dated.event_at
        assert hits[0].memory.event_at.utcoffset() == dated.event_at.utcoffset()


def test_defaults_are_hybrid_and_the_threshold_says_what_it_removed(lm: Lamina) -> None:
    lm.memory.add("Prefers dark mode in every editor", layer="user", user_id="alice")
    lm.memory.add("The deployment runs on Fridays", layer="user", user_id="alice")
    hits = lm.memory.search("editor theme", user_id="alice")
    assert [h.memory.content for h in hits] == ["Prefers dark mode in every editor"]
    assert hits[0].parts.semantic is not None and hits[0].parts.keyword is not None
    assert hits[0].score >= 0.7 and hits.below_threshold == 1
    nothing = lm.memory.search("quarterly tax filing deadline", user_id="alice")
    assert nothing == [] and nothing.below_threshold == 2
    everything = lm.memory.search("quarterly tax filing deadline", user_id="alice", threshold=0)
    assert len(everything) == 2 and everything.below_threshold == 0
    # Bad thresholds and modes: a clear error, nothing changed.
    for bad in ({"threshold": "high"}, {"threshold": math.nan}, {"mode": "fuzzy"}):
        with pytest.raises(LaminaError) as err:
            lm.memory.search("editor", user_id="alice", **bad)
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert lm.memory.list(user_id="alice").total_count == 2


def test_the_retriever_searches_memories_in_the_default_mode(lm: Lamina) -> None:
    lm.memory.add("User prefers answers in German", layer="user", user_id="u1")
    prompt = lm.context.build_prompt(
        "Base.", "which language should answers be in?", identifiers={"user_id": "u1"}
    )
    assert "## Relevant Memories\n- User prefers answers in German" in prompt


def test_possessives_name_the_speaker() -> None:
    assert "caroline" in QuerySignals.of("What did Caroline's sister paint?").words
    assert "caroline" in QuerySignals.of("What did Caroline’s sister paint?").words


def test_query_signals() -> None:
    signals = QuerySignals.of(
        'Did Caroline say "support group" on 8 May, 2023 or May 9th 2023, '
        "in 2022-12-31, in June 2021 or in 2019? Not 2023-13-01."
    )
    assert {"caroline", "support", "group"} <= signals.words
    assert signals.phrases == ("support group",)
    assert set(signals.dates) == {
        (2023, 5, 8),
        (2023, 5, 9),
        (2022, 12, 31),
        (2021, 6, None),
        (2019, None, None),
    }
    assert QuerySignals.of("nothing dated here").dates == ()
    assert math.isclose(ScoreParts(semantic=raw_of(0.7) * 2, keyword=0.0).score, 0.7)
