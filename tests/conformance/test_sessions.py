"""The session-store contract (lamina.observational.ports), the same on every store."""

from __future__ import annotations

import asyncio

import pytest

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.ports import Selection
from lamina.observational.ports import NewGraph, NewMessage, NewNote
from tests.conformance.conftest import Harness


def msgs(*texts: str) -> list[NewMessage]:
    return [NewMessage("user" if i % 2 == 0 else "assistant", t, 3) for i, t in enumerate(texts)]


def test_messages_append_in_order_per_session_and_tenant(harness: Harness) -> None:
    h, s = harness, harness.store.sessions
    first = h.run(s.append_messages("t1", "a", msgs("m0", "m1")))
    assert [m.index for m in first] == [0, 1]
    more = h.run(
        s.append_messages(
            "t1",
            "a",
            [NewMessage("tool", "m2", 5, [{"name": "grep", "input": "x", "output": "y"}])],
        )
    )
    assert more[0].index == 2
    h.run(s.append_messages("t1", "b", msgs("other")))
    h.run(s.append_messages("t2", "a", msgs("other tenant")))
    listed = h.run(s.list_messages("t1", "a"))
    assert [m.content for m in listed] == ["m0", "m1", "m2"]
    assert listed[2].tool_calls == [{"name": "grep", "input": "x", "output": "y"}]
    assert [m.index for m in h.run(s.list_messages("t1", "a", start=1, limit=1))] == [1]
    assert h.run(s.list_sessions("t1")) == [("a", 3), ("b", 1)]
    assert h.run(s.list_sessions("t2")) == [("a", 1)]
    # Pages of sessions by key, and totals counted in the store.
    h.run(s.append_messages("t1", "c", msgs("c0", "c1")))
    assert h.run(s.list_sessions("t1", limit=2)) == [("a", 3), ("b", 1)]
    assert h.run(s.list_sessions("t1", after="b", limit=2)) == [("c", 2)]
    assert h.run(s.list_sessions("t1", after="c")) == []
    # Key order is by code point on every store, whatever the database's collation.
    for key in ("B", "a-1", "a_1", "é"):
        h.run(s.append_messages("t3", key, msgs("x")))
    assert [k for k, _ in h.run(s.list_sessions("t3"))] == ["B", "a-1", "a_1", "é"]
    assert [k for k, _ in h.run(s.list_sessions("t3", after="a-1"))] == ["a_1", "é"]
    assert h.run(s.message_totals("t1", "a", 0)) == (3, 3 + 3 + 5, 2, 3 + 5)
    assert h.run(s.message_totals("t1", "a", -1)) == (3, 11, 3, 11)
    assert h.run(s.message_totals("t1", "none", -1)) == (0, 0, 0, 0)
    assert h.run(s.message_totals("t2", "a", 5)) == (1, 3, 0, 0)


def test_messages_are_deleted_from_an_index_on_per_session_and_tenant(harness: Harness) -> None:
    h, s = harness, harness.store.sessions
    h.run(s.append_messages("t1", "a", msgs("m0", "m1", "m2", "m3")))
    h.run(s.append_messages("t1", "b", msgs("b0")))
    h.run(s.append_messages("t2", "a", msgs("x0", "x1")))
    assert h.run(s.last_index("t1", "a")) == 3 and h.run(s.last_index("t1", "none")) == -1
    assert h.run(s.delete_messages("t1", "a", 2)) == 2
    assert h.run(s.last_index("t1", "a")) == 1
    assert [m.content for m in h.run(s.list_messages("t1", "a"))] == ["m0", "m1"]
    # The next message takes the freed index.
    assert h.run(s.append_messages("t1", "a", msgs("m2b")))[0].index == 2
    assert h.run(s.delete_messages("t1", "a", 9)) == 0
    assert h.run(s.delete_messages("t1", "a", 0)) == 3
    assert h.run(s.list_messages("t1", "a")) == []
    assert [m.content for m in h.run(s.list_messages("t1", "b"))] == ["b0"]
    assert [m.content for m in h.run(s.list_messages("t2", "a"))] == ["x0", "x1"]


def test_compaction_is_atomic_and_moves_indexes_and_ranges(harness: Harness) -> None:
    h, s = harness, harness.store.sessions
    h.run(s.append_messages("t1", "a", msgs(*[f"m{i}" for i in range(8)])))
    early = h.run(s.add_note("t1", "a", NewNote("obs 0-3", 4, 0, (0, 3))))
    late = h.run(s.add_note("t1", "a", NewNote("obs 4-6", 4, 0, (4, 6))))
    summary = h.run(s.compact_messages("t1", "a", 5, "User discussed weather", 6))
    assert (summary.index, summary.role) == (0, "system")
    assert summary.content == "[Compacted Summary]\nUser discussed weather"
    rest = h.run(s.list_messages("t1", "a"))
    assert [(m.index, m.content) for m in rest] == [
        (0, "[Compacted Summary]\nUser discussed weather"),
        (1, "m6"),
        (2, "m7"),
    ]
    assert rest[0].created_at < rest[1].created_at  # dated before the remaining messages
    ranges = {
        n.id: (n.source_start, n.source_end)
        for n in h.run(s.list_notes("t1", "a", reflections=False))
    }
    assert ranges == {early.id: (0, 0), late.id: (1, 1)}
    assert h.run(s.observed_through("t1", "a")) == 1

    for bad in (3, -1, 99):
        with pytest.raises(LaminaError) as err:
            h.run(s.compact_messages("t1", "a", bad, "x", 1))
        assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert len(h.run(s.list_messages("t1", "a"))) == 3  # nothing changed by the refusals
    # An empty session: index 0 still inserts the summary.
    only = h.run(s.compact_messages("t1", "empty", 0, "nothing yet", 2))
    assert only.index == 0 and len(h.run(s.list_messages("t1", "empty"))) == 1


def test_notes_recent_first_replacement_and_deletes(harness: Harness) -> None:
    h, s = harness, harness.store.sessions
    obs = [h.run(s.add_note("t1", "a", NewNote(f"o{i}", 10, 0, (i, i)))) for i in range(5)]
    h.run(s.add_note("t1", "b", NewNote("other session", 10, 0, (0, 0))))
    recent = h.run(s.list_notes("t1", "a", reflections=False, limit=3))
    assert [n.content for n in recent] == ["o2", "o3", "o4"]  # the 3 most recent, oldest first
    assert h.run(s.observed_through("t1", "a")) == 4
    ref = h.run(s.add_note("t1", "a", NewNote("r1", 7, 1, (0, 4)), replaces=[n.id for n in obs]))
    assert h.run(s.list_notes("t1", "a", reflections=False)) == []
    assert [
        (n.content, n.generation) for n in h.run(s.list_notes("t1", "a", reflections=True))
    ] == [("r1", 1)]
    assert h.run(s.observed_through("t1", "a")) == 4  # the reflection keeps the range
    h.run(s.add_note("t1", "a", NewNote("r2", 7, 2, (0, 4)), replaces=[ref.id]))
    assert [n.generation for n in h.run(s.list_notes("t1", "a", reflections=True))] == [2]
    assert h.run(s.delete_notes("t1", "a", reflections=True)) == 1
    assert h.run(s.delete_notes("t1", "a", reflections=True)) == 0  # empty: a no-op
    assert h.run(s.delete_notes("t1", "nobody", reflections=False)) == 0
    assert [n.content for n in h.run(s.list_notes("t1", "b", reflections=False))] == [
        "other session"
    ]
    assert h.run(s.observed_through("t1", "a")) == -1
    assert h.run(s.list_notes("t2", "b", reflections=False)) == []


def test_leases_exclude_other_owners_until_they_expire(harness: Harness) -> None:
    h, s = harness, harness.store.sessions
    assert h.run(s.acquire_lease("t1", "a", "p1", 60))
    assert h.run(s.acquire_lease("t1", "a", "p1", 60))  # the owner renews
    assert not h.run(s.acquire_lease("t1", "a", "p2", 60))
    assert h.run(s.acquire_lease("t1", "b", "p2", 60))  # another session
    assert h.run(s.acquire_lease("t2", "a", "p2", 60))  # another tenant
    h.run(s.release_lease("t1", "a", "p2"))  # not p2's: nothing happens
    assert not h.run(s.acquire_lease("t1", "a", "p2", 60))
    h.run(s.release_lease("t1", "a", "p1"))
    assert h.run(s.acquire_lease("t1", "a", "p2", 0.05))
    h.run(asyncio.sleep(0.1))
    assert h.run(s.acquire_lease("t1", "a", "p3", 60))  # p2's lease expired


def test_a_sessions_system_prompt_is_replaced_cleared_and_forgotten(harness: Harness) -> None:
    h, s = harness, harness.store.sessions
    assert h.run(s.system_prompt("t1", "a")) is None
    h.run(s.set_system_prompt("t1", "a", "You are the on-call assistant."))
    h.run(s.set_system_prompt("t1", "b", "Session b."))
    h.run(s.set_system_prompt("t2", "a", "Other tenant."))
    h.run(s.set_system_prompt("t1", "a", "You are the release bot."))  # replaces
    assert h.run(s.system_prompt("t1", "a")) == "You are the release bot."
    # Kept in the database: another connection (process) reads it.
    other = h.reopen()
    assert h.run(other.sessions.system_prompt("t1", "a")) == "You are the release bot."
    assert h.run(other.sessions.system_prompt("t2", "a")) == "Other tenant."
    h.run(s.set_system_prompt("t1", "a", None))
    assert h.run(s.system_prompt("t1", "a")) is None
    h.run(s.set_system_prompt("t1", "a", None))  # clearing twice is fine
    assert h.run(s.system_prompt("t1", "b")) == "Session b."
    assert h.run(s.system_prompt("t2", "a")) == "Other tenant."
    # Forgetting a session takes its prompt; other sessions and tenants keep theirs.
    h.run(s.set_system_prompt("t1", "c", "Session c."))
    h.run(
        h.store.memories.forgetting.forget_where(
            "t1", Selection((), {"user_id": "nobody"}), session_keys=["b"]
        )
    )
    assert h.run(s.system_prompt("t1", "b")) is None
    assert h.run(s.system_prompt("t1", "c")) == "Session c."
    assert h.run(s.system_prompt("t2", "a")) == "Other tenant."


def test_concurrent_appends_never_collide(harness: Harness) -> None:
    h = harness
    other = h.reopen()

    async def many(store: object, tag: str) -> None:
        for i in range(15):
            await store.sessions.append_messages("t1", "a", msgs(f"{tag}{i}"))  # type: ignore[attr-defined]

    async def both() -> None:
        await asyncio.gather(many(h.store, "x"), many(other, "y"))

    h.run(both())
    listed = h.run(h.store.sessions.list_messages("t1", "a"))
    assert [m.index for m in listed] == list(range(30))
    assert sorted(m.content for m in listed) == sorted(
        [f"x{i}" for i in range(15)] + [f"y{i}" for i in range(15)]
    )


def test_graph_upserts_and_walks_within_depth_and_session(harness: Harness) -> None:
    h, s = harness, harness.store.sessions
    new = h.run(
        s.add_graph(
            "t1",
            "a",
            NewGraph(
                [("Alice", "person"), ("ALICE", "person")],
                [
                    ("Alice", "operates", "Staging  Cluster"),
                    ("staging cluster", "runs", "PostgreSQL 16"),
                    ("PostgreSQL 16", "stores", "Billing"),
                ],
            ),
        )
    )
    assert new == (4, 3)  # Alice once, whatever the case
    assert h.run(
        s.add_graph("t1", "a", NewGraph([], [("Alice", "operates", "staging cluster")]))
    ) == (0, 0)
    h.run(s.add_graph("t1", "b", NewGraph([], [("Alice", "likes", "Coffee")])))
    h.run(s.add_graph("t2", "a", NewGraph([], [("Alice", "secret", "Tenant Two")])))

    def walk(text: str, session: str | None, depth: int, limit: int = 10) -> list[str]:
        rows = h.run(
            s.graph_neighbourhood("t1", text, session_key=session, depth=depth, limit=limit)
        )
        return [" ".join(r) for r in rows]

    assert walk("What does alice run?", "a", 1) == ["Alice operates Staging  Cluster"]
    two = walk("What does alice run?", "a", 2)
    assert (
        two[0] == "Alice operates Staging  Cluster"
        and "staging cluster runs PostgreSQL 16" not in two
        and any(line.endswith("runs PostgreSQL 16") for line in two)
    )
    assert not any("Billing" in line for line in two)  # three hops away
    assert any("Billing" in line for line in walk("alice", "a", 3))
    every = walk("alice", None, 1)
    assert any("Coffee" in line for line in every) and not any(
        "Tenant Two" in line for line in every
    )
    assert walk("nobody mentioned", None, 3) == []
    assert len(walk("alice", None, 3, limit=2)) == 2
