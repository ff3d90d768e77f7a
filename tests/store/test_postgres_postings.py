"""PostgreSQL keyword postings under multi-row UPDATE statements (migration 0012).

The postings (memory_terms) and per-scope statistics (memory_scope_stats) are kept by
statement triggers from the transition tables. Before migration 0012 the update trigger's
plan was cached on a connection's first call, so a large UPDATE after a small one joined
the transition tables in quadratic time. These tests warm that cache with a one-row UPDATE,
then change many rows in one statement, and compare the postings with what the memories'
own rows say they must be.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lamina import Lamina
from lamina.text import decode_terms
from tests.conftest import fast_settings
from tests.store import test_postgres

#: An empty PostgreSQL database (the fixture of test_postgres).
pg_url = test_postgres.pg_url

#: A posting: (tenant, layer, scope_key, term, memory seq) → (tf, doc_length).
Postings = dict[tuple[str, str, str, str, int], tuple[float, float]]
#: A scope's statistics: (tenant, layer, scope_key) → (docs, total length).
Stats = dict[tuple[str, str, str], tuple[int, float]]


@pytest.fixture
def filled(pg_url: str, tmp_path: Path) -> Iterator[str]:
    """60 memories in three users' scopes of tenant T and 5 in tenant U."""
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        for i in range(60):
            ms.memory.add(
                f"note {i} about the harbour crane number {i % 7}",
                layer="user",
                user_id=f"user-{i % 3}",
                tenant_id="T",
            )
        for i in range(5):
            ms.memory.add(f"other tenant row {i}", layer="user", user_id="x", tenant_id="U")
    yield pg_url


def expected(conn: psycopg.Connection[Any]) -> tuple[Postings, Stats]:
    """The postings and statistics the memories' rows call for (lexicon "term:count …")."""
    postings: Postings = {}
    docs: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    rows = conn.execute(
        "SELECT tenant_id, layer, scope_key, seq, lexicon, term_count FROM memories "
        "WHERE lexicon IS NOT NULL"
    ).fetchall()
    for tenant, layer, scope, seq, lexicon, length in rows:
        for term, tf in decode_terms(lexicon).items():
            postings[(tenant, layer, scope, term, seq)] = (tf, length)
        docs[(tenant, layer, scope)][0] += 1
        docs[(tenant, layer, scope)][1] += length
    return postings, {k: (int(v[0]), v[1]) for k, v in docs.items()}


def actual(conn: psycopg.Connection[Any]) -> tuple[Postings, Stats]:
    postings: Postings = {
        (t, layer, s, term, seq): (tf, dl)
        for t, layer, s, term, seq, tf, dl in conn.execute(
            "SELECT tenant_id, layer, scope_key, term, memory_seq, tf, doc_length FROM memory_terms"
        ).fetchall()
    }
    stats: Stats = {
        (t, layer, s): (docs, length)
        for t, layer, s, docs, length in conn.execute(
            "SELECT tenant_id, layer, scope_key, docs, length FROM memory_scope_stats "
            "WHERE docs <> 0"
        ).fetchall()
    }
    return postings, stats


def assert_exact(url: str) -> None:
    with psycopg.connect(url) as conn:
        want_postings, want_stats = expected(conn)
        got_postings, got_stats = actual(conn)
    assert got_postings == want_postings
    assert set(got_stats) == set(want_stats)
    for key, (docs, length) in want_stats.items():
        assert got_stats[key][0] == docs, key
        assert got_stats[key][1] == pytest.approx(length), key


def test_multi_row_updates_keep_postings_exact(filled: str) -> None:
    assert_exact(filled)
    with psycopg.connect(filled, autocommit=True) as conn:
        # A one-row update first: before migration 0012 its plan was cached for the rest.
        conn.execute(
            "UPDATE memories SET lexicon = lexicon || ' warm:1', term_count = term_count + 1 "
            "WHERE seq = (SELECT min(seq) FROM memories)"
        )
        # Terms changed in every other row of tenant T, not in the rest.
        changed = conn.execute(
            "UPDATE memories SET lexicon = lexicon || ' gantry:2 quay:1', "
            "term_count = term_count + 3 WHERE tenant_id = 'T' AND seq % 2 = 0"
        ).rowcount
        assert changed == 30
        # Rows moved to another user's scope (and layer key) with their terms as they were.
        moved = conn.execute(
            "UPDATE memories SET scope_key = 'user-moved', "
            'identifiers = \'{"user_id": "user-moved"}\' '
            "WHERE tenant_id = 'T' AND scope_key LIKE '%user-1%'"
        ).rowcount
        assert moved == 20
        # Many rows, no indexed column changed: postings untouched.
        conn.execute("UPDATE memories SET metadata = metadata || '{\"seen\": true}'")
        # Terms and scope changed together, and terms removed from some rows.
        conn.execute(
            "UPDATE memories SET lexicon = CASE WHEN seq % 2 = 0 THEN NULL ELSE 'solo:1' END, "
            "term_count = CASE WHEN seq % 2 = 0 THEN 0 ELSE 1 END, scope_key = 'user-solo' "
            "WHERE tenant_id = 'T' AND scope_key LIKE '%user-2%'"
        )
    assert_exact(filled)
    with psycopg.connect(filled) as conn:
        stats = dict(
            conn.execute(
                "SELECT scope_key, docs FROM memory_scope_stats WHERE tenant_id = 'T'"
            ).fetchall()
        )
    assert stats["user-moved"] == 20
    assert stats["user-solo"] == 10  # 20 rows, 10 of them (even seq) without terms


def test_keyword_search_follows_a_multi_row_update(filled: str, tmp_path: Path) -> None:
    """Through the library: a word written into many rows by one statement is found in
    each, and a word taken out of them is no longer."""
    with psycopg.connect(filled, autocommit=True) as conn:
        conn.execute("UPDATE memories SET metadata = metadata WHERE seq = 1")
        conn.execute(
            "UPDATE memories SET lexicon = replace(lexicon, 'harbour:1', 'lighthous:1') "
            "WHERE tenant_id = 'T' AND scope_key LIKE '%user-0%'"
        )
    assert_exact(filled)
    with Lamina(fast_settings(tmp_path / "again", database_url=filled)) as ms:
        hits = ms.memory.search(
            "lighthouse", user_id="user-0", tenant_id="T", mode="keyword", threshold=0.0, limit=50
        )
        # (near-identical texts collapse into one hit: not every row comes back)
        assert hits and {h.memory.identifiers["user_id"] for h in hits} == {"user-0"}
        assert not ms.memory.search(
            "harbour", user_id="user-0", tenant_id="T", mode="keyword", threshold=0.0
        )
        other = ms.memory.search(
            "harbour", user_id="user-1", tenant_id="T", mode="keyword", threshold=0.0, limit=50
        )
        assert other and {h.memory.identifiers["user_id"] for h in other} == {"user-1"}


def test_upgrading_from_schema_10_fills_content_keys_in_batches(
    pg_url: str, tmp_path: Path
) -> None:
    """Rows stored at schema 10 get their duplicate keys (filled by UPDATE statements of a
    thousand rows each, the postings trigger left out) and keep exact postings; dedup then
    finds them."""
    import asyncio

    from lamina.embeddings.local import LocalEmbedder
    from lamina.memory.timing import content_key
    from lamina.store.postgres import PostgresStore

    async def at_schema_10() -> int:
        store = PostgresStore(pg_url, LocalEmbedder(), schema_target=10)
        await store.initialize()
        version = store.schema_version
        await store.shutdown()
        return version

    assert asyncio.run(at_schema_10()) == 10
    texts = [f"stored before schema eleven, number {i}" for i in range(2500)]
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "INSERT INTO memories (tenant_id, id, layer, scope_key, identifiers, content, "
            "metadata, created_at, updated_at, lexicon, term_count) "
            "SELECT 'default', 'old-' || i, 'user', 'u', '{\"user_id\": \"u\"}', "
            "'stored before schema eleven, number ' || i, '{}', now(), now(), "
            "'store:1 schema:1 eleven:1 number:1 ' || i || ':1', 5 "
            "FROM generate_series(0, 2499) i"
        )
    with Lamina(fast_settings(tmp_path, database_url=pg_url)) as ms:
        again = ms.memory.add(texts[1234], layer="user", user_id="u", dedup=True)
        assert again.deduplicated and again.id == "old-1234"
    with psycopg.connect(pg_url) as conn:
        keys = dict(conn.execute("SELECT content, content_key FROM memories").fetchall())
        assert len(keys) == 2500
        assert all(keys[t] == content_key(t) for t in texts)
        enabled = conn.execute(
            "SELECT tgenabled FROM pg_trigger WHERE tgname = 'memories_terms_update'"
        ).fetchone()
        assert enabled == ("O",)
    assert_exact(pg_url)
