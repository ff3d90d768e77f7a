"""PostgreSQL keyword postings in blocks (migration 0014): ``memory_postings`` always holds
exactly the postings of ``memory_terms``, packed, whatever wrote them — one statement or
many, one writer or several at once."""

from __future__ import annotations

import struct
import threading
from pathlib import Path

import psycopg
import pytest

from lamina import Lamina
from tests.conftest import fast_settings
from tests.store import test_postgres

#: Minutes of work on one worker: scheduled first (tests/conftest.py).
pytestmark = pytest.mark.slow

Posting = tuple[str, str, str, str, int, float, float]

#: An empty PostgreSQL database and the library on it (the fixtures of test_postgres).
pg_url = test_postgres.pg_url
pg = test_postgres.pg


def _terms(url: str) -> set[Posting]:
    with psycopg.connect(url) as conn:  # the superuser: every tenant
        rows = conn.execute(
            "SELECT tenant_id, layer, scope_key, term, memory_seq, tf, doc_length FROM memory_terms"
        ).fetchall()
    return {(a, b, c, d, int(e), float(f), float(g)) for a, b, c, d, e, f, g in rows}


def _blocks(url: str) -> set[Posting]:
    """Every posting the blocks hold, checking each block's shape on the way."""
    out: set[Posting] = set()
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tenant_id, layer, scope_key, term, block, postings FROM memory_postings"
        ).fetchall()
    for tenant, layer, scope, term, block, packed in rows:
        assert packed and len(packed) % 16 == 0
        seqs = []
        for seq, tf, length in struct.iter_unpack(">qff", packed):
            assert seq >> 9 == block  # a block holds the seqs of its range only
            seqs.append(seq)
            out.add((tenant, layer, scope, term, seq, tf, length))
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    return out


def _assert_exact(url: str) -> None:
    terms = _terms(url)
    assert terms, "nothing was indexed"
    assert _blocks(url) == terms


def test_blocks_follow_every_kind_of_write(pg: Lamina, pg_url: str) -> None:
    words = ["deploy", "review", "cache", "invoice", "garden", "piano"]
    # More than one block (512 seqs) in one scope, in one statement.
    pg.memory.bulk_add(
        [
            {
                "content": f"{words[i % 6]} note {i} about {words[(i * 7) % 6]}",
                "layer": "user",
                "user_id": "u",
            }
            for i in range(1200)
        ],
        dedup=False,
    )
    _assert_exact(pg_url)
    one = pg.memory.add("the garden needs water", layer="user", user_id="u")
    other = pg.memory.add("garden party on friday", layer="user", user_id="v", tenant_id="t2")
    turns = [
        {"role": "user", "name": "Ann", "content": "I fixed the deploy cache"},
        {"role": "assistant", "content": "Great, the review can start"},
        {"role": "user", "name": "Ann", "content": "and the piano lesson moved"},
    ]
    added = pg.memory.add_messages(turns, user_id="u", conversation_id="c1").memories
    _assert_exact(pg_url)
    # Rewriting and deleting a turn renews its neighbours' words too.
    pg.memory.update(added[1].id, content="Great, the invoice can wait")
    pg.memory.update(one.id, content="the garden and the piano")
    pg.memory.delete(added[0].id)
    _assert_exact(pg_url)
    pg.memory.delete(other.id, tenant_id="t2")
    assert pg.memory.delete_all(user_id="u") > 0
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM memory_postings").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM memory_terms").fetchone() == (0,)
    # And the keyword search reads them: a term in three blocks, found in all of them.
    pg.memory.bulk_add(
        [
            {
                "content": f"entry {i} piano" if i % 500 == 0 else f"entry {i}",
                "layer": "user",
                "user_id": "w",
            }
            for i in range(1600)
        ],
        dedup=False,
    )
    _assert_exact(pg_url)
    hits = pg.memory.search("piano", user_id="w", mode="keyword", threshold=0.0, limit=10)
    assert sorted(h.memory.content for h in hits) == [
        "entry 0 piano",
        "entry 1000 piano",
        "entry 1500 piano",
        "entry 500 piano",
    ]


def test_concurrent_writers_in_one_scope_lose_no_posting(pg_url: str, tmp_path: Path) -> None:
    """Writers that add and delete in one scope at once, each with its own connections: every
    block is rebuilt from what every earlier writer committed."""
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            with Lamina(fast_settings(tmp_path / f"w{n}", database_url=pg_url)) as ms:
                kept = []
                for i in range(30):
                    m = ms.memory.add(
                        f"shared words deploy review {n} {i}", layer="user", user_id="u"
                    )
                    kept.append(m.id)
                    if i % 3 == 0:
                        ms.memory.delete(kept.pop(0))
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    with Lamina(fast_settings(tmp_path / "setup", database_url=pg_url)) as ms:
        ms.memory.add(
            "seed deploy", layer="user", user_id="seed"
        )  # the schema, before the writers race; their scope is new
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors, errors
    _assert_exact(pg_url)
    with psycopg.connect(pg_url) as conn:
        # 4 writers x (30 added - 10 deleted), all in user u's scope
        rows = conn.execute(
            "SELECT scope_key, count(*) FROM memories GROUP BY 1 ORDER BY 2"
        ).fetchall()
        assert [n for _, n in rows] == [1, 80]
        stats = conn.execute(
            "SELECT docs FROM memory_scope_stats WHERE scope_key = %s", (rows[1][0],)
        ).fetchone()
        assert stats == (80,)
