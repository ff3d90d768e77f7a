"""The write path (memory/writes.py): add, bulk_add, update, delete and their errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from lamina import ErrorCode, Lamina, LaminaError
from tests.conftest import openai_settings
from tests.fakes.openai_server import FakeOpenAI


def test_ids_are_unique(ms: Lamina) -> None:
    ids = {
        ms.memory.add("same content", layer="user", user_id="u", dedup=False).id for _ in range(5)
    }
    assert len(ids) == 5


@pytest.mark.parametrize(
    ("layer", "given", "missing"),
    [
        ("agent", {"user_id": "u"}, "agent_id"),
        ("agent", {"agent_id": "a"}, "user_id"),
        ("user", {}, "user_id"),
        ("session", {"user_id": "u"}, "session_id"),
        ("project", {"user_id": "u"}, "project_id"),
        ("team", {}, "team_id"),
        ("org", {}, "org_id"),
        ("company", {}, "company_id"),
    ],
)
def test_add_missing_identifier_names_it(
    ms: Lamina, layer: str, given: dict[str, str], missing: str
) -> None:
    with pytest.raises(LaminaError) as err:
        ms.memory.add("content", layer=layer, **given)
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER
    assert err.value.details["identifier"] == missing and missing in err.value.message


def test_update_reembeds_only_new_content(tmp_path: Path) -> None:
    with FakeOpenAI() as server, Lamina(openai_settings(tmp_path / "d", server)) as ms:
        m = ms.memory.add("original text", layer="user", user_id="u")
        before = len(server.embedded)
        meta = ms.memory.update(m.id, metadata={"k": "v"})
        assert len(server.embedded) == before and meta.metadata == {"k": "v"}
        assert meta.updated_at > m.updated_at and meta.content == "original text"
        changed = ms.memory.update(m.id, content="rewritten text", metadata={"k": None})
        assert server.embedded[-1] == "rewritten text" and changed.metadata == {}
        assert changed.updated_at > meta.updated_at
        hits = ms.memory.search("rewritten text", user_id="u", threshold=0.9)
        assert [h.memory.id for h in hits] == [m.id]
        assert hits[0].parts.semantic is not None and hits[0].parts.semantic >= 1.7


def test_metadata_only_update_keeps_the_stored_vector(ms: Lamina, data_dir: Path) -> None:
    m = ms.memory.add("vector stays", layer="user", user_id="u")
    path = data_dir / "lamina.db"

    def blob() -> bytes:
        with sqlite3.connect(path) as conn:
            return bytes(
                conn.execute("SELECT embedding FROM memories WHERE id = ?", (m.id,)).fetchone()[0]
            )

    before = blob()
    ms.memory.update(m.id, metadata={"x": 1})
    assert blob() == before


def test_update_errors(ms: Lamina) -> None:
    for kwargs in ({"content": "x"}, {"metadata": {"a": 1}}):
        with pytest.raises(LaminaError) as err:
            ms.memory.update("missing-id", **kwargs)  # type: ignore[arg-type]
        assert err.value.code is ErrorCode.MEMORY_NOT_FOUND
    m = ms.memory.add("x", layer="user", user_id="u")
    with pytest.raises(LaminaError) as err:
        ms.memory.update(m.id)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT


def test_delete_is_idempotent_and_history_survives(ms: Lamina) -> None:
    m = ms.memory.add("first", layer="user", user_id="u", actor="ann")
    ms.memory.update(m.id, content="second", actor="bob")
    first = ms.memory.delete(m.id, actor="cy")
    again = ms.memory.delete(m.id)
    assert first.success and first.existed and again.success and not again.existed
    assert ms.memory.get(m.id) is None
    # History keeps that the memory existed, who changed it and when; never its text.
    events = ms.memory.history(m.id)
    assert [(e.operation.value, e.actor, e.old_content, e.new_content) for e in events] == [
        ("add", "ann", None, None),
        ("update", "bob", None, None),
        ("delete", "cy", None, None),
    ]
    with pytest.raises(LaminaError) as err:
        ms.memory.history("never-existed")
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND


def test_bulk_add_validates_everything_first(ms: Lamina) -> None:
    with pytest.raises(LaminaError) as err:
        ms.memory.bulk_add(
            [
                {"content": "ok", "layer": "user", "user_id": "u"},
                {"content": "bad", "layer": "user"},
            ]
        )
    assert err.value.code is ErrorCode.MISSING_IDENTIFIER
    with pytest.raises(LaminaError) as err:
        ms.memory.bulk_add([{"content": "ok", "layer": "user", "user_id": "u", "bogus": 1}])
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert ms.memory.list(user_id="u").total_count == 0
    assert ms.memory.bulk_add([]) == []
    assert ms.memory.bulk_delete([]) == 0
