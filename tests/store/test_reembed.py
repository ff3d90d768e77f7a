"""Changing the embedding model of an existing store: it opens (no refusal, no data lost),
semantic search is refused and hybrid search uses keywords until ``reembed`` has re-computed
every vector (memories, context items, the knowledge index), resumably; then the new model
is the store's. On both backends: a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.cli import main
from lamina.config import Settings
from lamina.store.sql.reembed import Reembedding
from tests.conftest import fast_settings, openai_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.pg import require_postgres, reset_database

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

DIMS = 16  # the fake model's; the local model's are 384


class Backend:
    def __init__(self, kind: str, data_dir: Path) -> None:
        self.kind = kind
        self.data_dir = data_dir
        self.url = ""
        if kind == "postgres":
            self.url = require_postgres()
            reset_database(self.url)

    def _extra(self) -> dict[str, Any]:
        return {"database_url": self.url} if self.url else {}

    def local(self) -> Settings:
        return fast_settings(self.data_dir, **self._extra())

    def fake(self, server: FakeOpenAI) -> Settings:
        return openai_settings(self.data_dir, server, **self._extra())

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows read past the application (every tenant)."""
        if self.url:
            with psycopg.connect(self.url) as conn:
                return conn.execute(sql).fetchall()  # type: ignore[arg-type]
        with sqlite3.connect(self.data_dir / "lamina.db") as conn:
            return conn.execute(sql).fetchall()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return Backend(request.param, tmp_path / "d")


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dims=DIMS) as server:
        yield server


def _fill(ms: Lamina) -> None:
    for text in ("I drink coffee every morning", "My cat is called Miso", "I live in Lyon"):
        ms.memory.add(text, layer="user", user_id="u")
    ms.memory.add("Another tenant's note about coffee", layer="user", user_id="u", tenant_id="T2")
    ms.context.knowledge.save("tz", "The user works in CET")
    ms.context.knowledge.save("tz", "The user works in CEST in summer")
    ms.knowledge.create("adr", "Use PostgreSQL for storage", layer="company", status="accepted")


def _semantic_refused(call: Any) -> None:
    with pytest.raises(LaminaError) as err:
        call()
    assert err.value.code is ErrorCode.CONFIGURATION_ERROR
    assert "lamina memory reembed" in err.value.message
    assert err.value.details["reembed_needed"] is True


def test_a_store_changes_model_by_reembedding(backend: Backend, fake: FakeOpenAI) -> None:
    with Lamina(backend.local()) as ms:
        _fill(ms)
        assert not ms.memory.embedding_status().reembed_needed

    with Lamina(backend.fake(fake)) as ms:  # another model, another dimension: it opens
        status = ms.memory.embedding_status()
        assert status.reembed_needed and not status.in_progress
        assert (status.store_model, status.store_dimensions) == ("all-MiniLM-L6-v2-int8", 384)
        assert (status.model, status.dimensions) == ("fake-embed", DIMS)
        health = ms.health()
        assert health["embedding"]["reembed_needed"] and health["store"]["embedding"]
        # Nothing lost; reads that need vectors of the new model are refused or use keywords.
        assert ms.memory.list(user_id="u").total_count == 3
        _semantic_refused(lambda: ms.memory.search("coffee", user_id="u", mode="semantic"))
        _semantic_refused(lambda: ms.knowledge.search("database", mode="semantic"))
        _semantic_refused(lambda: ms.context.knowledge.search("timezone", mode="semantic"))
        hits = ms.memory.search("coffee", user_id="u", mode="hybrid")
        assert [h.memory.content for h in hits] == ["I drink coffee every morning"]
        assert hits[0].semantic_score is None
        assert ms.knowledge.search("PostgreSQL", mode="hybrid")[0].item.id == "adr-0001"
        assert ms.context.knowledge.search("CEST", mode="hybrid")
        # Writes work; their vectors wait for the re-embedding.
        new = ms.memory.add("I started learning piano", layer="user", user_id="u")
        assert not new.embedding_generated
        ms.context.skills.save("triage", "Triage an incident")
        assert ms.memory.embed_pending() == 0  # never mixes models: reembed does it

        # Interrupted after the first batch: the next run resumes.
        def stop(done: int, total: int | None) -> None:
            if done:
                raise RuntimeError("interrupted")

        with pytest.raises(LaminaError) as err:
            ms.memory.reembed(batch_size=1, on_progress=stop)
        assert err.value.code is ErrorCode.INTERNAL_ERROR
        assert ms.memory.embedding_status().in_progress
        _semantic_refused(lambda: ms.memory.search("coffee", user_id="u", mode="semantic"))
        calls: list[tuple[int, int | None]] = []
        report = ms.memory.reembed(batch_size=2, on_progress=lambda d, t: calls.append((d, t)))
        assert report["reembedded"] is True and report["tenants"] == 2
        # 5 memories in all, 1 done before the interruption; 4 context items (2 versions of
        # tz, the skill, the knowledge document).
        assert (report["memories"], report["context_items"]) == (4, 4)
        assert calls[-1][0] == calls[-1][1] == 8
        assert report["from_dimensions"] == 384 and report["dimensions"] == DIMS

        status = ms.memory.embedding_status()
        assert not status.reembed_needed and status.store_model == "fake-embed"
        hit = ms.memory.search("I live in Lyon", user_id="u", mode="semantic")[0]
        assert (
            hit.memory.content == "I live in Lyon"
            and hit.parts.semantic is not None
            and hit.parts.semantic >= 1.7
        )
        assert ms.knowledge.search("database", mode="semantic")[0].item.id == "adr-0001"
        assert ms.context.skills.search("Triage an incident", mode="semantic")
        assert ms.memory.search("coffee", user_id="u", tenant_id="T2", mode="hybrid")
        entries = ms.memory.list(user_id="u").items
        assert len(entries) == 4
        assert {(e.embedding_model, e.embedding_generated) for e in entries} == {
            ("fake-embed", True)
        }
        assert ms.memory.reembed()["reembedded"] is False  # a second run: nothing to do

    # Nothing of the old model is left: vectors, cached embeddings, store_meta.
    assert backend.query("SELECT DISTINCT model FROM embedding_cache") == [("fake-embed",)]
    assert backend.query(
        "SELECT count(*) FROM context_items WHERE embedding IS NULL AND kind <> 'document_index'"
    ) == [(0,)]
    meta = dict(backend.query("SELECT key, value FROM store_meta"))
    assert meta["embedding_model"] == "fake-embed" and meta["embedding_dimensions"] == str(DIMS)
    assert "reembed_target" not in meta
    if backend.url:  # typed vector(16) again, HNSW indexes rebuilt
        types = backend.query(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attname = "
            "'embedding' AND attrelid IN ('memories'::regclass, 'context_items'::regclass)"
        )
        assert types == [(f"vector({DIMS})",)] * 2
        indexes = backend.query(
            "SELECT indexname FROM pg_indexes WHERE indexname LIKE '%_embedding' ORDER BY 1"
        )
        assert indexes == [("context_items_embedding",), ("memories_embedding",)]

    with Lamina(backend.fake(fake)) as ms:  # reopened with the new model: nothing pending
        assert not ms.memory.embedding_status().reembed_needed
        assert ms.memory.search("My cat is called Miso", user_id="u", mode="semantic")


def test_same_dimensions_only_the_values_change(backend: Backend, tmp_path: Path) -> None:
    with FakeOpenAI(dims=DIMS) as first, Lamina(backend.fake(first)) as ms:
        ms.memory.add("I drink coffee every morning", layer="user", user_id="u")
    with FakeOpenAI(dims=DIMS) as second:
        settings = backend.fake(second)
        settings.embedding.model = "fake-embed-2"
        with Lamina(settings) as ms:
            assert ms.memory.embedding_status().reembed_needed
            _semantic_refused(lambda: ms.memory.search("coffee", user_id="u", mode="semantic"))
            assert ms.memory.reembed()["memories"] == 1
            hit = ms.memory.search("I drink coffee every morning", user_id="u", mode="semantic")
            assert hit[0].parts.semantic is not None and hit[0].parts.semantic >= 1.7


def test_cli_reembed(tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "d"
    with Lamina(fast_settings(data_dir)) as ms:
        ms.memory.add("I drink coffee every morning", layer="user", user_id="u")
    config = tmp_path / "lamina.toml"
    config.write_text(
        "[embedding]\nprovider = 'openai'\n"
        f"base_url = '{fake.base_url}'\nmodel = 'fake-embed'\ndimensions = {DIMS}\n"
    )
    base = ["--data-dir", str(data_dir), "--config", str(config)]

    def run(*args: str) -> Any:
        try:
            main([*base, *args])
        except SystemExit as exc:
            assert exc.code in (0, None), capsys.readouterr()
        return json.loads(capsys.readouterr().out)

    assert run("health", "--json")["embedding"]["reembed_needed"] is True
    report = run("memory", "reembed", "--json")
    assert report["reembedded"] is True and report["memories"] == 1
    assert report["model"] == "fake-embed" and report["from_model"] == "all-MiniLM-L6-v2-int8"
    assert run("memory", "reembed", "--json")["reembedded"] is False
    hits = run("memory", "search", "I drink coffee every morning", "--user-id", "u", "--json")
    assert hits["results"] and hits["results"][0]["parts"]["semantic"] >= 1.7


def _fake_model(backend: Backend, server: FakeOpenAI, model: str) -> Settings:
    settings = backend.fake(server)
    settings.embedding.model = model
    return settings


def _vector_types(backend: Backend) -> list[tuple[Any, ...]]:
    return backend.query(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attname IN "
        "('embedding', 'context_embedding') AND attrelid IN ('memories'::regclass, "
        "'context_items'::regclass)"
    )


def _hnsw_indexes(backend: Backend) -> list[tuple[Any, ...]]:
    return backend.query(
        "SELECT indexname FROM pg_indexes WHERE indexname LIKE '%_embedding' ORDER BY 1"
    )


def test_same_model_other_dimensions(backend: Backend) -> None:
    """OpenAI's ``dimensions``: one model id, vectors of another length. Every vector and
    cached embedding is of the new length afterwards."""
    with FakeOpenAI(dims=16) as first, Lamina(backend.fake(first)) as ms:
        ms.memory.add("I drink coffee every morning", layer="user", user_id="u")
        ms.memory.add("My cat is called Miso", layer="user", user_id="u")
        ms.context.skills.save("triage", "Triage an incident")
    with FakeOpenAI(dims=8) as second, Lamina(backend.fake(second)) as ms:
        status = ms.memory.embedding_status()
        assert status.reembed_needed
        assert (status.store_model, status.store_dimensions) == ("fake-embed", 16)
        assert (status.model, status.dimensions) == ("fake-embed", 8)
        _semantic_refused(lambda: ms.memory.search("coffee", user_id="u", mode="semantic"))
        report = ms.memory.reembed()
        assert report["reembedded"] is True
        assert (report["memories"], report["context_items"]) == (2, 1)
        hit = ms.memory.search("I drink coffee every morning", user_id="u", mode="semantic")
        assert (
            hit[0].memory.content == "I drink coffee every morning"
            and hit[0].parts.semantic is not None
            and hit[0].parts.semantic >= 1.7
        )
        assert ms.context.skills.search("Triage an incident", mode="semantic")
        # The cache holds 8-d vectors only: a write of known content uses them.
        other = "SELECT count(*) FROM embedding_cache WHERE length(vector) <> 32"
        assert backend.query(other) == [(0,)]
        again = ms.memory.add("I drink coffee every morning", layer="user", user_id="u")
        assert again.embedding_generated
        assert ms.memory.reembed()["reembedded"] is False
    if backend.url:
        assert _vector_types(backend) == [("vector(8)",)] * 3
        assert _hnsw_indexes(backend) == [("context_items_embedding",), ("memories_embedding",)]
    with FakeOpenAI(dims=8) as second, Lamina(backend.fake(second)) as ms:
        assert not ms.memory.embedding_status().reembed_needed


def test_back_to_the_first_model_after_an_interrupted_resize(backend: Backend) -> None:
    """Interrupted on the way to another dimension (PostgreSQL: columns dimensionless,
    indexes dropped), then back to the first model: the columns are typed again."""
    with FakeOpenAI(dims=16) as server, Lamina(_fake_model(backend, server, "A")) as ms:
        for i in range(3):
            ms.memory.add(f"memory number {i}", layer="user", user_id="u")
    with FakeOpenAI(dims=8) as server, Lamina(_fake_model(backend, server, "B")) as ms:

        def stop(done: int, total: int | None) -> None:
            if done:
                raise RuntimeError("interrupted")

        with pytest.raises(LaminaError):
            ms.memory.reembed(batch_size=1, on_progress=stop)
    with FakeOpenAI(dims=16) as server, Lamina(_fake_model(backend, server, "A")) as ms:
        assert ms.memory.embedding_status().in_progress
        report = ms.memory.reembed()
        assert report["reembedded"] is True and report["memories"] == 1
        hit = ms.memory.search("memory number 1", user_id="u", mode="semantic")
        assert (
            hit[0].memory.content == "memory number 1"
            and hit[0].parts.semantic is not None
            and hit[0].parts.semantic >= 1.7
        )
    if backend.url:
        assert _vector_types(backend) == [("vector(16)",)] * 3
        assert _hnsw_indexes(backend) == [("context_items_embedding",), ("memories_embedding",)]
    meta = dict(backend.query("SELECT key, value FROM store_meta"))
    assert (meta["embedding_model"], meta["embedding_dimensions"]) == ("A", "16")
    assert "reembed_target" not in meta


def test_rows_of_the_old_model_written_after_the_change(backend: Backend) -> None:
    """A process opened before the change keeps writing with the old model: the next
    ``reembed`` converts its rows instead of reporting nothing to do."""
    with FakeOpenAI(dims=DIMS) as server:
        old = Lamina(_fake_model(backend, server, "A"))
        with old:
            old.memory.add("first", layer="user", user_id="u")
            with Lamina(_fake_model(backend, server, "B")) as new:
                assert new.memory.reembed()["reembedded"] is True
            old.memory.add("written by the old process", layer="user", user_id="u")
        with Lamina(_fake_model(backend, server, "B")) as new:
            report = new.memory.reembed()
            assert report["reembedded"] is True and report["memories"] == 1
            assert new.memory.reembed()["reembedded"] is False
            hit = new.memory.search("written by the old process", user_id="u", mode="semantic")
            assert hit[0].parts.semantic is not None and hit[0].parts.semantic >= 1.7
    assert backend.query("SELECT embedding_model, count(*) FROM memories GROUP BY 1") == [("B", 2)]
    # Nothing of model A is cached (the memories hold their own vectors: none of B either).
    assert backend.query("SELECT DISTINCT model FROM embedding_cache WHERE model <> 'B'") == []


def test_batches_go_on_after_the_last_row(
    backend: Backend, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keyset pagination: a pass reads each stale row once, after the last one it saw."""
    with Lamina(backend.local()) as ms:
        for i in range(5):
            ms.memory.add(f"memory number {i}", layer="user", user_id="u")
    reads: list[tuple[Any, list[str]]] = []
    stale_memories = Reembedding._stale_memories

    def spy(self: Reembedding, *args: Any) -> Any:
        found = yield from stale_memories(self, *args)
        reads.append((args[-1], [str(r[1]) for r in found]))
        return found

    monkeypatch.setattr(Reembedding, "_stale_memories", spy)
    with Lamina(backend.fake(fake)) as ms:
        assert ms.memory.reembed(batch_size=2)["memories"] == 5
    # 3 batches (2 + 2 + 1) and the empty read that ends the pass.
    assert [len(ids) for _, ids in reads] == [2, 2, 1, 0]
    assert reads[0][0] == 0
    afters = [after for after, _ in reads]
    assert afters == sorted(afters) and len(set(afters)) == 4
    ids = [i for _, found in reads for i in found]
    assert len(ids) == len(set(ids)) == 5


def test_conversation_neighbourhoods_follow_a_change_of_dimensions(
    backend: Backend, fake: FakeOpenAI
) -> None:
    """Messages' neighbourhood vectors are renewed in the new dimensions (PostgreSQL: their
    column typed again with the others), and search ranks with them."""
    turns = [{"role": "user", "name": "Ann", "content": f"Turn {i}: sailing"} for i in range(4)]
    with Lamina(backend.local()) as ms:
        ms.memory.add_messages(turns, user_id="u", conversation_id="c1")
    with Lamina(backend.fake(fake)) as ms:
        assert ms.memory.reembed(batch_size=2)["reembedded"] is True
        hits = ms.memory.search("Turn 2: sailing", user_id="u", mode="semantic", threshold=0.0)
        assert len(hits) == 4 and hits[0].memory.content == "Turn 2: sailing"
        ms.memory.add_messages(turns[:2], user_id="v", conversation_id="c2")
    if backend.url:
        assert _vector_types(backend) == [(f"vector({DIMS})",)] * 3
        sizes = backend.query(
            "SELECT vector_dims(context_embedding) FROM memories "
            "WHERE context_embedding IS NOT NULL"
        )
        assert sizes == [(DIMS,)] * 6  # four renewed, two new


def test_a_first_turn_gets_its_neighbourhood_back(backend: Backend) -> None:
    """A conversation's first turn re-embedded alone (its vector was missing) gets its
    neighbourhood vector again from the turns after it, as every other turn does."""
    turns = [{"role": "user", "content": f"Turn {i}: sailing"} for i in range(3)]
    with Lamina(backend.local()) as ms:
        first = ms.memory.add_messages(turns, user_id="u", conversation_id="c1").memories[0]
        clear = (
            "UPDATE memories SET embedding = NULL, embedding_model = NULL, "
            "context_embedding = NULL WHERE id = %s"
        )
        if backend.url:
            with psycopg.connect(backend.url) as conn:
                conn.execute(clear, (first.id,))
        else:
            with sqlite3.connect(backend.data_dir / "lamina.db") as conn:
                conn.execute(clear.replace("%s", "?"), (first.id,))
        ms.memory.reembed(batch_size=10)
    rows = backend.query(
        "SELECT conversation_position, embedding IS NOT NULL, context_embedding IS NOT NULL "
        "FROM memories ORDER BY conversation_position"
    )
    assert [tuple(bool(v) if i else v for i, v in enumerate(r)) for r in rows] == [
        (0, True, True),
        (1, True, True),
        (2, True, True),
    ]


def test_messages_added_while_waiting_for_reembedding(backend: Backend, fake: FakeOpenAI) -> None:
    """Messages added to a store that waits for re-embedding (a model of other dimensions
    configured) are stored without vectors and without neighbourhood vectors made of the
    vectors that were not stored; re-embedding then gives them both."""
    with Lamina(backend.local()) as ms:
        ms.memory.add("something", layer="user", user_id="u")
    with Lamina(backend.fake(fake)) as ms:
        turns = [{"role": "user", "content": f"Turn {i}: sailing"} for i in range(3)]
        ms.memory.add_messages(turns, user_id="u", conversation_id="c1")
        waiting = backend.query(
            "SELECT count(*) FROM memories WHERE conversation_id IS NOT NULL "
            "AND embedding IS NULL AND context_embedding IS NULL"
        )
        assert waiting == [(3,)]
        assert ms.memory.reembed(batch_size=2)["reembedded"] is True
    done = backend.query(
        "SELECT count(*) FROM memories WHERE conversation_id IS NOT NULL "
        "AND embedding IS NOT NULL AND context_embedding IS NOT NULL"
    )
    assert done == [(3,)]
