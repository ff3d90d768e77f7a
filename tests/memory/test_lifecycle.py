"""Time through the library: event times, validity, time to live (per memory and the
session layer's default), the expiry job and its metric, write-time dedup, bad input."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lamina import ErrorCode, HistoryOperation, Lamina, LaminaError
from tests.conftest import fast_settings


def test_expired_memories_are_never_returned_and_the_job_removes_them(data_dir: Path) -> None:
    settings = fast_settings(data_dir, memory={"session_ttl": 0.4, "expiry_interval": 0.2})
    with Lamina(settings) as ms:
        ids = {"user_id": "u", "session_id": "s"}
        short = ms.memory.add("remember the parking spot: B4", layer="session", **ids)
        forever = ms.memory.add("the car is blue", layer="user", user_id="u")
        mine = ms.memory.add("a note for a minute", layer="user", user_id="u", ttl=60)
        said = ms.memory.add_messages([{"role": "user", "content": "B4, level two"}], **ids)
        assert short.expires_at is not None and forever.expires_at is None
        assert said.memories[0].expires_at is not None  # the session default applies
        assert mine.expires_at is not None and mine.expires_at > datetime.now(UTC) + timedelta(
            seconds=50
        )
        time.sleep(0.5)
        # Expired: gone from search, list and get at once, before the job runs or not.
        assert ms.memory.get(short.id) is None
        hits = ms.memory.search("parking spot", threshold=0, include_invalid=True, **ids)
        assert short.id not in {h.memory.id for h in hits}
        assert {m.id for m in ms.memory.list(include_invalid=True, **ids).items} == {
            forever.id,
            mine.id,
        }
        deadline = time.monotonic() + 5
        while "memory_expired_total 2.0" not in ms.metrics_text():
            assert time.monotonic() < deadline, ms.metrics_text()
            time.sleep(0.1)
        history = ms.memory.history(short.id)
        assert history[-1].operation is HistoryOperation.DELETE
        assert history[-1].actor == "lamina:expiry"
        assert ms.memory.purge_expired() == 0


def test_event_times_validity_and_ranges(ms: Lamina) -> None:
    old = ms.memory.add(
        "Alice started at Acme", layer="user", user_id="a", timestamp="2019-03-01T09:00:00+01:00"
    )
    assert old.event_at == datetime(2019, 3, 1, 8, tzinfo=UTC)
    new = ms.memory.add("Alice left Acme", layer="user", user_id="a")
    assert new.event_at is not None and new.event_at >= new.created_at - timedelta(seconds=1)
    future = ms.memory.add(
        "Alice starts at Initech", layer="user", user_id="a", valid_from="2999-01-01"
    )
    assert future.valid_from is not None
    listed = ms.memory.list(user_id="a")
    assert {m.id for m in listed.items} == {old.id, new.id}  # not valid yet: left out
    assert ms.memory.list(user_id="a", include_invalid=True).total_count == 3
    window = ms.memory.list(user_id="a", since="2019-01-01", until="2020-01-01")
    assert [m.id for m in window.items] == [old.id]
    hits = ms.memory.search("Acme", user_id="a", threshold=0, until="2020-01-01")
    assert [h.memory.id for h in hits] == [old.id]
    [gone] = ms.memory.invalidate(old.id, at="2021-06-01T00:00:00Z", actor="hr")
    assert gone.valid_until == datetime(2021, 6, 1, tzinfo=UTC)
    assert [e.operation.value for e in ms.memory.history(old.id)] == ["add", "invalidate"]
    assert ms.memory.search("Acme", user_id="a", threshold=0, until="2020-01-01") == []
    assert ms.memory.get(old.id) is not None  # invalid facts stay readable by id


def test_dedup_is_a_setting_and_a_flag(data_dir: Path) -> None:
    with Lamina(fast_settings(data_dir, memory={"dedup": False})) as ms:
        a = ms.memory.add("Tea, no sugar", layer="user", user_id="u")
        assert ms.memory.add("tea, NO sugar", layer="user", user_id="u").id != a.id
        again = ms.memory.add("Tea, no sugar", layer="user", user_id="u", dedup=True)
        assert again.deduplicated and again.id == a.id
        out = ms.memory.bulk_add(
            [
                {"content": "x", "layer": "user", "user_id": "u"},
                {"content": "X", "layer": "user", "user_id": "u", "ttl": 5},
            ],
            dedup=True,
        )
        assert out[1].id == out[0].id and out[1].deduplicated
        assert [e.operation.value for e in ms.memory.history(a.id)] == ["add"]


def test_keyed_items_are_never_duplicates_either_way(ms: Lamina) -> None:
    """bulk_add(keyed=True) stores each item, and a later add of the same text (also after
    the item's text is updated to it) is a memory of its own; keyed must be a flag."""
    ids = {"layer": "user", "user_id": "u"}
    first, second = ms.memory.bulk_add(
        [{"content": "Tea, no sugar", **ids}, {"content": "draft", **ids}], keyed=True
    )
    assert not first.deduplicated and not second.deduplicated
    ms.memory.update(second.id, content="Coffee, black")
    for text in ("tea, NO sugar", "coffee, BLACK"):
        plain = ms.memory.add(text, **ids)
        assert not plain.deduplicated and plain.id not in {first.id, second.id}
        assert ms.memory.add(text, **ids).id == plain.id  # plain ones dedup as usual
    with pytest.raises(LaminaError) as err:
        ms.memory.bulk_add([{"content": "x", **ids}], keyed="yes")  # type: ignore[arg-type]
    assert (
        err.value.code is ErrorCode.INVALID_ARGUMENT and err.value.details.get("field") == "keyed"
    )
    assert len(ms.memory.list(user_id="u").items) == 4


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"timestamp": "tomorrow"}, "timestamp"),
        ({"timestamp": 12}, "timestamp"),
        ({"valid_from": "2030-01-01", "valid_until": "2020-01-01"}, "valid_from"),
        ({"ttl": 0}, "ttl"),
        ({"ttl": -5}, "ttl"),
        ({"ttl": "1h"}, "ttl"),
        ({"ttl": float("inf")}, "ttl"),
        ({"dedup": "yes"}, "dedup"),
        ({"infer": True, "valid_until": "2030-01-01"}, "valid_until"),
    ],
)
def test_bad_time_arguments_store_nothing(ms: Lamina, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(LaminaError) as err:
        ms.memory.add("x", layer="user", user_id="u", **kwargs)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert err.value.details.get("field") == field
    assert ms.memory.list(user_id="u", include_invalid=True).total_count == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"since": "soon"},
        {"until": 5},
        {"since": "2030-01-01", "until": "2020-01-01"},
        {"include_invalid": "yes"},
    ],
)
def test_bad_windows_are_refused(ms: Lamina, kwargs: dict[str, Any]) -> None:
    for call in (ms.memory.list, lambda **kw: ms.memory.search("x", **kw)):
        with pytest.raises(LaminaError) as err:
            call(user_id="u", **kwargs)
        assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_invalidate_is_all_or_nothing(ms: Lamina) -> None:
    kept = ms.memory.add("stays valid", layer="user", user_id="u")
    for ids, code in (
        ([kept.id, "missing"], ErrorCode.MEMORY_NOT_FOUND),
        ([], ErrorCode.INVALID_ARGUMENT),
        ([""], ErrorCode.INVALID_ARGUMENT),
    ):
        with pytest.raises(LaminaError) as err:
            ms.memory.invalidate(ids)
        assert err.value.code is code
    with pytest.raises(LaminaError) as err:
        ms.memory.invalidate(kept.id, at="later")
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert ms.memory.get(kept.id).valid_until is None  # type: ignore[union-attr]
    assert [e.operation.value for e in ms.memory.history(kept.id)] == ["add"]
