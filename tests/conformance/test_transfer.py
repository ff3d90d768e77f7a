"""Export pages and import on every store: the same memories, vectors and history come
back, ids are kept and a second import stores nothing."""

from __future__ import annotations

import uuid

import numpy as np

from lamina.memory.filters import MetadataFilter
from lamina.memory.layers import MemoryLayer
from lamina.memory.models import SearchMode
from lamina.memory.ports import LayerSearch, NewMemory, Scope, Selection, StoredMemory
from lamina.memory.scoring import QuerySignals
from lamina.text import analyze
from tests.conformance.conftest import Harness
from tests.conformance.test_store import scope

T1, T2 = "tenant-one", "tenant-two"


def memory(h: Harness, content: str, sc: Scope | None = None, **metadata: object) -> NewMemory:
    vector = h.run(h.store.memories.embeddings.generate_embedding(T1, [content]))[0]
    return NewMemory(str(uuid.uuid4()), T1, sc or scope(), content, dict(metadata), vector)


def export_all(h: Harness, tenant: str, size: int = 2) -> list[StoredMemory]:
    out: list[StoredMemory] = []
    cursor = None
    while True:
        page, cursor = h.run(
            h.store.memories.transfer.export_page(
                tenant, Selection(), cursor=cursor, limit=size, vectors=True, history=True
            )
        )
        out += page
        if cursor is None:
            return out


def test_export_then_import_into_another_tenant(harness: Harness) -> None:
    h = harness
    plain = h.run(
        h.store.memories.writes.add(memory(h, "Alice likes aisle seats", n=1), actor="ann")
    )
    h.run(h.store.memories.writes.update(T1, plain.id, metadata_patch={"n": 2}, actor="bob"))
    h.run(
        h.store.memories.writes.add(
            memory(h, "Project builds on Fridays", scope(MemoryLayer.PROJECT, project_id="p"))
        )
    )
    talk = [
        memory(
            h,
            "We talked about the marmalade festival",
            conversation={"id": "c1", "speaker": "alice"},
        ),
        memory(h, "Yes, in Seville", conversation={"id": "c1", "speaker": "bob"}),
    ]
    h.run(h.store.memories.writes.add_messages(talk))
    exported = export_all(h, T1)
    assert [m.entry.content for m in exported][:2] == [
        "Alice likes aisle seats",
        "Project builds on Fridays",
    ]
    assert [e.operation.value for e in exported[0].history or []] == ["add", "update"]
    assert all(m.vector is not None and m.vector.shape == (384,) for m in exported)
    only = h.run(
        h.store.memories.transfer.export_page(
            T1,
            Selection((MemoryLayer.PROJECT,), {}),
            cursor=None,
            limit=10,
            vectors=False,
            history=False,
        )
    )
    assert [m.entry.content for m in only[0]] == ["Project builds on Fridays"] and only[1] is None
    assert only[0][0].vector is None and only[0][0].history is None

    moved = [
        StoredMemory(m.entry.model_copy(update={"tenant_id": T2}), m.vector, m.history)
        for m in exported
    ]
    stored = h.run(h.store.memories.transfer.import_memories(T2, moved, actor="import"))
    assert stored == [m.entry.id for m in exported]
    assert h.run(h.store.memories.transfer.import_memories(T2, moved)) == []
    back = export_all(h, T2, size=3)
    assert [m.entry.model_copy(update={"tenant_id": T1}) for m in back] == [
        m.entry for m in exported
    ]
    assert all(np.array_equal(a.vector, b.vector) for a, b in zip(back, exported, strict=True))  # type: ignore[arg-type]
    assert [b.history for b in back] == [a.history for a in exported]
    # The imported reply is found by its neighbour's words, as the original is.
    for tenant in (T1, T2):
        request = LayerSearch(
            tenant,
            scope(),
            SearchMode.KEYWORD,
            "marmalade",
            None,
            tuple(analyze("marmalade")),
            None,
            10,
            MetadataFilter(),
            signals=QuerySignals.of("marmalade"),
        )
        hits = h.run(h.store.memories.reads.search(request)).hits
        assert {hit.entry.content for hit in hits} == {
            "We talked about the marmalade festival",
            "Yes, in Seville",
        }
    # The imported conversation continues after its last position.
    more = h.run(
        h.store.memories.writes.add_messages(
            [
                NewMemory(
                    str(uuid.uuid4()), T2, scope(), "Next", {"conversation": {"id": "c1"}}, None
                )
            ]
        )
    )
    assert more[0].metadata["conversation"]["position"] == 2
