"""The tests' quick reset of PostgreSQL (tests/pg.py ``empty_database``) gives what a drop
and a first start give: the migrated schema, every table empty, every sequence from its
start; and a schema some test changed is dropped instead."""

from __future__ import annotations

from pathlib import Path

import psycopg

from lamina import Lamina
from tests.conftest import fast_settings
from tests.pg import empty_database, require_postgres, reset_database, schema_shape


def _rows(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename <> 'schema_migrations'"
        ).fetchall()
        return {
            name: conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]  # type: ignore[index]
            for (name,) in tables
        }


def test_an_emptied_database_is_a_fresh_one(tmp_path: Path) -> None:
    url = require_postgres()
    reset_database(url)
    with Lamina(fast_settings(tmp_path / "a", database_url=url)) as ms:
        first = ms.memory.add("the first memory", layer="user", user_id="u")
        ms.memory.add_messages([{"role": "user", "content": "hello"}], user_id="u")
    with psycopg.connect(url) as conn:
        fresh = schema_shape(conn)
    assert any(_rows(url).values())
    empty_database(url)
    assert set(_rows(url).values()) == {0}
    with psycopg.connect(url) as conn:
        assert schema_shape(conn) == fresh
        sequences = conn.execute(
            "SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = 'public'"
        ).fetchall()
    assert sequences and all(last is None for _, last in sequences)  # as never used
    with Lamina(fast_settings(tmp_path / "b", database_url=url)) as ms:
        assert ms.memory.get(first.id) is None
        ms.memory.add("the first memory", layer="user", user_id="u")
        assert ms.memory.list(user_id="u").total_count == 1


def test_a_changed_schema_is_dropped_not_emptied(tmp_path: Path) -> None:
    url = require_postgres()
    empty_database(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.left_behind (x int)")
        conn.execute("INSERT INTO public.left_behind VALUES (1)")
    empty_database(url)
    with psycopg.connect(url) as conn:
        assert schema_shape(conn) is None  # nothing migrated: the store's first start migrates
        assert conn.execute("SELECT to_regclass('public.left_behind')").fetchone() == (None,)
    with Lamina(fast_settings(tmp_path, database_url=url)) as ms:
        assert ms.memory.list(user_id="u").total_count == 0
