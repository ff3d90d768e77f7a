"""PostgreSQL-only behaviour: row-level security, faults, several processes, the service."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina import ErrorCode, Lamina, LaminaError
from lamina.cli import main
from tests.conftest import fast_settings
from tests.pg import require_postgres, reset_database, server_without_pgvector
from tests.store.test_multiprocess import WORKER

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

#: The newest schema version (numbers may leave gaps: parallel work reserves them).
PG_VERSIONS = sorted(
    int(f.name[:4])
    for f in resources.files("lamina.store.postgres.migrations").iterdir()
    if f.name.endswith(".sql")
)
PG_LATEST = PG_VERSIONS[-1]


@pytest.fixture
def pg_url() -> str:
    url = require_postgres()
    reset_database(url)
    return url


@pytest.fixture
def pg(pg_url: str, tmp_path: Path) -> Iterator[Lamina]:
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        yield ms


def test_the_service_on_postgres(pg: Lamina) -> None:
    m = pg.memory.add(
        "Prefers dark mode in every editor",
        layer="user",
        user_id="alice",
        metadata={"tags": ["ui"]},
    )
    pg.memory.add("Code reviews need two approvals", layer="company", company_id="default")
    pg.memory.add("Code reviews need two approvals.", layer="project", project_id="p")
    hits = pg.memory.search("editor theme", user_id="alice", threshold=0.3)
    assert [h.memory.id for h in hits] == [m.id]
    merged = pg.memory.search("code review approvals", project_id="p", threshold=0.3)
    assert [h.memory.layer.value for h in merged] == ["project"]  # duplicate collapsed
    for mode in ("keyword", "hybrid"):
        found = pg.memory.search("editors", user_id="alice", mode=mode, threshold=0.0)
        assert found and found[0].memory.id == m.id, mode
    updated = pg.memory.update(m.id, content="Prefers light mode", actor="ann")
    assert updated.updated_at > m.updated_at
    assert [e.operation.value for e in pg.memory.history(m.id)] == ["add", "update"]
    assert pg.memory.delete(m.id).existed and not pg.memory.delete(m.id).existed
    assert pg.health()["healthy"] and pg.health()["store"]["store"] == "postgresql"
    text = pg.metrics_text()
    assert 'memory_storage_size{layer="company"} 1.0' in text


def test_row_level_security_hides_other_tenants(pg: Lamina, pg_url: str) -> None:
    a = pg.memory.add("tenant A row", layer="user", user_id="u", tenant_id="A")
    b = pg.memory.add("tenant B row", layer="user", user_id="u", tenant_id="B")
    pg.memory.register_hierarchy(project_id="p", team_id="t", tenant_id="B")
    pg.context.knowledge.save("k", "tenant A knowledge", tenant_id="A")
    pg.context.knowledge.save("k", "tenant B knowledge", tenant_id="B")
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET ROLE lamina_app")
        conn.execute("SELECT set_config('lamina.tenant_id', 'A', false)")
        assert (
            conn.execute("UPDATE context_items SET content = 'x' WHERE tenant_id = 'B'").rowcount
            == 0
        )
        for table in (
            "memories",
            "memory_history",
            "embedding_cache",
            "hierarchy",
            "context_items",
        ):
            tenants = {r[0] for r in conn.execute(f"SELECT tenant_id FROM {table}")}
            assert tenants <= {"A"}, table
        assert conn.execute("SELECT id FROM memories").fetchall() == [(a.id,)]
        assert (
            conn.execute("UPDATE memories SET content = 'x' WHERE id = %s", (b.id,)).rowcount == 0
        )
        assert conn.execute("DELETE FROM memories WHERE id = %s", (b.id,)).rowcount == 0
        assert conn.execute("DELETE FROM memory_history WHERE tenant_id = 'B'").rowcount == 0
        assert conn.execute("UPDATE hierarchy SET parent_id = 'evil'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("UPDATE memories SET tenant_id = 'B' WHERE id = %s", (a.id,))
        conn.rollback()
        conn.execute("SET ROLE lamina_app")
        conn.execute("SELECT set_config('lamina.tenant_id', 'A', false)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, content, "
                "created_at, updated_at) VALUES ('B', 'forged', 'user', 'u', '{}', 'x', now(), "
                "now())"
            )
        conn.rollback()
        conn.execute("SET ROLE lamina_app")
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (0,)  # no tenant set
    assert pg.memory.get(b.id, tenant_id="B") == b
    assert pg.memory.get(b.id, tenant_id="A") is None
    assert (
        pg.memory.resolve_identifiers(project_id="p", tenant_id="B")["identifiers"]["team_id"]
        == "t"
    )


def test_every_operation_stays_inside_its_tenant(pg: Lamina) -> None:
    a = pg.memory.add("tenant A secret plan", layer="user", user_id="u", tenant_id="A")
    assert pg.memory.get(a.id, tenant_id="B") is None
    for mode in ("semantic", "keyword", "hybrid"):
        assert (
            pg.memory.search("secret plan", user_id="u", tenant_id="B", mode=mode, threshold=0.0)
            == []
        )
    assert pg.memory.list(user_id="u", tenant_id="B").total_count == 0
    with pytest.raises(LaminaError) as err:
        pg.memory.update(a.id, content="hijacked", tenant_id="B")
    assert err.value.code is ErrorCode.MEMORY_NOT_FOUND
    assert pg.memory.delete(a.id, tenant_id="B").existed is False
    assert pg.memory.bulk_delete([a.id], tenant_id="B") == 0
    with pytest.raises(LaminaError):
        pg.memory.history(a.id, tenant_id="B")
    assert pg.memory.get(a.id, tenant_id="A") == a
    pg.context.knowledge.save("plan", "tenant A secret plan", tenant_id="A")
    for mode in ("semantic", "keyword", "hybrid"):
        assert pg.context.knowledge.search("secret plan", tenant_id="B", mode=mode) == []
    assert pg.context.retrieve("secret plan", tenant_id="B").total == 0
    assert pg.context.knowledge.list(tenant_id="B").total_count == 0
    for call in (pg.context.knowledge.get, pg.context.knowledge.delete):
        with pytest.raises(LaminaError) as err:
            call("plan", tenant_id="B")
        assert err.value.code is ErrorCode.ITEM_NOT_FOUND
    assert pg.context.knowledge.get("plan", tenant_id="A").content == "tenant A secret plan"


def test_context_layers_on_postgres(pg: Lamina) -> None:
    ctx = pg.context
    ctx.knowledge.save("db", "The production database is PostgreSQL 16", category="fact")
    ctx.knowledge.save("db", "The production database is PostgreSQL 17", category="fact")
    ctx.learnings.save("replication lag alert", "check the WAL sender slots")
    ctx.learnings.save("Replication LAG alert")
    ctx.skills.save("failover", "Promote the standby database", type="script")
    ctx.references.save("pg-docs", "https://www.postgresql.org/docs/", summary="PostgreSQL docs")
    result = ctx.retrieve("production database replication lag")
    assert result.items["user_knowledge"][0].content.endswith("17")
    assert result.items["agent_learnings"][0].fields["fix"] == "check the WAL sender slots"
    assert ctx.learnings.get("replication lag alert").occurrence_count == 2
    assert [v.version for v in ctx.knowledge.versions("db")] == [2, 1]
    ctx.flush()
    assert ctx.knowledge.get("db").use_count == 1
    prompt = ctx.build_prompt("Base.", "database failover docs")
    assert "## Available Skills\n- failover: Promote the standby database" in prompt


def test_faults_are_clear_errors(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(LaminaError) as err:
        Lamina(
            fast_settings(
                tmp_path,
                database_url="postgresql://u@127.0.0.1:1/db",
                postgres={"connect_timeout": 2},
            )
        )
    assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
    for url in ("postgresql://host:notaport/db", "postgresql://u@h/db?sslmode=bogus&x"):
        with pytest.raises(LaminaError) as err:
            Lamina(fast_settings(tmp_path, database_url=url))
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR


def test_a_cancelled_write_leaves_nothing(pg_url: str, tmp_path: Path) -> None:
    items = [{"content": f"bulk item {i}", "layer": "user", "user_id": "u"} for i in range(3000)]
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        ms.memory.bulk_add(items[:10])
    slow = fast_settings(
        tmp_path,
        database_url=pg_url,
        postgres={"statement_timeout_ms": 1},
        retry={"max_retries": 1},
    )
    with Lamina(slow) as ms, pytest.raises(LaminaError) as err:
        ms.memory.bulk_add(items)
    assert err.value.code is ErrorCode.PROVIDER_ERROR and err.value.retryable
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        assert ms.memory.list(user_id="u").total_count == 10


def test_dropped_connections_are_retried(pg: Lamina, pg_url: str) -> None:
    pg.memory.add("before the drop", layer="user", user_id="u")
    with psycopg.connect(pg_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    pg.memory.add("after the drop", layer="user", user_id="u")
    assert pg.memory.list(user_id="u").total_count == 2


def test_processes_share_one_database(pg_url: str, tmp_path: Path) -> None:
    count = 30
    # The user's cache (tests/conftest.py): the kept optimised model is not made again.
    env = {
        "LAMINA_DATABASE_URL": pg_url,
        "PATH": "/usr/bin:/bin",
        "XDG_CACHE_HOME": os.environ["XDG_CACHE_HOME"],
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path / user), user, str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "HOME": str(tmp_path)},
        )
        for user in ("writer-a", "writer-b", "writer-c")
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    kept = {mid for r in results for mid in r["kept"]}
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        page = ms.memory.list(project_id="shared", layers=["project"], limit=1000)
        assert {m.id for m in page.items} == kept
        updated = ms.memory.list(project_id="shared", filters={"updated": True}, limit=1000)
        assert updated.total_count == len([i for i in range(count) if i % 5 == 0 and i % 7]) * 3


def test_db_copy_moves_everything_and_verifies(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lamina.cli import main

    data_dir = tmp_path / "embedded"
    with Lamina(fast_settings(data_dir)) as ms:
        ms.memory.register_hierarchy(project_id="p", team_id="t")
        kept = ms.memory.add(
            "kept memory",
            layer="project",
            project_id="p",
            metadata={"tags": ["x"], "n": 1},
            actor="ann",
        )
        gone = ms.memory.add("deleted memory", layer="user", user_id="u")
        ms.memory.update(kept.id, content="kept memory, edited", actor="bob")
        ms.memory.delete(gone.id)
        other = ms.memory.add("other tenant", layer="user", user_id="u", tenant_id="T2")
        ms.context.knowledge.save("tz", "The user works in CET")
        ms.context.knowledge.save("tz", "The user works in CEST in summer")
        ms.context.skills.save("triage", "Triage an incident", tenant_id="T2")
        ms.sessions.append("s1", "user", "hello", tool_calls=[{"name": "t", "input": 1}])
        ms.sessions.append("s1", "assistant", "hi")
        ms.sessions.compact("s1", 0, "greeting")
        ms.sessions.set_system_prompt("s1", "You are the on-call assistant.")
        said = ms.memory.add_messages(
            [{"role": "user", "content": "said once"}], user_id="u", conversation_id="c"
        )
        ms.memory.delete(said.memories[0].id)  # its position stays taken
    source = f"sqlite:///{data_dir / 'lamina.db'}"
    try:
        main(["db", "copy", "--from", source, "--to", pg_url, "--json"])
    except SystemExit as exc:
        pytest.fail(f"db copy exited {exc.code}: {capsys.readouterr()}")
    report = json.loads(capsys.readouterr().out)
    assert report["tenants"]["default"] == {
        "memories": 1,
        "memory_history": 6,
        # The texts no memory holds any more ("kept memory" before its edit, the two
        # deleted ones) left the cache, and the edited memory holds its own vector (no copy
        # in the cache): the two knowledge items' texts are left.
        "embedding_cache": 2,
        "hierarchy": 1,
        "context_items": 2,
        "session_messages": 2,
        "observations": 0,
        "reflections": 0,
        "conversations": 1,
        "session_prompts": 1,
    }
    assert report["tenants"]["T2"]["memories"] == 1
    assert report["tenants"]["T2"]["context_items"] == 1
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as pg:
        copied = pg.memory.get(kept.id)
        assert copied is not None and copied.content == "kept memory, edited"
        assert copied.created_at == kept.created_at and copied.metadata == kept.metadata
        assert [e.operation.value for e in pg.memory.history(gone.id)] == ["add", "delete"]
        hits = pg.memory.search("kept memory edited", project_id="p", threshold=0.5)
        assert [h.memory.id for h in hits] == [kept.id]
        assert pg.memory.resolve_identifiers(project_id="p")["identifiers"]["team_id"] == "t"
        assert pg.memory.get(other.id, tenant_id="T2") is not None
        copied_session = pg.sessions.messages("s1")
        assert [m.content for m in copied_session] == ["[Compacted Summary]\ngreeting", "hi"]
        assert pg.sessions.system_prompt("s1") == "You are the on-call assistant."
        assert [v.content for v in pg.context.knowledge.versions("tz")] == [
            "The user works in CEST in summer",
            "The user works in CET",
        ]
        found = pg.context.knowledge.search("summer time zone CEST")
        assert found[0].item.version == 2
        assert pg.context.skills.get("triage", tenant_id="T2").description == ("Triage an incident")
        more = pg.memory.add_messages(
            [{"role": "user", "content": "said again"}], user_id="u", conversation_id="c"
        )
        assert more.memories[0].metadata["conversation"]["position"] == 1
    with pytest.raises(SystemExit):
        main(["db", "copy", "--from", source, "--to", pg_url])
    assert "already holds data" in capsys.readouterr().err


def test_db_upgrade_reports_the_schema(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from importlib import resources

    from lamina.cli import main

    def newest(kind: str) -> int:
        files = resources.files(f"lamina.store.{kind}.migrations").iterdir()
        return max(int(f.name.split("_")[0]) for f in files if f.name.endswith(".sql"))

    for args, kind in (
        (["--database-url", pg_url], "postgres"),
        (["--data-dir", str(tmp_path)], "sqlite"),
    ):
        try:
            main([*args, "db", "upgrade", "--json"])
        except SystemExit as exc:  # pragma: no cover - reported below
            pytest.fail(f"exit {exc.code}: {capsys.readouterr()}")
        report = json.loads(capsys.readouterr().out)
        assert report["schema_version"] == newest(kind)


def test_vectors_stay_in_the_row_not_in_toast(pg: Lamina, pg_url: str) -> None:
    """Migration 16: a conversation memory's two vectors (~3 kB) are stored inline, so a
    search reads them from the row it already holds; before it, both went to TOAST."""

    def toast_chunks() -> int:
        with psycopg.connect(pg_url) as conn:
            row = conn.execute(
                "SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = 'memories'"
            ).fetchone()
            assert row is not None
            counted = conn.execute(f"SELECT count(*) FROM {row[0]}").fetchone()
            return int(counted[0]) if counted else -1

    before = toast_chunks()
    added = pg.memory.add_messages(
        [
            {"role": "user", "name": "Ann", "content": f"Turn {i}: we talked about sailing trips"}
            for i in range(12)
        ],
        user_id="ann",
        conversation_id="c1",
    )
    with psycopg.connect(pg_url) as conn:
        sizes = conn.execute(
            "SELECT pg_column_size(embedding), pg_column_size(context_embedding) FROM memories "
            "ORDER BY conversation_position"
        ).fetchall()
    assert len(sizes) == len(added.memories) == 12
    # Every turn has a neighbourhood vector (of the turns around it) beside its own vector.
    assert all(own > 1500 for own, _ in sizes)
    assert all(around is not None and around > 1500 for _, around in sizes)
    assert toast_chunks() == before  # nothing moved out of line
    hits = pg.memory.search("sailing trips", user_id="ann", threshold=0.0)
    assert len(hits) == 10


def _back_to_schema_15(url: str) -> int:
    """The database as schema 15 held it: neighbourhood vectors as float32 bytes (how many)."""
    import numpy as np
    from pgvector.psycopg import register_vector

    with psycopg.connect(url) as conn:
        register_vector(conn)
        stored = conn.execute(
            "SELECT tenant_id, seq, context_embedding FROM memories "
            "WHERE context_embedding IS NOT NULL"
        ).fetchall()
        conn.execute("ALTER TABLE memories DROP COLUMN context_embedding")
        conn.execute("ALTER TABLE memories ADD COLUMN context_embedding bytea")
        for tenant, seq, vector in stored:
            conn.execute(
                "UPDATE memories SET context_embedding = %s WHERE tenant_id = %s AND seq = %s",
                (np.asarray(vector.to_numpy(), np.float32).tobytes(), tenant, seq),
            )
        conn.execute("DROP TABLE session_prompts")  # migration 18's
        # Migration 22's links (it dropped migration 19's a2a_task_refs), columns, function,
        # and migration 23's column and function.
        conn.execute("DROP TABLE a2a_task_links")
        conn.execute("DROP INDEX a2a_tasks_age")
        conn.execute(
            "ALTER TABLE a2a_tasks DROP COLUMN packed, DROP COLUMN ref_key, DROP COLUMN size, "
            "DROP COLUMN thread"  # migration 24's
        )
        conn.execute("DROP FUNCTION lamina_task_trim(bigint, bigint, bigint, integer[], integer[])")
        conn.execute("DELETE FROM schema_migrations WHERE version >= 16")
    return len(stored)


def _column_type(url: str, column: str) -> Any:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'memories'::regclass AND attname = %s",
            (column,),
        ).fetchone()


def test_upgrading_as_an_owner_that_is_no_superuser(pg_url: str, tmp_path: Path) -> None:
    """Migration 16 run by the tables' owner without superuser rights (a managed database):
    row-level security, forced on the owner too, is lifted while the neighbourhood vectors
    are counted and copied, so every one of them arrives."""
    turns = [{"role": "user", "name": "Ann", "content": f"Turn {i}: sailing"} for i in range(4)]
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        ms.memory.add_messages(turns, user_id="ann", conversation_id="trip")
    assert _back_to_schema_15(pg_url) == 4  # every turn has one
    owner = pg_url.replace("postgres@", "lamina_owner@", 1)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS lamina_owner")
        admin.execute("CREATE ROLE lamina_owner LOGIN NOSUPERUSER")
        admin.execute("GRANT lamina_app TO lamina_owner")
        admin.execute("GRANT ALL ON SCHEMA public TO lamina_owner")
        tables = admin.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        for (table,) in tables.fetchall():
            admin.execute(f"ALTER TABLE {table} OWNER TO lamina_owner")
        # The functions the migrations made too (migration 22 replaces one): the owner of a
        # managed database made them all.
        functions = admin.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE n.nspname = 'public' AND p.proname LIKE 'lamina%'"
        )
        for (function,) in functions.fetchall():
            admin.execute(f"ALTER FUNCTION {function} OWNER TO lamina_owner")
    try:
        with Lamina(fast_settings(tmp_path, database_url=owner)) as ms:
            assert ms.health()["store"]["schema_version"] == PG_LATEST
            hits = ms.memory.search("Turn 2: sailing", user_id="ann", mode="semantic")
            assert hits[0].memory.content == "Turn 2: sailing"
        with psycopg.connect(pg_url) as conn:
            assert conn.execute(
                "SELECT count(*) FROM memories WHERE context_embedding IS NOT NULL"
            ).fetchone() == (4,)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("REASSIGN OWNED BY lamina_owner TO postgres")
            admin.execute("DROP OWNED BY lamina_owner")
            admin.execute("DROP ROLE lamina_owner")


def test_upgrading_under_a_model_of_other_dimensions(pg_url: str, tmp_path: Path) -> None:
    """A schema-15 store opened with a model of another size: it opens (re-embedding is
    needed), its neighbourhood column takes the stored vectors' size, and re-embedding
    gives both columns the new one."""
    from tests.conftest import openai_settings
    from tests.fakes.openai_server import FakeOpenAI

    turns = [{"role": "user", "name": "Ann", "content": f"Turn {i}: sailing"} for i in range(4)]
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        ms.memory.add_messages(turns, user_id="ann", conversation_id="trip")
    assert _back_to_schema_15(pg_url) == 4  # every turn has one
    with (
        FakeOpenAI(dims=16) as fake,
        Lamina(openai_settings(tmp_path, fake, database_url=pg_url)) as ms,
    ):
        assert ms.health()["store"]["schema_version"] == PG_LATEST
        assert ms.memory.embedding_status().reembed_needed
        assert _column_type(pg_url, "context_embedding") == ("vector(384)",)
        assert ms.memory.reembed()["reembedded"] is True
        hits = ms.memory.search("Turn 1: sailing", user_id="ann", mode="semantic")
        assert hits[0].memory.content == "Turn 1: sailing"
    assert _column_type(pg_url, "context_embedding") == ("vector(16)",)


def test_upgrading_moves_neighbourhood_vectors_to_pgvector(pg_url: str, tmp_path: Path) -> None:
    """Migration 16 copies each neighbourhood vector from its float32 bytes (schema 15) into
    a pgvector column, the same floats: searches rank exactly as before the upgrade."""

    queries = ["what did we say about sailing", "the harbour at dawn", "Ann"]
    turns = [
        {"role": "user", "name": ["Ann", "Bo"][i % 2], "content": text}
        for i, text in enumerate(
            [
                "We should go sailing this weekend",
                "Only if the wind is calm",
                "The harbour is quiet at dawn",
                "Then let us leave at six",
                "Bring the blue jackets",
                "And something warm to drink",
            ]
        )
    ]

    def answers(ms: Lamina) -> list[list[tuple[str, float]]]:
        return [
            [(h.memory.id, h.score) for h in ms.memory.search(q, user_id="ann", threshold=0.0)]
            for q in queries
        ] + [
            [
                (h.memory.id, h.score)
                for h in ms.memory.search(q, user_id="ann", threshold=0.0, mode="semantic")
            ]
            for q in queries
        ]

    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        ms.memory.add_messages(turns, user_id="ann", conversation_id="trip")
        before = answers(ms)
    assert _back_to_schema_15(pg_url) == 6  # every turn has one
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        assert ms.health()["store"]["schema_version"] == PG_LATEST
        assert answers(ms) == before
    assert _column_type(pg_url, "context_embedding") == ("vector(384)",)
    with psycopg.connect(pg_url) as conn:  # built again after the rows were rewritten
        assert conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_embedding'"
        ).fetchone() == (1,)


def test_bulk_loading_defers_the_vector_index_only_when_empty(pg_url: str, tmp_path: Path) -> None:
    import asyncio

    from lamina.embeddings.local import LocalEmbedder
    from lamina.memory.layers import MemoryLayer
    from lamina.memory.ports import NewMemory, Scope
    from lamina.store.postgres import PostgresStore

    def index_exists() -> bool:
        with psycopg.connect(pg_url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_embedding'"
            ).fetchone()
            return bool(row and row[0])

    async def run() -> tuple[bool, bool, bool]:
        embedder = LocalEmbedder()
        store = PostgresStore(pg_url, embedder)
        await store.initialize()
        scope = Scope(MemoryLayer.USER, {"user_id": "u"}, "u")
        texts = [f"bulk loaded memory {i}" for i in range(50)]
        vectors = await store.memories.embeddings.generate_embedding("default", texts)
        async with store.memories.transfer.bulk_loading() as first:
            during = index_exists()
            await store.memories.writes.bulk_add(
                [
                    NewMemory(f"id-{i}", "default", scope, t, {}, vectors[i])
                    for i, t in enumerate(texts)
                ]
            )
        async with store.memories.transfer.bulk_loading() as second:
            pass
        await store.shutdown()
        return first and not during, second, index_exists()

    deferred, deferred_again, rebuilt = asyncio.run(run())
    assert deferred and not deferred_again and rebuilt
    with psycopg.connect(pg_url) as conn:  # analyzed: the planner knows the rows at once
        assert conn.execute(
            "SELECT count(*) FROM pg_stats WHERE tablename = 'memories' AND attname = 'scope_key'"
        ).fetchone() == (1,)
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        hits = ms.memory.search("bulk loaded memory 7", user_id="u", threshold=0.9)
        assert hits[0].memory.id == "id-7"


def test_upgrading_an_older_schema_keeps_every_row(pg_url: str, tmp_path: Path) -> None:
    import asyncio

    from lamina.embeddings.local import LocalEmbedder
    from lamina.store.postgres import PostgresStore

    async def open_at(target: int | None) -> PostgresStore:
        store = PostgresStore(pg_url, LocalEmbedder(), schema_target=target)
        await store.initialize()
        return store

    async def fill_version_1() -> int:
        old = await open_at(1)
        version = old.schema_version
        await old.shutdown()
        return version

    assert asyncio.run(fill_version_1()) == 1
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_tags'"
        ).fetchone() == (0,)

    def write_old() -> list[str]:
        """Rows as a schema-1 store held them, written with SQL (today's code writes columns
        schema 1 lacks): 20 memories, one rewritten, one deleted, with their history."""
        embedder = LocalEmbedder()
        texts = [f"old memory {i}" for i in range(20)]
        vectors = embedder.embed_sync([*texts, "old memory zero, edited"])

        def literal(v: Any) -> str:
            return "[" + ",".join(f"{x:.8f}" for x in v) + "]"

        with psycopg.connect(pg_url) as conn:
            for i, text in enumerate(texts):
                conn.execute(
                    "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, "
                    "content, metadata, embedding, embedding_model, created_at, updated_at) "
                    "VALUES ('default', %s, 'user', 'u', '{\"user_id\": \"u\"}', %s, %s, "
                    "%s::vector, %s, now(), now())",
                    (
                        f"old-{i}",
                        text,
                        json.dumps({"tags": ["old", f"t{i % 3}"]}),
                        literal(vectors[i]),
                        embedder.model_id,
                    ),
                )
                conn.execute(
                    "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                    "new_content, at) VALUES ('default', %s, 'add', 'user', %s, now())",
                    (f"old-{i}", text),
                )
            conn.execute(
                "UPDATE memories SET content = 'old memory zero, edited', "
                "embedding = %s::vector WHERE id = 'old-0'",
                (literal(vectors[-1]),),
            )
            conn.execute(
                "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                "old_content, new_content, at) VALUES ('default', 'old-0', 'update', 'user', "
                "'old memory 0', 'old memory zero, edited', now())"
            )
            conn.execute("DELETE FROM memories WHERE id = 'old-1'")
            conn.execute(
                "INSERT INTO memory_history (tenant_id, memory_id, operation, layer, "
                "old_content, at) VALUES ('default', 'old-1', 'delete', 'user', "
                "'old memory 1', now())"
            )
        return [f"old-{i}" for i in range(20)]

    ids = write_old()
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        assert ms.health()["store"]["schema_version"] == PG_LATEST
        # The tables added since schema 1 work on the upgraded database.
        ms.context.knowledge.save("after", "saved after the upgrade")
        assert ms.context.knowledge.search("saved after upgrade")[0].item.key == "after"
        page = ms.memory.list(user_id="u", limit=100)
        assert page.total_count == 19 and {m.id for m in page.items} == set(ids) - {ids[1]}
        assert ms.memory.list(user_id="u", tags=["t0"]).total_count == 7  # i = 0, 3, ..., 18
        assert [e.operation.value for e in ms.memory.history(ids[0])] == ["add", "update"]
        assert ms.memory.history(ids[1])[-1].operation.value == "delete"
        hits = ms.memory.search("old memory zero, edited", user_id="u", threshold=0.9)
        assert hits[0].memory.id == ids[0]
        # Rows from before the keyword postings got their terms when the schema moved on.
        found = ms.memory.search("edited", user_id="u", mode="keyword")
        assert [h.memory.id for h in found] == [ids[0]]
        every = ms.memory.search("memory", user_id="u", mode="keyword", threshold=0, limit=50)
        assert len(every) == 19
    with psycopg.connect(pg_url) as conn:
        assert conn.execute(
            "SELECT array_agg(version ORDER BY version) FROM schema_migrations"
        ).fetchone() == (PG_VERSIONS,)
        assert conn.execute(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_tags'"
        ).fetchone() == (1,)


def test_a_user_without_privileges_gets_a_configuration_error(pg_url: str, tmp_path: Path) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS lamina_limited")
        admin.execute("CREATE ROLE lamina_limited LOGIN")
    limited = pg_url.replace("postgres@", "lamina_limited@", 1)
    try:
        with pytest.raises(LaminaError) as err:
            Lamina(fast_settings(tmp_path, database_url=limited))
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR
        assert "privilege" in err.value.message
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("DROP ROLE IF EXISTS lamina_limited")


def test_a_server_without_pgvector_is_named_with_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with server_without_pgvector() as url:
        with pytest.raises(LaminaError) as err:
            Lamina(fast_settings(tmp_path, database_url=url))
        assert err.value.code is ErrorCode.CONFIGURATION_ERROR
        assert not err.value.retryable
        assert "'vector' (pgvector)" in err.value.message
        assert "postgresql-<version>-pgvector" in err.value.message
        # Nothing was half-created on the way to the error.
        with psycopg.connect(url) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone()
        assert tables == (0,)
        code = 0
        try:
            main(["--data-dir", str(tmp_path), "--database-url", url, "health", "--json"])
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        assert code == 1
        error = json.loads(out)["error"]
        assert error["code"] == "CONFIGURATION_ERROR" and "pgvector" in error["message"], err


def test_knowledge_and_governance_on_postgres(pg: Lamina) -> None:
    ms = pg
    ms.memory.register_hierarchy(project_id="api", team_id="platform")
    ms.knowledge.create(
        "adr", "Use PostgreSQL for storage", layer="team", layer_id="platform", status="accepted"
    )
    ms.knowledge.create(
        "policy",
        "No requests",
        layer="company",
        status="accepted",
        rules=[
            {
                "id": "r",
                "target": "dependency",
                "operator": "must_not_use",
                "value": "requests",
                "severity": "block",
            }
        ],
    )
    assert ms.knowledge.search("which database")[0].item.id == "adr-0001"
    assert ms.knowledge.list(layer="team", layer_id="platform").total_count == 1
    assert ms.knowledge.list(type="adr", tenant_id="someone-else").total_count == 0
    result = ms.governance.validate("project", {"dependencies": ["requests"]}, "api")
    assert not result.is_valid and result.violations[0].policy_id == "policy-0001"
    assert ms.knowledge.rebuild()["indexed"] == 2
    with pytest.raises(LaminaError) as err:
        ms.memory.add("AKIAIOSFODNN7EXAMPLE", layer="project", project_id="api")
    assert err.value.code is ErrorCode.POLICY_VIOLATION


def test_vectors_travel_as_the_same_floats_in_text_and_binary(pg_url: str) -> None:
    """lamina's vector parameter (pgvector's binary form, made once) and its text form
    give pgvector the same float32 values, read back as float32 NumPy arrays, as does a
    NumPy vector COPY sends typed by oid; a vector that is not one-dimensional is refused
    before it is sent."""
    import asyncio

    import numpy as np

    from lamina.store.postgres.filters import PgVector, register_vectors

    rng = np.random.default_rng(7)
    vector = rng.standard_normal(384).astype(np.float32)
    vector[:3] = [0.1, -1e-30, 3.4e38]  # decimal fractions, a tiny and a huge float32

    async def sent() -> list[Any]:
        async with await psycopg.AsyncConnection.connect(pg_url) as conn:
            await register_vectors(conn)
            cur = conn.cursor(binary=True)
            await cur.execute(
                "SELECT %b::vector, %t::vector, %s::vector",
                (PgVector(vector), PgVector(vector), PgVector(vector.astype(np.float64))),
            )
            row = await cur.fetchone()
            assert row is not None
            # COPY types its columns by oid: other vectors reach lamina's dumper there.
            await conn.execute("CREATE TEMP TABLE copied (v vector)")
            async with cur.copy("COPY copied (v) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["vector"])
                await copy.write_row([vector])
                await copy.write_row([PgVector(vector)])
            await cur.execute("SELECT v FROM copied")
            return [*row, *(r[0] for r in await cur.fetchall())]

    got = asyncio.run(sent())
    assert len(got) == 5
    for value in got:
        assert value.dtype == np.float32 and np.array_equal(value, vector)
    with pytest.raises(ValueError, match="one dimension"):
        PgVector(np.zeros((2, 3), dtype=np.float32))
