"""The store conformance suite: one set of behaviours every MemoryStore implementation has."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from lamina.errors import ErrorCode, LaminaError
from lamina.memory.filters import MetadataFilter, matches, parse_filter
from lamina.memory.layers import MemoryLayer, scope_key
from lamina.memory.models import MemoryEntry, SearchMode
from lamina.memory.ports import LayerSearch, NewMemory, Scope
from lamina.memory.scoring import QuerySignals
from lamina.text import analyze
from tests.conformance.conftest import Harness

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

T1, T2 = "tenant-one", "tenant-two"


def scope(layer: MemoryLayer = MemoryLayer.USER, **ids: str) -> Scope:
    ids = ids or {"user_id": "alice"}
    return Scope(layer, ids, scope_key(layer, ids))


def new(
    h: Harness,
    content: str,
    *,
    tenant: str = T1,
    sc: Scope | None = None,
    metadata: dict[str, Any] | None = None,
) -> NewMemory:
    vector = h.run(h.store.memories.embeddings.generate_embedding(tenant, [content]))[0]
    return NewMemory(str(uuid.uuid4()), tenant, sc or scope(), content, metadata or {}, vector)


def search(
    h: Harness,
    query: str,
    *,
    mode: SearchMode = SearchMode.SEMANTIC,
    tenant: str = T1,
    sc: Scope | None = None,
    threshold: float | None = None,
    limit: int = 10,
    flt: MetadataFilter | None = None,
) -> list[Any]:
    vector = h.run(h.store.memories.embeddings.generate_embedding(tenant, [query]))[0]
    request = LayerSearch(
        tenant,
        sc or scope(),
        mode,
        query,
        vector,
        tuple(analyze(query)),
        threshold,
        limit,
        flt or MetadataFilter(),
        signals=QuerySignals.of(query),
    )
    return h.run(h.store.memories.reads.search(request)).hits


def test_capabilities_and_health(harness: Harness) -> None:
    caps = harness.store.capabilities()
    assert caps.vector_search and caps.keyword_search and caps.bulk_operations
    assert caps.embedding_dimensions == 384
    assert "cosine" in caps.distance_metrics
    assert set(caps.to_dict()) == {
        "vector_search",
        "keyword_search",
        "embedding_dimensions",
        "distance_metrics",
        "bulk_operations",
    }
    status = harness.run(harness.store.health_check())
    assert status.healthy
    harness.run(harness.store.initialize())  # initialize is idempotent


def test_add_get_roundtrip_and_tenant_isolation(harness: Harness) -> None:
    h = harness
    m = new(h, "Prefers dark mode", metadata={"tags": ["ui"], "n": {"deep": [1, 2]}})
    entry = h.run(h.store.memories.writes.add(m, actor="tester"))
    assert entry.id == m.id and entry.tenant_id == T1 and entry.layer is MemoryLayer.USER
    assert entry.identifiers == {"user_id": "alice"}
    assert entry.embedding_generated and entry.metadata["n"] == {"deep": [1, 2]}
    assert entry.created_at == entry.updated_at
    got = h.run(h.store.memories.reads.get(T1, m.id))
    assert got == entry
    assert h.run(h.store.memories.reads.get(T2, m.id)) is None
    assert h.run(h.store.memories.reads.get(T1, "no-such-id")) is None


def test_generate_embedding_is_normalised_and_stable(harness: Harness) -> None:
    h = harness
    a = h.run(
        h.store.memories.embeddings.generate_embedding(T1, ["same text", "other text", "same text"])
    )
    assert a.shape == (3, 384) and a.dtype == np.float32
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(a[0], a[2])
    b = h.run(h.store.memories.embeddings.generate_embedding(T1, ["same text"]))
    assert np.array_equal(a[0], b[0])


def test_semantic_search_scope_threshold_order_limit(harness: Harness) -> None:
    h = harness
    texts = [
        "The user likes dark editor themes",
        "The user drives a red bicycle",
        "Dark mode is enabled in the IDE",
        "Quarterly taxes are due in April",
    ]
    for t in texts:
        h.run(h.store.memories.writes.add(new(h, t)))
    h.run(
        h.store.memories.writes.add(new(h, "Dark editor theme preferred", sc=scope(user_id="bob")))
    )
    h.run(h.store.memories.writes.add(new(h, "Dark editor theme preferred", tenant=T2)))
    hits = search(h, "dark editor theme", threshold=-1.0)
    assert len(hits) == 4
    assert all(hit.entry.identifiers == {"user_id": "alice"} for hit in hits)
    assert all(hit.entry.tenant_id == T1 for hit in hits)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert hits[0].semantic_score is not None and hits[0].keyword_score is None
    assert hits[0].score == hits[0].parts.score and hits[0].vector is not None
    high = search(h, "dark editor theme", threshold=0.8)
    assert 0 < len(high) < 4 and all(hit.score >= 0.8 for hit in high)
    assert len(search(h, "dark editor theme", threshold=-1.0, limit=2)) == 2


def test_keyword_search_stems_and_scores(harness: Harness) -> None:
    h = harness
    h.run(h.store.memories.writes.add(new(h, "Editors should always use dark themes")))
    h.run(h.store.memories.writes.add(new(h, "The deployment runs on Fridays")))
    hits = search(h, "editor theme", mode=SearchMode.KEYWORD)
    assert [hit.entry.content for hit in hits] == ["Editors should always use dark themes"]
    assert hits[0].keyword_score is not None and hits[0].score >= 0
    assert search(h, "zebra", mode=SearchMode.KEYWORD) == []
    assert search(h, "editor", mode=SearchMode.KEYWORD, sc=scope(user_id="bob")) == []


def test_hybrid_scores_fused_in_unit_range(harness: Harness) -> None:
    h = harness
    for t in [
        "Editors should always use dark themes",
        "Night-time colour schemes for IDEs",
        "The deployment runs on Fridays",
    ]:
        h.run(h.store.memories.writes.add(new(h, t)))
    hits = search(h, "dark editor themes", mode=SearchMode.HYBRID, threshold=0.0)
    assert hits[0].entry.content == "Editors should always use dark themes"
    assert all(0.0 <= hit.score <= 1.0 for hit in hits)
    assert hits[0].keyword_score is not None and hits[0].semantic_score is not None


FILTER_DOCS: list[dict[str, Any]] = [
    {"tags": ["ui", "pref"], "priority": 1, "status": "open", "nested": {"kind": "a"}},
    {"tags": ["db"], "priority": 5, "status": "closed", "labels": ["x", "y"]},
    {"tags": [], "priority": 3.5, "status": "open", "flag": True},
    {"priority": "high", "status": None, "note": "contains O'Reilly; DROP TABLE"},
    {},
    # Values whose JSON text differs from the filter's (the SQLite store checks the text
    # before parsing it): floats equal to ints, big numbers, escapes, non-ASCII, nesting.
    {"n": 5.0, "big": 1e16, "quote": 'say "hi"', "city": "Zürich", "deep": {"a": {"b": 7}}},
    {"n": -5, "tags": ["x-1", "Ümlaut"], "neg": -0.0, "list": [1, "two", None, False]},
]
FILTER_CASES: list[tuple[Any, Any]] = [
    (["ui"], None),
    (["ui", "db"], None),
    (None, {"status": "open"}),
    (None, {"status": {"ne": "open"}}),
    (None, {"priority": {"gte": 3}}),
    (None, {"priority": {"gt": 1, "lte": 5}}),
    (None, {"priority": {"lt": 3.5}}),
    (None, {"status": {"in": ["closed", "open"]}}),
    (None, {"labels": {"contains": "y"}}),
    (None, {"note": {"contains": "DROP TABLE"}}),
    (None, {"nested.kind": "a"}),
    (None, {"flag": True}),
    (None, {"flag": 1}),
    (None, {"status": None}),
    (None, {"missing": {"ne": 1}}),
    (["pref"], {"status": "open", "priority": {"lt": 2}}),
    (None, {"priority": {"gt": "a"}}),
    (None, {"flag": {"gt": 0}}),
    (None, {"note": {"gte": "c"}}),
    (None, {"nested": {"eq": None}}),
    (None, {"labels": {"contains": "x"}, "status": {"ne": None}}),
    (None, {"n": 5}),
    (None, {"n": -5}),
    (None, {"n": {"in": [5, -5]}}),
    (None, {"big": 10000000000000000}),
    (None, {"quote": 'say "hi"'}),
    (None, {"quote": {"contains": '"hi"'}}),
    (None, {"city": "Zürich"}),
    (None, {"deep.a.b": 7}),
    (None, {"neg": 0}),
    (None, {"list": {"contains": False}}),
    (None, {"list": {"contains": "two"}}),
    (["Ümlaut"], None),
    (["x-1"], {"n": {"ne": 5}}),
]


def test_filters_agree_with_reference_semantics(harness: Harness) -> None:
    h = harness
    entries = [
        h.run(h.store.memories.writes.add(new(h, f"filter document {i}", metadata=meta)))
        for i, meta in enumerate(FILTER_DOCS)
    ]
    for tags, filters in FILTER_CASES:
        flt = parse_filter(tags, filters)
        expected = {e.id for e in entries if matches(flt, e.metadata)}
        page = h.run(
            h.store.memories.reads.list(T1, scopes=[scope()], flt=flt, limit=100, cursor=None)
        )
        assert {e.id for e in page.items} == expected, (tags, filters)
        assert page.total_count == len(expected)
        found = search(h, "filter document", threshold=-1.0, limit=100, flt=flt)
        assert {s.entry.id for s in found} == expected, (tags, filters)
        kw = search(h, "filter document", mode=SearchMode.KEYWORD, limit=100, flt=flt)
        assert {s.entry.id for s in kw} == expected, (tags, filters)


def test_update_content_metadata_and_not_found(harness: Harness) -> None:
    h = harness
    entry = h.run(
        h.store.memories.writes.add(new(h, "The office is in Berlin", metadata={"a": 1, "b": 2}))
    )
    meta_only = h.run(
        h.store.memories.writes.update(T1, entry.id, metadata_patch={"b": None, "c": 3})
    )
    assert meta_only.metadata == {"a": 1, "c": 3} and meta_only.content == entry.content
    assert meta_only.updated_at > entry.updated_at
    vector = h.run(
        h.store.memories.embeddings.generate_embedding(T1, ["The office moved to Lisbon"])
    )[0]
    changed = h.run(
        h.store.memories.writes.update(
            T1, entry.id, content="The office moved to Lisbon", embedding=vector
        )
    )
    assert changed.updated_at > meta_only.updated_at
    assert h.run(h.store.memories.reads.get(T1, entry.id)) == changed
    assert [s.entry.id for s in search(h, "Lisbon", mode=SearchMode.KEYWORD)] == [entry.id]
    assert search(h, "Berlin", mode=SearchMode.KEYWORD) == []
    top = search(h, "The office moved to Lisbon", threshold=0.9)
    assert [s.entry.id for s in top] == [entry.id]
    with pytest.raises(LaminaError) as err:
        h.run(h.store.memories.writes.update(T1, "missing", metadata_patch={"x": 1}))
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND
    with pytest.raises(LaminaError) as err:
        h.run(h.store.memories.writes.update(T2, entry.id, metadata_patch={"x": 1}))
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND


def test_delete_idempotent_and_history_kept(harness: Harness) -> None:
    h = harness
    entry = h.run(h.store.memories.writes.add(new(h, "Temporary note about lunch"), actor="ann"))
    assert h.run(h.store.memories.writes.delete(T2, entry.id)) is False
    assert h.run(h.store.memories.reads.get(T1, entry.id)) is not None
    assert h.run(h.store.memories.writes.delete(T1, entry.id, actor="bob")) is True
    assert h.run(h.store.memories.writes.delete(T1, entry.id)) is False
    assert h.run(h.store.memories.reads.get(T1, entry.id)) is None
    assert search(h, "Temporary note about lunch", threshold=-1.0) == []
    assert search(h, "lunch", mode=SearchMode.KEYWORD) == []
    events = h.run(h.store.memories.reads.history(T1, entry.id))
    assert [(e.operation.value, e.actor) for e in events] == [("add", "ann"), ("delete", "bob")]
    # Forgotten: the events say what happened, when and by whom, never the content.
    assert all(e.old_content is None and e.new_content is None for e in events)
    assert all(e.old_metadata is None and e.new_metadata is None for e in events)
    assert h.run(h.store.memories.reads.history(T2, entry.id)) == []


def test_bulk_add_and_bulk_delete(harness: Harness) -> None:
    h = harness
    items = [new(h, f"bulk memory number {i}") for i in range(30)]
    entries = h.run(h.store.memories.writes.bulk_add(items))
    assert [e.id for e in entries] == [m.id for m in items]
    page = h.run(
        h.store.memories.reads.list(
            T1, scopes=[scope()], flt=MetadataFilter(), limit=100, cursor=None
        )
    )
    assert page.total_count == 30
    removed = h.run(
        h.store.memories.writes.bulk_delete(T1, [m.id for m in items[:10]] + ["absent"])
    )
    assert removed == 10
    page = h.run(
        h.store.memories.reads.list(
            T1, scopes=[scope()], flt=MetadataFilter(), limit=100, cursor=None
        )
    )
    assert page.total_count == 20
    duplicate = items[15]
    with pytest.raises(LaminaError) as err:
        h.run(h.store.memories.writes.bulk_add([new(h, "fresh one"), duplicate]))
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    page = h.run(
        h.store.memories.reads.list(
            T1, scopes=[scope()], flt=MetadataFilter(), limit=100, cursor=None
        )
    )
    assert page.total_count == 20  # all or nothing
    # A count limit stops counting there, and says so; at or above the total it is exact.
    capped = h.run(
        h.store.memories.reads.list(
            T1, scopes=[scope()], flt=MetadataFilter(), limit=5, cursor=None, count_limit=7
        )
    )
    assert (capped.total_count, capped.total_exact, len(capped.items)) == (7, False, 5)
    for cap in (20, 21):
        exact = h.run(
            h.store.memories.reads.list(
                T1, scopes=[scope()], flt=MetadataFilter(), limit=5, cursor=None, count_limit=cap
            )
        )
        assert (exact.total_count, exact.total_exact) == (20, True)


def test_list_pages_are_stable_while_others_insert(harness: Harness) -> None:
    h = harness
    for i in range(25):
        h.run(h.store.memories.writes.add(new(h, f"listed memory {i}")))
    seen: list[str] = []
    cursor = None
    counter = itertools.count()
    while True:
        page = h.run(
            h.store.memories.reads.list(
                T1, scopes=[scope()], flt=MetadataFilter(), limit=7, cursor=cursor
            )
        )
        seen += [e.content for e in page.items]
        h.run(h.store.memories.writes.add(new(h, f"inserted meanwhile {next(counter)}")))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [f"listed memory {i}" for i in reversed(range(25))]
    with pytest.raises(LaminaError) as err:
        h.run(
            h.store.memories.reads.list(
                T1, scopes=[scope()], flt=MetadataFilter(), limit=5, cursor="not-a-cursor"
            )
        )
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_list_across_scopes(harness: Harness) -> None:
    h = harness
    project = scope(MemoryLayer.PROJECT, project_id="p1")
    h.run(h.store.memories.writes.add(new(h, "user memory")))
    h.run(h.store.memories.writes.add(new(h, "project memory", sc=project)))
    h.run(
        h.store.memories.writes.add(
            new(h, "other project", sc=scope(MemoryLayer.PROJECT, project_id="p2"))
        )
    )
    page = h.run(
        h.store.memories.reads.list(
            T1, scopes=[scope(), project], flt=MetadataFilter(), limit=10, cursor=None
        )
    )
    assert sorted(e.content for e in page.items) == ["project memory", "user memory"]
    counts = h.run(h.store.memories.owners.count_by_layer(T1))
    assert counts == {"user": 1, "project": 2}


def test_hierarchy_links_and_defaults(harness: Harness) -> None:
    h = harness
    assert h.run(h.store.memories.owners.get_parent(T1, "project", "p1")) is None
    h.run(h.store.memories.owners.set_parent(T1, "project", "*", "team-default"))
    assert h.run(h.store.memories.owners.get_parent(T1, "project", "p1")) == "team-default"
    h.run(h.store.memories.owners.set_parent(T1, "project", "p1", "team-a"))
    assert h.run(h.store.memories.owners.get_parent(T1, "project", "p1")) == "team-a"
    assert h.run(h.store.memories.owners.get_parent(T2, "project", "p1")) is None


def test_second_instance_sees_writes_of_the_first(harness: Harness) -> None:
    h = harness
    other = h.reopen()
    assert search(h, "shared memory", threshold=-1.0) == []  # index loaded before the writes
    first = h.run(other.memories.writes.add(new(h, "a shared memory written elsewhere")))
    assert [s.entry.id for s in search(h, "shared memory", threshold=-1.0)] == [first.id]
    h.run(other.memories.writes.delete(T1, first.id))
    assert search(h, "shared memory", threshold=-1.0) == []


def test_timestamps_are_aware_and_ordered(harness: Harness) -> None:
    h = harness
    entry = h.run(h.store.memories.writes.add(new(h, "timestamped")))
    assert isinstance(entry.created_at, datetime) and entry.created_at.tzinfo is not None
    updates = [
        h.run(h.store.memories.writes.update(T1, entry.id, metadata_patch={"i": i}))
        for i in range(5)
    ]
    stamps = [u.updated_at for u in updates]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5


def test_memories_can_wait_for_their_embedding(harness: Harness) -> None:
    from lamina.memory.filters import MetadataFilter
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.models import SearchMode
    from lamina.memory.ports import LayerSearch, NewMemory, Scope

    h = harness
    scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
    entry = h.run(
        h.store.memories.writes.add(
            NewMemory("late", "t1", scope, "the deploy waits for tests", {}, None)
        )
    )
    assert entry.embedding_generated is False and entry.embedding_model is None
    assert h.run(h.store.memories.embeddings.unembedded("t1", 10)) == [
        ("late", "the deploy waits for tests")
    ]
    assert h.run(h.store.memories.embeddings.unembedded("t2", 10)) == []
    vector = h.embedder.embed_sync(["the deploy waits for tests"])[0]

    def search(mode: SearchMode) -> list[str]:
        req = LayerSearch(
            "t1", scope, mode, "deploy tests", vector, ("deploy", "test"), None, 5, MetadataFilter()
        )
        return [s.entry.id for s in h.run(h.store.memories.reads.search(req)).hits]

    assert search(SearchMode.KEYWORD) == ["late"] and search(SearchMode.SEMANTIC) == []
    # A stale write (the content changed meanwhile) stores nothing.
    assert (
        h.run(h.store.memories.embeddings.set_embeddings("t1", [("late", "other text", vector)]))
        == 0
    )
    assert (
        h.run(
            h.store.memories.embeddings.set_embeddings(
                "t1", [("late", "the deploy waits for tests", vector)]
            )
        )
        == 1
    )
    assert h.run(h.store.memories.embeddings.unembedded("t1", 10)) == []
    assert search(SearchMode.SEMANTIC) == ["late"]
    got = h.run(h.store.memories.reads.get("t1", "late"))
    assert got is not None and got.embedding_generated
    assert [e.operation.value for e in h.run(h.store.memories.reads.history("t1", "late"))] == [
        "add"
    ]


def test_add_messages_continues_positions_per_conversation_and_tenant(
    harness: Harness,
) -> None:
    h = harness

    def turn(cid: str, tenant: str = T1) -> NewMemory:
        meta = {"conversation": {"id": cid, "position": 0, "speaker": "A"}}
        return new(h, f"a turn of {cid}", tenant=tenant, metadata=meta)

    def positions(entries: list[MemoryEntry]) -> list[tuple[str, int]]:
        return [
            (e.metadata["conversation"]["id"], e.metadata["conversation"]["position"])
            for e in entries
        ]

    first = h.run(
        h.store.memories.writes.add_messages([turn("c1"), turn("c2"), turn("c1"), turn("c1")])
    )
    assert positions(first) == [("c1", 0), ("c2", 0), ("c1", 1), ("c1", 2)]
    stored = h.run(h.store.memories.reads.get(T1, first[3].id))
    assert stored is not None and stored.metadata["conversation"]["position"] == 2
    # Deleting the last message frees no position.
    assert h.run(h.store.memories.writes.delete(T1, first[3].id))
    assert positions(h.run(h.store.memories.writes.add_messages([turn("c1")]))) == [("c1", 3)]
    assert positions(h.run(h.store.memories.writes.add_messages([turn("c1", T2)]))) == [("c1", 0)]
    assert h.run(h.store.memories.writes.add_messages([])) == []


def test_concurrent_add_messages_get_distinct_positions(harness: Harness) -> None:
    h = harness

    def turns(n: int) -> list[NewMemory]:
        meta = {"conversation": {"id": "busy", "position": 0, "speaker": "A"}}
        return [new(h, f"turn {i}", metadata=meta) for i in range(n)]

    batches = [turns(3) for _ in range(6)]

    async def together() -> list[list[MemoryEntry]]:
        return list(
            await asyncio.gather(*(h.store.memories.writes.add_messages(b) for b in batches))
        )

    calls = h.run(together())
    got = [[e.metadata["conversation"]["position"] for e in call] for call in calls]
    assert sorted(p for call in got for p in call) == list(range(18))
    for call in got:  # each call's range is contiguous
        assert call == list(range(call[0], call[0] + 3))
