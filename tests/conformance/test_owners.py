"""Who holds memories, on every store: the scopes of a layer with their counts
(``count_scopes``), a page at a time and narrowed by identifiers, and ``list`` of a
selection, which lists what ``count_where`` counts (less what its time window leaves out)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from lamina.memory.filters import parse_filter
from lamina.memory.layers import MemoryLayer
from lamina.memory.ports import Invalidation, Scope, ScopeCount, Selection
from lamina.memory.timing import Lifetime, TimeWindow
from tests.conformance.conftest import Harness
from tests.conformance.test_store import new, scope

T1, T2 = "tenant-one", "tenant-two"
EVERYTHING = parse_filter(None, None)


def _add(h: Harness, content: str, sc: Scope, tenant: str = T1, **life: datetime) -> str:
    memory = replace(new(h, content, tenant=tenant, sc=sc), lifetime=Lifetime(**life))
    return h.run(h.store.memories.writes.add(memory)).id


def _alice_and_bob(h: Harness) -> dict[str, str]:
    agent = scope(MemoryLayer.AGENT, agent_id="bot", user_id="alice")
    ids = {
        "user-1": _add(h, "Alice likes tea", scope()),
        "user-2": _add(h, "Alice lives in Lisbon", scope()),
        "agent-1": _add(h, "The bot calls Alice 'Al'", agent),
        "agent-2": _add(h, "The bot answers Alice in Portuguese", agent),
        "helper": _add(
            h,
            "The helper books Alice's trains",
            scope(MemoryLayer.AGENT, agent_id="helper", user_id="alice"),
        ),
        "session": _add(
            h,
            "Alice asked about trains",
            scope(MemoryLayer.SESSION, session_id="s1", user_id="alice"),
        ),
        "expired": _add(
            h, "Alice's one-time code", scope(), expires_at=datetime.now(UTC) - timedelta(seconds=1)
        ),
    }
    _add(h, "Bob likes coffee", scope(user_id="bob"))
    _add(h, "The bot calls Bob 'B'", scope(MemoryLayer.AGENT, agent_id="bot", user_id="bob"))
    _add(h, "Alice of the other tenant", scope(), tenant=T2)
    at = datetime.now(UTC)
    h.run(h.store.memories.writes.invalidate(T1, [Invalidation(ids["user-2"], at)]))
    return ids


def test_count_scopes_names_each_owner_of_a_layer_with_its_count(harness: Harness) -> None:
    h = harness
    _alice_and_bob(h)
    users = h.run(h.store.memories.owners.count_scopes(ScopeCount(T1, MemoryLayer.USER, limit=10)))
    # Every stored memory counts, as count_where counts: the invalidated and the expired too.
    assert users == [("alice", 3), ("bob", 1)]
    agents = h.run(
        h.store.memories.owners.count_scopes(ScopeCount(T1, MemoryLayer.AGENT, limit=10))
    )
    assert agents == [("bot\x1falice", 2), ("bot\x1fbob", 1), ("helper\x1falice", 1)]
    # A page at a time, after the last key of the one before.
    first = h.run(h.store.memories.owners.count_scopes(ScopeCount(T1, MemoryLayer.AGENT, limit=2)))
    assert first == agents[:2]
    rest = h.run(
        h.store.memories.owners.count_scopes(
            ScopeCount(T1, MemoryLayer.AGENT, limit=2, after=first[-1][0])
        )
    )
    assert rest == agents[2:]
    # Narrowed by identifiers: alice's agents, the bot's users.
    alices = {"user_id": "alice"}
    assert h.run(
        h.store.memories.owners.count_scopes(
            ScopeCount(T1, MemoryLayer.AGENT, limit=10, identifiers=alices)
        )
    ) == [
        ("bot\x1falice", 2),
        ("helper\x1falice", 1),
    ]
    bots = {"agent_id": "bot"}
    assert [
        k
        for k, _ in h.run(
            h.store.memories.owners.count_scopes(
                ScopeCount(T1, MemoryLayer.AGENT, limit=10, identifiers=bots)
            )
        )
    ] == [
        "bot\x1falice",
        "bot\x1fbob",
    ]
    # The counts add up to the layer's and to count_where's; other tenants are not seen.
    assert sum(n for _, n in users) == h.run(h.store.memories.owners.count_by_layer(T1))["user"]
    assert sum(n for _, n in agents[::2]) == h.run(
        h.store.memories.forgetting.count_where(
            T1, Selection((MemoryLayer.AGENT,), {"user_id": "alice"})
        )
    )
    assert h.run(
        h.store.memories.owners.count_scopes(ScopeCount(T2, MemoryLayer.USER, limit=10))
    ) == [("alice", 1)]
    assert (
        h.run(h.store.memories.owners.count_scopes(ScopeCount(T2, MemoryLayer.AGENT, limit=10)))
        == []
    )
    # Identifiers that do not scope the layer select nothing.
    projects = {"project_id": "p"}
    assert (
        h.run(
            h.store.memories.owners.count_scopes(
                ScopeCount(T1, MemoryLayer.USER, limit=10, identifiers=projects)
            )
        )
        == []
    )


def test_list_of_a_selection_lists_what_count_where_counts(harness: Harness) -> None:
    h = harness
    ids = _alice_and_bob(h)
    alices = Selection((), {"user_id": "alice"})
    counted = h.run(h.store.memories.forgetting.count_where(T1, alices))
    assert counted == 7

    def listed(selection: Selection, window: TimeWindow | None, limit: int = 50) -> list[str]:
        page = h.run(
            h.store.memories.reads.list(
                T1,
                scopes=(),
                selection=selection,
                flt=EVERYTHING,
                limit=limit,
                cursor=None,
                window=window,
            )
        )
        assert page.total_count == len(page.items) or page.next_cursor is not None
        return [m.id for m in page.items]

    every = listed(alices, TimeWindow(include_invalid=True))
    # All but the expired memory (count_where counts it until it is purged), newest first.
    expected = [ids[k] for k in ("session", "helper", "agent-2", "agent-1", "user-2", "user-1")]
    assert every == expected
    assert len(every) == counted - 1
    valid = listed(alices, None)
    assert ids["user-2"] not in valid and len(valid) == 5
    agents = Selection((MemoryLayer.AGENT,), {"user_id": "alice"})
    assert listed(agents, None) == [ids["helper"], ids["agent-2"], ids["agent-1"]]
    # A page at a time with the cursor, the total counted over the whole selection.
    page = h.run(
        h.store.memories.reads.list(
            T1, scopes=(), selection=alices, flt=EVERYTHING, limit=2, cursor=None, window=None
        )
    )
    assert page.total_count == 5 and page.next_cursor is not None
    after = h.run(
        h.store.memories.reads.list(
            T1,
            scopes=(),
            selection=alices,
            flt=EVERYTHING,
            limit=10,
            cursor=page.next_cursor,
            window=None,
        )
    )
    assert [m.id for m in page.items + after.items] == valid
    # Nothing of another tenant; identifiers no layer is scoped by together: nothing.
    other = h.run(
        h.store.memories.reads.list(
            T2, scopes=(), selection=alices, flt=EVERYTHING, limit=10, cursor=None, window=None
        )
    )
    assert [m.content for m in other.items] == ["Alice of the other tenant"]
    odd = Selection((), {"project_id": "p", "user_id": "alice"})
    assert listed(odd, None) == [] and h.run(h.store.memories.forgetting.count_where(T1, odd)) == 0
