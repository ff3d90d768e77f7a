"""An import into an empty PostgreSQL database as one transaction (the store's
``atomic_import``): the keyword postings, their blocks, the scope statistics and search
results are exactly those of the batch-by-batch import, and a bad record leaves nothing.

The batch-by-batch import is the one a user who is not a superuser gets: the tests import
the same file as such a user (a member of lamina_app), into a database migrated the same
way, and compare every row of the keyword index.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.embeddings.local import MODEL_ID
from lamina.memory.ports import StoredMemory
from lamina.memory.records import dump_record, parse_record
from tests.conftest import fast_settings
from tests.store import test_postgres

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

#: An empty PostgreSQL database (the fixture of test_postgres).
pg_url = test_postgres.pg_url

#: The role of the batch-by-batch import: no superuser, lamina_app's rights only.
ROLE = "lamina_importer"

#: Every row of the keyword index and the vector index's presence, in a stable order.
INDEX_QUERIES = {
    "terms": "SELECT tenant_id, layer, scope_key, term, memory_seq, tf, doc_length "
    "FROM memory_terms ORDER BY 1, 2, 3, 4, 5",
    "stats": "SELECT tenant_id, layer, scope_key, docs, length FROM memory_scope_stats "
    "ORDER BY 1, 2, 3",
    "blocks": "SELECT tenant_id, layer, scope_key, term, block, postings FROM memory_postings "
    "ORDER BY 1, 2, 3, 4, 5",
    "rows": "SELECT seq, id, lexicon, term_count, context FROM memories ORDER BY seq",
    "vector_index": "SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_embedding'",
    # memory_terms' indexes and primary key (the one-transaction import makes them again).
    "term_indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = "
    "'memory_terms' UNION ALL SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
    "WHERE conrelid = 'memory_terms'::regclass ORDER BY 1, 2",
    "triggers_off": "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgenabled <> 'O'",
}


def source_file(url: str, tmp_path: Path, *, conversation_last: bool = False) -> Path:
    """An export with vectors and history: memories updated and tagged, a conversation
    whose replies are found by their neighbours' words, and 1,100 more in a few scopes
    (three blocks of postings per term), with a repeated id the import must skip.
    ``conversation_last``: the 1,100 come first, the conversation's turns last."""
    with Lamina(fast_settings(tmp_path / "source", database_url=url)) as ms:
        a = ms.memory.add("Alice prefers window seats", layer="user", user_id="alice")
        ms.memory.update(a.id, content="Alice prefers aisle seats", metadata={"n": 2})
        ms.memory.add("The harbour crane is blue", layer="project", project_id="p1")
        ms.memory.add_messages(
            [
                {"role": "user", "content": "We talked about the marmalade festival"},
                {"role": "assistant", "content": "Yes, in Seville"},
                {"role": "user", "content": "The crane there was painted blue"},
            ],
            user_id="alice",
            conversation_id="talk-1",
        )
        records = [r for r in ms.memory.export(embeddings=True, history=True)]
    template = records[0]
    rng = np.random.default_rng(3)
    words = ["harbour", "crane", "seats", "blue", "festival", "window", "tea", "berlin"]
    for i in range(1100):
        vector = rng.standard_normal(384).astype("<f4")
        vector /= np.linalg.norm(vector)
        content = f"note {i}: {words[i % 8]} {words[(i * 3) % 8]} and {words[(i * 5) % 7]}"
        records.append(
            {
                **template,
                "id": str(uuid.uuid4()),
                "content": content,
                "identifiers": {"user_id": f"user-{i % 3}"},
                "metadata": {"i": i, "tags": [f"t{i % 4}"]},
                "embedding": base64.b64encode(vector.tobytes()).decode("ascii"),
                "history": [],
            }
        )
    if conversation_last:
        records = records[5:] + records[:5]
    records.append(records[5])  # a repeat: skipped
    path = tmp_path / "export.jsonl"
    path.write_text("".join(dump_record(r) + "\n" for r in records), encoding="utf-8")
    return path


def empty_database(url: str, tmp_path: Path) -> None:
    """The database emptied and migrated (as the superuser), with the import's role."""
    test_postgres.reset_database(url)
    with Lamina(fast_settings(tmp_path / "migrate", database_url=url)):
        pass
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP ROLE IF EXISTS {ROLE}")
        admin.execute(f"CREATE ROLE {ROLE} LOGIN IN ROLE lamina_app")
        # What opening a migrated store asks of its user (lamina.store.postgres.db.migrate).
        admin.execute(f"GRANT CREATE ON SCHEMA public TO {ROLE}")
        admin.execute(f"GRANT SELECT ON schema_migrations, store_meta TO {ROLE}")


def index_state(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in INDEX_QUERIES.items()}


def searches(ms: Lamina) -> list[list[tuple[str, float]]]:
    found = []
    for query, user in [
        ("harbour crane", "user-1"),
        ("marmalade", "alice"),
        ("blue", "alice"),
        ("window seats tea", "user-2"),
    ]:
        for mode in ("keyword", "hybrid", "semantic"):
            hits = ms.memory.search(query, user_id=user, mode=mode, limit=20)
            found.append([(h.memory.id, round(h.score, 9)) for h in hits])
    return found


@pytest.fixture
def importer(pg_url: str) -> Iterator[str]:
    """The URL of the role without superuser rights (dropped after the test)."""
    yield pg_url.replace("postgres@", f"{ROLE}@", 1)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {ROLE}")
        admin.execute(f"DROP ROLE IF EXISTS {ROLE}")


def imported(
    url: str, path: Path, where: Path, *, at_once: bool
) -> tuple[dict[str, int], list[Any], list[str]]:
    with Lamina(fast_settings(where, database_url=url)) as ms:
        totals: list[int | None] = []
        report = ms.memory.import_(
            path, batch_size=250, on_progress=lambda _, total: totals.append(total)
        ).model_dump()
        # One transaction checks while it stores: the total is known once it is committed.
        assert totals[-1] == report["records"]
        assert (set(totals[:-1]) == {None}) is at_once and len(totals) == 5 + at_once
        again = ms.memory.import_(path, batch_size=250).model_dump()
        assert again["imported"] == 0 and again["skipped"] == again["records"]
        exported = [dump_record(r) for r in ms.memory.export(embeddings=True, history=True)]
        return report, searches(ms), exported


@pytest.mark.parametrize("conversation_last", [False, True])
def test_one_transaction_gives_the_index_of_batches(
    pg_url: str, importer: str, tmp_path: Path, conversation_last: bool
) -> None:
    path = source_file(pg_url, tmp_path, conversation_last=conversation_last)
    lines = path.read_text(encoding="utf-8").splitlines()

    empty_database(pg_url, tmp_path)
    # A superuser into an empty database: one transaction.
    atomic = imported(pg_url, path, tmp_path / "a", at_once=True)
    atomic_index = index_state(pg_url)

    empty_database(pg_url, tmp_path)
    # No superuser: batch by batch.
    batches = imported(importer, path, tmp_path / "b", at_once=False)
    batch_index = index_state(pg_url)

    assert (
        atomic[0]
        == batches[0]
        == {
            "records": len(lines),
            "imported": len(lines) - 1,
            "skipped": 1,
            "embedded": 0,
        }
    )
    assert len(atomic_index["blocks"]) > len(atomic_index["stats"]) > 0
    assert max(r[4] for r in atomic_index["blocks"]) == 2  # seqs of three blocks
    assert any(r[4] for r in atomic_index["rows"])  # conversation turns keep a context
    assert atomic_index == batch_index
    assert atomic_index["vector_index"] == [(1,)] and atomic_index["triggers_off"] == [(0,)]
    assert atomic[1] == batches[1] and any(atomic[1])
    # Export, import, export: the same lines (the repeat once).
    assert atomic[2] == batches[2] == lines[:-1]


def test_a_bad_record_leaves_the_empty_database_as_it_was(pg_url: str, tmp_path: Path) -> None:
    good = {"content": "fine words", "layer": "user", "identifiers": {"user_id": "u"}}
    rows = [json.dumps({**good, "content": f"fine words {i}"}) for i in range(130)]
    path = tmp_path / "bad.jsonl"
    bad = json.dumps({**good, "layer": "nowhere"})
    path.write_text("\n".join([*rows, bad, *rows]) + "\n", encoding="utf-8")
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        with pytest.raises(LaminaError) as err:
            # Two batches stored before line 131, the third read (the reader lets the
            # batch being stored go on every 32 records) when the bad line comes.
            ms.memory.import_(path, batch_size=50)
        assert err.value.code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.INVALID_LAYER)
        assert err.value.details["line"] == 131
        state = index_state(pg_url)
        assert not any(state[name] for name in ("terms", "stats", "blocks", "rows"))
        assert state["vector_index"] == [(1,)] and state["triggers_off"] == [(0,)]
        assert len(state["term_indexes"]) == 3  # two indexes, one of them the primary key
        # The file mended, the import completes; the store then takes writes as always.
        path.write_text("\n".join([*rows, *rows]) + "\n", encoding="utf-8")
        report = ms.memory.import_(path, batch_size=50)
        assert (report.imported, report.skipped) == (130, 130)
        ms.memory.add("harbour crane", layer="user", user_id="u")
        hits = ms.memory.search("crane", user_id="u", mode="keyword")
        assert [h.memory.content for h in hits] == ["harbour crane"]


def test_blocks_left_in_an_empty_store_are_replaced(pg_url: str, tmp_path: Path) -> None:
    """Blocks of postings with no memory left (written by hand here: the triggers never
    leave one) do not fail the one-transaction import, which then writes its blocks over
    them instead of inserting only: the blocks and the search results are those of an
    import into a clean store."""
    words = ["harbour", "crane", "blue", "festival", "window", "tea", "berlin", "seats"]
    rows = [
        json.dumps(
            {
                "content": f"note {i}: {words[i % 8]} {words[(i * 3) % 8]} {words[(i * 5) % 7]}",
                "layer": "user",
                "identifiers": {"user_id": "u"},
            }
        )
        for i in range(40)
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")

    def imported(where: str) -> list[Any]:
        with Lamina(fast_settings(tmp_path / where, database_url=pg_url)) as ms:
            assert ms.memory.import_(path).imported == 40
            return searches(ms) + [
                [h.memory.id for h in ms.memory.search(word, user_id="u", threshold=0)]
                for word in words
            ]

    clean_hits, clean = imported("clean"), index_state(pg_url)["blocks"]
    with psycopg.connect(pg_url, autocommit=True) as admin:
        # The rows and terms gone without their blocks, and seqs that start again.
        for table, trigger in [
            ("memories", "memories_terms_delete"),
            ("memory_terms", "memory_terms_blocks_delete"),
        ]:
            admin.execute(f"ALTER TABLE {table} DISABLE TRIGGER {trigger}")
            try:
                admin.execute(f"DELETE FROM {table}")
            finally:
                admin.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
        admin.execute("DELETE FROM memory_scope_stats")
        admin.execute("ALTER SEQUENCE memories_seq_seq RESTART")
    assert index_state(pg_url)["blocks"] == clean  # left behind, with the keys to come
    assert imported("again") == clean_hits and any(clean_hits[-1])
    state = index_state(pg_url)
    assert state["blocks"] == clean and state["triggers_off"] == [(0,)]


def test_a_session_reading_the_postings_makes_the_import_go_batch_by_batch(
    pg_url: str, tmp_path: Path
) -> None:
    """The one-transaction import locks memory_terms against every session (it drops its
    primary key): where another session holds it (pg_dump, a report), the import waits
    two seconds at most, then goes batch by batch, and that session is never blocked."""
    rows = [
        json.dumps({"content": f"harbour {i}", "layer": "user", "identifiers": {"user_id": "u"}})
        for i in range(30)
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        with psycopg.connect(pg_url) as reader:
            reader.execute("SELECT count(*) FROM memory_terms")  # holds it until the rollback
            totals: list[int | None] = []
            report = ms.memory.import_(
                path, batch_size=10, on_progress=lambda _, total: totals.append(total)
            )
            # Never blocked; it sees the batches committed one by one.
            found = reader.execute("SELECT count(*) FROM memory_terms").fetchone()
            assert found is not None and found[0] > 0
            reader.rollback()
        assert report.imported == 30 and None not in totals  # batch by batch: totals known
        state = index_state(pg_url)
        assert len(state["rows"]) == 30 and len(state["term_indexes"]) == 3
        assert state["triggers_off"] == [(0,)] and state["vector_index"] == [(1,)]
        hits = ms.memory.search("harbour", user_id="u", mode="keyword", threshold=0)
        assert hits


def test_batches_in_flight_are_stored_in_order_and_none_after_a_failure(
    pg_url: str, tmp_path: Path
) -> None:
    """The writer of the one-transaction import takes the next batch before the call
    storing the one before it returned (the importer keeps two in flight, so that the next
    batch's rows are made while one is stored): the batches are stored in the order of
    the calls. A batch the database refuses loses the transaction: the batch after it
    sends nothing, and the store is left as it was."""

    def batch(first: int, content: str = "note {i}") -> list[StoredMemory]:
        return [
            parse_record(
                {
                    "id": str(uuid.UUID(int=i)),
                    "content": content.format(i=i),
                    "layer": "user",
                    "identifiers": {"user_id": "u"},
                },
                i + 1,
                tenant_id="default",
                max_length=10_000,
                model="none",
                dimensions=384,
                checked=True,  # as the importer's records are by then: no check refuses
            )
            for i in range(first, first + 20)
        ]

    async def concurrently(store: Any, *batches: list[StoredMemory]) -> list[Any]:
        """Each batch's outcome (ids stored, or the error); committed when none failed."""
        async with store.memories.transfer.atomic_import("default") as write:
            assert write is not None
            tasks = [asyncio.create_task(write(b, "importer")) for b in batches]
            await asyncio.wait(tasks)
            outcomes = [t.exception() or t.result() for t in tasks]
            failed = [o for o in outcomes if isinstance(o, BaseException)]
            if failed:
                raise ExceptionGroup("batches failed", failed)  # rolled back
            return outcomes

    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        store = ms.aio.store
        # Text PostgreSQL cannot hold (NUL; checks refuse it, skipped here): refused there.
        refused = batch(20, "note {i}\x00")
        with pytest.raises(ExceptionGroup) as failed:
            ms._run(concurrently(store, batch(0), refused, batch(40)))
        # The refused batch's error, then the next one's: the writer sent nothing of it.
        refusal, after = failed.value.exceptions
        assert isinstance(refusal, LaminaError) and isinstance(after, LaminaError)
        assert "a batch before it failed" in after.message
        state = index_state(pg_url)
        assert not any(state[name] for name in ("terms", "stats", "blocks", "rows"))
        assert state["triggers_off"] == [(0,)] and len(state["term_indexes"]) == 3

        results = ms._run(concurrently(store, batch(0), batch(20), batch(40)))
        assert [len(r) for r in results] == [20, 20, 20]
        with psycopg.connect(pg_url) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY seq")]
        assert ids == [str(uuid.UUID(int=i)) for i in range(60)]
        hits = ms.memory.search("note", user_id="u", mode="keyword", threshold=0, limit=100)
        assert len(hits) == 60


def test_a_batch_that_embeds_keeps_its_place(pg_url: str, tmp_path: Path) -> None:
    """Records without a vector are embedded before their batch is stored: with two batches
    in flight, the next batch (its vectors given) waits for it, so rows are stored in the
    file's order, the first of two records with one id is the one kept, and every embedding
    is counted. The collector stays paused to the last progress call."""
    rng = np.random.default_rng(7)

    def record(i: int, *, vector: bool, content: str = "harbour note {i}") -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": str(uuid.UUID(int=i)),
            "content": content.format(i=i),
            "layer": "user",
            "identifiers": {"user_id": "u"},
        }
        if vector:
            v = rng.standard_normal(384).astype("<f4")
            data["embedding"] = base64.b64encode((v / np.linalg.norm(v)).tobytes()).decode()
            data["embedding_model"] = MODEL_ID  # the store's: the vector is kept
        return data

    records = [record(i, vector=False) for i in range(20)]  # embedded: the slow batch
    records += [record(i, vector=True) for i in range(20, 40)]
    records += [record(0, vector=True, content="a later record with the first one's id")]
    records += [record(i, vector=False) for i in range(41, 60)]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    collecting: list[bool] = []
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        report = ms.memory.import_(
            path, batch_size=20, on_progress=lambda *_: collecting.append(gc.isenabled())
        )
        assert (report.imported, report.skipped) == (59, 1)
        assert report.embedded == 39
        with psycopg.connect(pg_url) as conn:
            rows = conn.execute("SELECT id, content FROM memories ORDER BY seq").fetchall()
        assert [r[0] for r in rows] == list(dict.fromkeys(r["id"] for r in records))
        assert rows[0][1] == "harbour note 0"
        assert [r["id"] for r in ms.memory.export()] == [r[0] for r in rows]
    assert collecting and not any(collecting) and gc.isenabled()
