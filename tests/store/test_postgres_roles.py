"""lamina_app is a role of the whole PostgreSQL server, while the migration lock is per
database: stores on two databases of one server, starting at once, must both start."""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
from psycopg import sql

from lamina import Lamina
from tests.conftest import fast_settings
from tests.pg import require_postgres, reset_database


def _sibling(url: str, suffix: str) -> str:
    """A database beside ``url``'s, created with pgvector if it is missing."""
    parts = urlsplit(url)
    name = f"{parts.path.lstrip('/')}_{suffix}"
    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    sibling = parts._replace(path=f"/{name}").geturl()
    reset_database(sibling)
    return sibling


def _members(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid "
            "JOIN pg_roles u ON u.oid = m.member "
            "WHERE r.rolname = 'lamina_app' AND u.rolname = current_user"
        ).fetchone()
    assert row is not None
    return int(row[0])


def _start_together(urls: list[str], data: Path) -> tuple[list[BaseException], list[int]]:
    """Open a store on each database at the same moment, add one memory to each; the
    errors raised and each store's count of user memories."""
    barrier = threading.Barrier(len(urls))
    errors: list[BaseException] = []
    counts: list[int] = []

    def open_store(i: int, db: str) -> None:
        try:
            settings = fast_settings(data / str(i), database_url=db)
            barrier.wait(10)
            with Lamina(settings) as ms:
                ms.memory.add(f"store {i}", layer="user", user_id="u")
                counts.append(ms.memory.count_by_layer().get("user", 0))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store, args=(i, db)) for i, db in enumerate(urls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return errors, counts


def test_stores_on_two_databases_of_one_server_start_at_once(tmp_path: Path) -> None:
    url = require_postgres()
    urls = [_sibling(url, "roles_a"), _sibling(url, "roles_b")]
    for round_ in range(4):
        # The connecting user (a superuser here) needs no membership to act as
        # lamina_app, so taking it away hurts no other store; each store's first
        # migration grants it again, both at the same moment.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET client_min_messages = warning")
            conn.execute("REVOKE lamina_app FROM CURRENT_USER")
        for each in urls:
            reset_database(each)
        assert _start_together(urls, tmp_path / str(round_)) == ([], [1, 1])
        assert _members(url) == 1
