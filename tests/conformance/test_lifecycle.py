"""Time, validity, expiry, exact duplicates and consolidation's transaction: the same answers
from every store (lamina.memory.timing is the reference)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from datetime import UTC, datetime, timedelta

import pytest

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter
from lamina.memory.models import SearchMode
from lamina.memory.ports import Consolidation, Invalidation, LayerSearch, NewMemory, Revision
from lamina.memory.scoring import QuerySignals
from lamina.memory.timing import Lifetime, TimeWindow
from lamina.text import analyze
from tests.conformance.conftest import Harness
from tests.conformance.test_store import T1, T2, new, scope

NOW = datetime.now(UTC)
PAST, FUTURE = NOW - timedelta(days=1), NOW + timedelta(days=1)


def timed(h: Harness, content: str, life: Lifetime, **kw: object) -> NewMemory:
    return dataclasses.replace(new(h, content, **kw), lifetime=life)  # type: ignore[arg-type]


def found(
    h: Harness, query: str, window: TimeWindow, mode: SearchMode, limit: int = 50
) -> list[str]:
    vector = h.run(h.store.memories.embeddings.generate_embedding(T1, [query]))[0]
    req = LayerSearch(
        T1,
        scope(),
        mode,
        query,
        vector,
        tuple(analyze(query)),
        0.0,
        limit,
        MetadataFilter(),
        signals=QuerySignals.of(query),
        window=window,
    )
    return sorted(hit.entry.content for hit in h.run(h.store.memories.reads.search(req)).hits)


def listed(h: Harness, window: TimeWindow | None) -> list[str]:
    page = h.run(
        h.store.memories.reads.list(
            T1, scopes=[scope()], flt=MetadataFilter(), limit=100, cursor=None, window=window
        )
    )
    return sorted(m.content for m in page.items)


def test_time_windows_select_the_same_memories_everywhere(harness: Harness) -> None:
    h = harness
    cases = {
        "plain": Lifetime(),
        "old event": Lifetime(event_at=NOW - timedelta(days=30)),
        "future event": Lifetime(event_at=FUTURE),
        "no longer valid": Lifetime(valid_until=PAST),
        "valid later": Lifetime(valid_from=FUTURE),
        "valid now": Lifetime(valid_from=PAST, valid_until=FUTURE),
        "expired": Lifetime(expires_at=PAST),
        "expires later": Lifetime(expires_at=FUTURE),
    }
    entries = h.run(
        h.store.memories.writes.bulk_add(
            [timed(h, f"the report {name}", life) for name, life in cases.items()]
        )
    )
    assert [e.event_at is not None for e in entries] == [True] * len(cases)
    assert entries[1].event_at == cases["old event"].event_at
    windows = [
        TimeWindow(),
        TimeWindow(include_invalid=True),
        TimeWindow(since=NOW - timedelta(days=2)),
        TimeWindow(until=NOW - timedelta(days=2), include_invalid=True),
        TimeWindow(since=PAST, until=FUTURE + timedelta(hours=1)),
    ]
    for window in windows:
        want = sorted(
            f"the report {name}"
            for name, life, entry in zip(cases, cases.values(), entries, strict=True)
            if window.admits(
                entry.event_at or NOW, life.valid_from, life.valid_until, life.expires_at
            )
        )
        assert listed(h, window) == want
        for mode in SearchMode:
            assert found(h, "the report", window, mode) == want, (window, mode)
    # Expired memories are never read back, not even by id; invalid ones are.
    assert h.run(h.store.memories.reads.get(T1, entries[6].id)) is None
    assert h.run(h.store.memories.reads.get(T1, entries[3].id)) is not None
    assert "the report expired" not in listed(h, TimeWindow(include_invalid=True))


def test_many_invalid_memories_do_not_hide_the_valid_ones(harness: Harness) -> None:
    """The best candidates are all invalid: search looks further and still finds the valid
    memories (the pool widens on SQLite; PostgreSQL joins the ranking with the rows)."""
    h = harness
    stale = [timed(h, f"deploy checklist step {i}", Lifetime(valid_until=PAST)) for i in range(80)]
    h.run(
        h.store.memories.writes.bulk_add(
            [*stale, new(h, "an unrelated note about the deploy checklist")]
        )
    )
    for mode in SearchMode:
        # limit 2: 50 candidates a source, all of them invalid at first
        assert found(h, "deploy checklist step", TimeWindow(), mode, limit=2) == [
            "an unrelated note about the deploy checklist"
        ]


def test_exact_duplicates_are_returned_not_stored(harness: Harness) -> None:
    h = harness
    first = h.run(
        h.store.memories.writes.add(
            dataclasses.replace(new(h, "Alice lives in Lisbon"), dedup=True)
        )
    )
    again = dataclasses.replace(new(h, "  alice LIVES in\tLisbon "), dedup=True)
    second = h.run(h.store.memories.writes.add(again))
    assert second.id == first.id and second.deduplicated and not first.deduplicated
    # Off: a new row. Another scope or tenant: a new row.
    assert h.run(h.store.memories.writes.add(new(h, "Alice lives in Lisbon"))).id != first.id
    other = dataclasses.replace(
        new(h, "Alice lives in Lisbon", sc=scope(user_id="bob")), dedup=True
    )
    assert h.run(h.store.memories.writes.add(other)).id != first.id
    mine = dataclasses.replace(new(h, "Alice lives in Lisbon", tenant=T2), dedup=True)
    assert not h.run(h.store.memories.writes.add(mine)).deduplicated
    # Within one call, and against an invalid copy (which does not count).
    batch = [dataclasses.replace(new(h, t), dedup=True) for t in ("x y", "X  Y", "z")]
    out = h.run(h.store.memories.writes.bulk_add(batch))
    assert out[1].id == out[0].id and out[1].deduplicated and out[2].id != out[0].id
    h.run(h.store.memories.writes.invalidate(T1, [Invalidation(out[2].id, NOW)]))
    assert not h.run(
        h.store.memories.writes.add(dataclasses.replace(new(h, "z"), dedup=True))
    ).deduplicated


def test_concurrent_writers_of_one_content_store_it_once(harness: Harness) -> None:
    h = harness
    memory = new(h, "the one and only")
    writers = [dataclasses.replace(memory, id=f"w{i}", dedup=True) for i in range(8)]

    async def race() -> list[str]:
        done = await asyncio.gather(*(h.store.memories.writes.add(m) for m in writers))
        return [e.id for e in done]

    ids = h.run(race())
    assert len(set(ids)) == 1
    assert listed(h, None).count("the one and only") == 1


def test_invalidate_and_consolidate_are_all_or_nothing(harness: Harness) -> None:
    h = harness
    old, other = h.run(
        h.store.memories.writes.bulk_add(
            [new(h, "Alice lives in Berlin"), new(h, "Alice likes tea")]
        )
    )
    fact = new(h, "Alice moved to Lisbon")
    vector = h.run(h.store.memories.embeddings.generate_embedding(T1, ["Alice likes green tea"]))[0]
    stale = Revision(other.id, other.updated_at - timedelta(seconds=1), "changed", vector)
    with pytest.raises(LaminaError) as err:
        h.run(
            h.store.memories.writes.consolidate(
                Consolidation(
                    T1,
                    added=[fact],
                    invalidated=[Invalidation(old.id, NOW, old.updated_at)],
                    revised=[stale],
                )
            )
        )
    assert err.value.code is ErrorCode.CONFLICT
    assert listed(h, None) == ["Alice likes tea", "Alice lives in Berlin"]  # nothing written
    with pytest.raises(LaminaError) as err:
        h.run(
            h.store.memories.writes.invalidate(
                T1, [Invalidation(old.id, NOW), Invalidation("nope", NOW)]
            )
        )
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND
    assert h.run(h.store.memories.reads.get(T1, old.id)).valid_until is None  # type: ignore[union-attr]
    fresh = Revision(other.id, other.updated_at, "Alice likes green tea", vector)
    done = h.run(
        h.store.memories.writes.consolidate(
            Consolidation(
                T1,
                added=[fact],
                invalidated=[Invalidation(old.id, NOW, old.updated_at)],
                revised=[fresh],
            ),
            actor="tester",
        )
    )
    assert [e.content for e in done.added] == ["Alice moved to Lisbon"]
    assert (
        done.invalidated[0].valid_until == NOW
        and done.revised[0].content == "Alice likes green tea"
    )
    history = h.run(h.store.memories.reads.history(T1, old.id))
    assert [(e.operation.value, e.actor) for e in history] == [
        ("add", None),
        ("invalidate", "tester"),
    ]
    assert listed(h, None) == ["Alice likes green tea", "Alice moved to Lisbon"]


def test_expired_memories_are_purged_per_tenant(harness: Harness) -> None:
    h = harness
    for tenant, n in ((T1, 3), (T2, 2)):
        h.run(
            h.store.memories.writes.bulk_add(
                [timed(h, f"gone {i}", Lifetime(expires_at=PAST), tenant=tenant) for i in range(n)]
                + [timed(h, "stays", Lifetime(expires_at=FUTURE), tenant=tenant)]
            )
        )
    assert sorted(h.run(h.store.memories.forgetting.expired_tenants(NOW, 100))) == [T1, T2]
    assert h.run(h.store.memories.forgetting.purge_expired(T1, NOW, 2, actor="lamina:expiry")) == 2
    assert h.run(h.store.memories.forgetting.purge_expired(T1, NOW, 10)) == 1
    assert h.run(h.store.memories.forgetting.purge_expired(T2, NOW, 10)) == 2
    assert h.run(h.store.memories.forgetting.expired_tenants(NOW, 100)) == []
    assert listed(h, TimeWindow(include_invalid=True)) == ["stays"]
    counts = list(itertools.chain(h.run(h.store.memories.owners.count_by_layer(T1)).values()))
    assert counts == [1]
