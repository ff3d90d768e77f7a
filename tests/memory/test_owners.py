"""Who holds memories, through the library (the embedded store; tests/conformance runs the
store's side on PostgreSQL too): counts per layer, the owners of a layer a page at a time,
every memory of an owner across its layers agreeing with count_all, and bad input refused."""

from __future__ import annotations

import pytest

from lamina import Lamina
from lamina.errors import ErrorCode, LaminaError
from lamina.memory.layers import MemoryLayer


def _fill(ms: Lamina) -> None:
    ms.memory.add("Alice likes tea", layer="user", user_id="alice")
    ms.memory.add("Alice lives in Lisbon", layer="user", user_id="alice")
    for agent in ("bot", "helper", "zeta"):
        ms.memory.add(f"{agent} speaks to Alice", layer="agent", agent_id=agent, user_id="alice")
    ms.memory.add("Alice asked about trains", layer="session", session_id="s1", user_id="alice")
    ms.memory.add("Bob likes coffee", layer="user", user_id="bob")
    ms.memory.add("The build runs on Fridays", layer="project", project_id="p1")
    ms.memory.add("Alice of acme", layer="user", user_id="alice", tenant_id="acme")


def test_counts_per_layer_and_the_owners_of_a_layer(ms: Lamina) -> None:
    _fill(ms)
    counts = ms.memory.count_by_layer()
    assert list(counts) == [layer.value for layer in MemoryLayer]
    assert counts == {
        "agent": 3,
        "user": 3,
        "session": 1,
        "project": 1,
        "team": 0,
        "org": 0,
        "company": 0,
    }
    assert ms.memory.count_by_layer(tenant_id="acme")["user"] == 1
    users = ms.memory.owners("user")
    assert [(o.identifiers, o.count) for o in users.items] == [
        ({"user_id": "alice"}, 2),
        ({"user_id": "bob"}, 1),
    ]
    assert users.next_cursor is None
    # A page at a time; narrowed to one user's agents.
    first = ms.memory.owners("agent", limit=2)
    assert [o.identifiers["agent_id"] for o in first.items] == ["bot", "helper"]
    assert first.next_cursor is not None
    rest = ms.memory.owners("agent", limit=2, cursor=first.next_cursor)
    assert [o.identifiers for o in rest.items] == [{"agent_id": "zeta", "user_id": "alice"}]
    assert rest.next_cursor is None
    assert ms.memory.owners(MemoryLayer.AGENT, user_id="bob").items == []
    assert [o.count for o in ms.memory.owners("session", user_id="alice").items] == [1]
    assert [o.identifiers for o in ms.memory.owners("user", tenant_id="acme").items] == [
        {"user_id": "alice"}
    ]


def test_list_all_lists_what_count_all_counts(ms: Lamina) -> None:
    _fill(ms)
    page = ms.memory.list_all(user_id="alice")
    assert page.total_count == ms.memory.count_all(user_id="alice") == 6
    assert {m.layer.value for m in page.items} == {"user", "agent", "session"}
    # list (the layers the identifiers reach) sees only the user layer.
    assert ms.memory.list(user_id="alice").total_count == 2
    agents = ms.memory.list_all(user_id="alice", layers=["agent"], limit=2)
    assert agents.total_count == ms.memory.count_all(user_id="alice", layers="agent") == 3
    more = ms.memory.list_all(user_id="alice", layers=["agent"], cursor=agents.next_cursor)
    assert len(agents.items) + len(more.items) == 3
    # An invalidated fact is listed only when asked; count_all counts it until deleted.
    lisbon = next(m for m in page.items if "Lisbon" in m.content)
    ms.memory.invalidate(lisbon.id)
    assert ms.memory.list_all(user_id="alice").total_count == 5
    assert ms.memory.list_all(user_id="alice", include_invalid=True).total_count == 6
    assert ms.memory.count_all(user_id="alice") == 6
    assert ms.memory.list_all(user_id="alice", tenant_id="acme").total_count == 1


def test_bad_input_is_refused_with_its_code(ms: Lamina) -> None:
    _fill(ms)
    for call, code in [
        (lambda: ms.memory.list_all(), ErrorCode.MISSING_IDENTIFIER),
        (lambda: ms.memory.list_all(layers=["user"]), ErrorCode.MISSING_IDENTIFIER),
        (lambda: ms.memory.list_all(user_id="alice", layers=["nope"]), ErrorCode.INVALID_LAYER),
        (lambda: ms.memory.list_all(user_id="a\x00b"), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.list_all(user_id="alice", limit=0), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.owners("nope"), ErrorCode.INVALID_LAYER),
        (lambda: ms.memory.owners("user", project_id="p1"), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.owners("user", cursor="%%%"), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.owners("user", limit=10**9), ErrorCode.INVALID_ARGUMENT),
        (lambda: ms.memory.count_by_layer(tenant_id=""), ErrorCode.MISSING_IDENTIFIER),
    ]:
        with pytest.raises(LaminaError) as err:
            call()
        assert err.value.code is code, err.value
    with pytest.raises(LaminaError) as err:
        ms.memory.owners("user", project_id="p1")
    assert "user memories are held by user_id: project_id does not narrow them" in str(
        err.value.message
    )
    assert ms.memory.count_all(user_id="alice") == 6  # nothing lost
