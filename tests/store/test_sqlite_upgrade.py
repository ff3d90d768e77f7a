"""A SQLite store made by an older schema, with data in it, upgrades and loses nothing."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

from lamina import Lamina
from lamina.embeddings.base import Vector
from lamina.embeddings.local import LocalEmbedder
from lamina.store.sql.embedding_cache import content_hash
from lamina.store.sqlite import SQLiteStore
from lamina.store.sqlite.db import SQLITE
from tests.conftest import fast_settings

#: The newest schema version (numbers may leave gaps: parallel work reserves them).
VERSIONS = sorted(
    int(f.name[:4])
    for f in resources.files("lamina.store.sqlite.migrations").iterdir()
    if f.name.endswith(".sql")
)
LATEST = VERSIONS[-1]


NOW = "2026-01-02T03:04:05.000000+00:00"


def lexicon(text: str) -> str:
    return str(SQLITE.memory_terms(text)["lexicon"])


def insert_v1(
    conn: sqlite3.Connection, mid: str, text: str, meta: dict[str, Any], vector: Vector | None
) -> None:
    """A user-layer memory of user u as schema 1 stored it, and its add event."""
    conn.execute(
        "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, content, metadata, "
        "embedding, lexicon, embedding_model, created_at, updated_at) "
        "VALUES ('default', ?, 'user', 'u', '{\"user_id\":\"u\"}', ?, ?, ?, ?, ?, ?, ?)",
        (
            mid,
            text,
            json.dumps(meta),
            None if vector is None else vector.tobytes(),
            lexicon(text),
            None if vector is None else LocalEmbedder().model_id,
            NOW,
            NOW,
        ),
    )
    history_v1(conn, mid, "add")


def history_v1(conn: sqlite3.Connection, mid: str, operation: str) -> None:
    conn.execute(
        "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, at) "
        "VALUES ('default', ?, ?, 'user', ?)",
        (mid, operation, NOW),
    )


def test_upgrading_schema_1_keeps_every_row(data_dir: Path) -> None:
    path = data_dir / "lamina.db"

    async def write_old() -> list[str]:
        # The rows are written as lamina wrote them at schema 1 (today's code writes
        # today's columns).
        old = SQLiteStore(path, LocalEmbedder(), schema_target=1)
        await old.initialize()
        assert old.schema_version == 1
        texts = [f"old memory {i}" for i in range(20)]
        vectors = await old.memories.embeddings.generate_embedding("default", texts)
        edited = (
            await old.memories.embeddings.generate_embedding("default", ["old memory zero, edited"])
        )[0]
        await old.shutdown()
        with sqlite3.connect(path) as conn:
            for i, text in enumerate(texts):
                insert_v1(conn, f"old-{i}", text, {"tags": [f"t{i % 3}"]}, vectors[i])
            conn.execute(
                "UPDATE memories SET content = ?, embedding = ?, lexicon = ? WHERE id = 'old-0'",
                ("old memory zero, edited", edited.tobytes(), lexicon("old memory zero, edited")),
            )
            history_v1(conn, "old-0", "update")
            conn.execute("DELETE FROM memories WHERE id = 'old-1'")
            history_v1(conn, "old-1", "delete")
            conn.execute("INSERT INTO hierarchy VALUES ('default', 'project', 'p', 't', ?)", (NOW,))
        return [f"old-{i}" for i in range(20)]

    ids = asyncio.run(write_old())
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert "memories" in tables and "context_items" not in tables

    with Lamina(fast_settings(data_dir)) as ms:
        assert ms.health()["store"]["schema_version"] == LATEST
        page = ms.memory.list(user_id="u", limit=100)
        assert page.total_count == 19 and {m.id for m in page.items} == set(ids) - {ids[1]}
        assert ms.memory.list(user_id="u", tags=["t0"]).total_count == 7
        assert [e.operation.value for e in ms.memory.history(ids[0])] == ["add", "update"]
        assert ms.memory.history(ids[1])[-1].operation.value == "delete"
        hits = ms.memory.search("old memory zero, edited", user_id="u", threshold=0.9)
        assert hits[0].memory.id == ids[0]
        assert ms.memory.resolve_identifiers(project_id="p")["identifiers"]["team_id"] == "t"
        # Rows from before schema 9: their event time is their creation, and their content
        # key was computed when the schema moved on (an exact duplicate finds them).
        assert ms.memory.get(ids[5]).event_at.isoformat() == NOW.replace(".000000", "")
        again = ms.memory.add("OLD  memory 5", layer="user", user_id="u")
        assert again.deduplicated and again.id == ids[5]
        ms.context.knowledge.save("after", "saved after the upgrade")
        assert ms.context.knowledge.search("saved after upgrade")[0].item.key == "after"
    with sqlite3.connect(path) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == VERSIONS


def test_conversations_stored_before_schema_5_continue_their_positions(data_dir: Path) -> None:
    path = data_dir / "lamina.db"

    async def write_old() -> None:
        old = SQLiteStore(path, LocalEmbedder(), schema_target=4)
        await old.initialize()
        await old.shutdown()
        with sqlite3.connect(path) as conn:
            for p in range(3):
                meta = {"conversation": {"id": "old", "position": p, "speaker": "A"}}
                insert_v1(conn, f"m{p}", f"turn {p}", meta, None)

    asyncio.run(write_old())
    with Lamina(fast_settings(data_dir)) as ms:
        more = ms.memory.add_messages(
            [{"role": "user", "content": "next"}], user_id="u", conversation_id="old"
        )
        assert more.memories[0].metadata["conversation"]["position"] == 3


def test_db_copy_asks_to_upgrade_an_older_source_first(data_dir: Path) -> None:
    import pytest

    from lamina import ErrorCode, LaminaError
    from lamina.store.copy import copy_sqlite_to_postgres

    path = data_dir / "lamina.db"

    async def write_old() -> None:
        old = SQLiteStore(path, LocalEmbedder(), schema_target=LATEST - 1)
        await old.initialize()
        await old.shutdown()

    asyncio.run(write_old())
    before = path.read_bytes()
    with pytest.raises(LaminaError) as caught:
        # Refused before the target is touched: no PostgreSQL needed.
        asyncio.run(copy_sqlite_to_postgres(path, "postgresql://nobody@127.0.0.1:1/none"))
    assert caught.value.code is ErrorCode.CONFIGURATION_ERROR
    assert "db upgrade" in caught.value.message
    assert path.read_bytes() == before
    # After the upgrade the same check passes (the copy then fails only on the target).
    with Lamina(fast_settings(data_dir)):
        pass
    with pytest.raises(LaminaError) as caught:
        asyncio.run(copy_sqlite_to_postgres(path, "postgresql://nobody@127.0.0.1:1/none"))
    assert "db upgrade" not in caught.value.message


def test_schema_13_drops_the_cached_vectors_memories_hold(tmp_path: Path) -> None:
    """The cache held a copy of every stored memory's vector before schema 13; the upgrade
    drops those rows and keeps the texts no memory holds."""
    path = tmp_path / "lamina.db"
    embedder = LocalEmbedder()

    async def open_at(target: int | None) -> SQLiteStore:
        store = SQLiteStore(path, embedder, schema_target=target)
        await store.initialize()
        return store

    store = asyncio.run(open_at(12))
    asyncio.run(store.shutdown())
    vector = asyncio.run(embedder.embed(["held text"]))[0]
    with sqlite3.connect(path) as conn:
        insert_v1(conn, "m1", "held text", {}, vector)
        for text in ("held text", "a query"):
            conn.execute(
                "INSERT INTO embedding_cache VALUES ('default', ?, ?, ?, ?)",
                (embedder.model_id, content_hash(text), vector.tobytes(), NOW),
            )
    store = asyncio.run(open_at(None))
    asyncio.run(store.shutdown())
    with sqlite3.connect(path) as conn:
        left = [r[0] for r in conn.execute("SELECT content_hash FROM embedding_cache")]
    assert left == [content_hash("a query")]
