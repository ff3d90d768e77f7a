"""A SQLite store made by an older schema, with data in it, upgrades and loses nothing."""

from __future__ import annotations

import asyncio
import sqlite3
from importlib import resources
from pathlib import Path

from lamina import Lamina
from lamina.embeddings.local import LocalEmbedder
from lamina.memory.layers import MemoryLayer
from lamina.memory.ports import NewMemory, Scope
from lamina.store.sqlite import SQLiteStore
from tests.conftest import fast_settings

LATEST = len(
    [
        f
        for f in resources.files("lamina.store.sqlite.migrations").iterdir()
        if f.name.endswith(".sql")
    ]
)


def test_upgrading_schema_1_keeps_every_row(data_dir: Path) -> None:
    path = data_dir / "lamina.db"

    async def write_old() -> list[str]:
        old = SQLiteStore(path, LocalEmbedder(), schema_target=1)
        await old.initialize()
        assert old.schema_version == 1
        scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
        texts = [f"old memory {i}" for i in range(20)]
        vectors = await old.generate_embedding("default", texts)
        entries = await old.bulk_add(
            [
                NewMemory(f"old-{i}", "default", scope, t, {"tags": [f"t{i % 3}"]}, vectors[i])
                for i, t in enumerate(texts)
            ]
        )
        edited = (await old.generate_embedding("default", ["old memory zero, edited"]))[0]
        await old.update("default", "old-0", content="old memory zero, edited", embedding=edited)
        await old.delete("default", "old-1")
        await old.set_parent("default", "project", "p", "t")
        await old.shutdown()
        return [e.id for e in entries]

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
        ms.context.knowledge.save("after", "saved after the upgrade")
        assert ms.context.knowledge.search("saved after upgrade")[0].item.key == "after"
    with sqlite3.connect(path) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
    assert versions == list(range(1, LATEST + 1))


def test_conversations_stored_before_schema_5_continue_their_positions(data_dir: Path) -> None:
    path = data_dir / "lamina.db"

    async def write_old() -> None:
        old = SQLiteStore(path, LocalEmbedder(), schema_target=4)
        await old.initialize()
        scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
        await old.bulk_add(
            [
                NewMemory(f"m{p}", "default", scope, f"turn {p}", meta, None)
                for p, meta in [
                    (p, {"conversation": {"id": "old", "position": p, "speaker": "A"}})
                    for p in range(3)
                ]
            ]
        )
        await old.shutdown()

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
