"""The PostgreSQL the tests use: LAMINA_TEST_POSTGRES_URL (scripts/test sets it from
scripts/pg-setup). Without it PostgreSQL tests are skipped, unless LAMINA_REQUIRE_POSTGRES
is set (as in CI), when they fail.

Under pytest-xdist each worker has a database of its own, beside the configured one and
named after it and the worker (``lamina_test`` → ``lamina_test_gw0``, ``lamina_test_gw1``…),
created with pgvector on first use: a test empties its database's public schema, which
must not pull the rows from under a test on another worker."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from psycopg import sql

CONFIGURED_URL = os.environ.get("LAMINA_TEST_POSTGRES_URL", "")
REQUIRED = bool(os.environ.get("LAMINA_REQUIRE_POSTGRES"))


def worker_url(url: str, worker: str) -> str:
    """``url`` with its database name suffixed by the xdist ``worker`` id (none: unchanged)."""
    if not url or not worker:
        return url
    parts = urlsplit(url)
    return parts._replace(path=f"{parts.path.rstrip('/')}_{worker}").geturl()


#: This process's database: the configured one, or under xdist the worker's own.
PG_URL = worker_url(CONFIGURED_URL, os.environ.get("PYTEST_XDIST_WORKER", ""))


@cache
def _create_worker_database() -> None:
    """The worker's database, created (from the configured one's server) if it is missing."""
    if PG_URL == CONFIGURED_URL:
        return
    name = urlsplit(PG_URL).path.lstrip("/")
    with psycopg.connect(CONFIGURED_URL, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if found.fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


def require_postgres() -> str:
    if not PG_URL:
        if REQUIRED:
            pytest.fail("LAMINA_TEST_POSTGRES_URL is not set (run scripts/pg-setup)")
        pytest.skip("no PostgreSQL configured: set LAMINA_TEST_POSTGRES_URL")
    _create_worker_database()
    return PG_URL


def reset_database(url: str) -> None:
    """An empty public schema with pgvector: every test starts from nothing."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("DROP SCHEMA IF EXISTS public CASCADE")
        conn.execute("CREATE SCHEMA public")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")


#: The schema's shape, read from the catalogs: tables (kind, persistence, owner, grants,
#: options) and their columns (types, storage, defaults), indexes, constraints, functions,
#: triggers, row-level policies, types, the schema's grants, extensions and the migrations
#: recorded. Two schemas of the same shape are the same to a store. Not part of it: the
#: planner's column statistics, which TRUNCATE keeps (plans may differ from a fresh schema's,
#: never results), and role memberships (the tests connect as a superuser).
_SHAPE = """
SELECT md5(string_agg(x, '|' ORDER BY x)) FROM (
  SELECT 'c ' || c.relname || ' ' || c.relkind::text || ' ' || c.relpersistence::text || ' '
         || c.relrowsecurity || ' ' || c.relforcerowsecurity || ' ' || c.relowner::regrole
         || ' ' || coalesce(c.relacl::text, '') || ' ' || coalesce(c.reloptions::text, '') AS x
    FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'a ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
         || ' ' || a.attnotnull || ' ' || a.attstorage::text || ' '
         || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'i ' || pg_get_indexdef(i.indexrelid) || ' ' || i.indisvalid FROM pg_index i
    JOIN pg_class c ON c.oid = i.indrelid WHERE c.relnamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'k ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
   WHERE connamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'f ' || proname || ' ' || md5(prosrc) || ' ' || coalesce(proacl::text, '')
    FROM pg_proc WHERE pronamespace = 'public'::regnamespace
  UNION ALL
  SELECT 't ' || tgname || ' ' || tgenabled::text
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
  UNION ALL
  SELECT 'p ' || polname || ' ' || coalesce(pg_get_expr(polqual, polrelid), '')
    FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
   WHERE c.relnamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'y ' || typname FROM pg_type WHERE typnamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'n ' || coalesce(nspacl::text, '') FROM pg_namespace WHERE nspname = 'public'
  UNION ALL
  SELECT 'e ' || extname || ' ' || extversion FROM pg_extension
  UNION ALL
  SELECT 'v ' || version FROM schema_migrations
) shape
"""

#: Each database's shape right after the store's migrations on an empty schema (``_made``).
_MADE: dict[str, str] = {}


def schema_shape(conn: psycopg.Connection[Any]) -> str | None:
    """The shape of the public schema (``_SHAPE``); None without a migrated schema."""
    found = conn.execute("SELECT to_regclass('public.schema_migrations')").fetchone()
    if found is None or found[0] is None:
        return None
    row = conn.execute(_SHAPE).fetchone()
    return None if row is None else str(row[0])


def _made(url: str) -> str:
    """The shape the store's migrations give an empty schema, with the local model's
    dimensions (what every test using the default embedder opens): made once a database."""
    if url not in _MADE:
        from lamina.embeddings.local import LocalEmbedder
        from lamina.store.postgres import PostgresStore

        reset_database(url)
        store = PostgresStore(url, LocalEmbedder(), pool_min=1, pool_max=1)

        async def open_and_close() -> None:
            await store.initialize()
            await store.shutdown()

        # On a thread of its own: an async test may be calling from its event loop.
        opener = threading.Thread(target=asyncio.run, args=(open_and_close(),))
        opener.start()
        opener.join()
        with psycopg.connect(url, autocommit=True) as conn:
            shape = schema_shape(conn)
        assert shape is not None
        _MADE[url] = shape
    return _MADE[url]


def empty_database(url: str) -> None:
    """What ``reset_database`` and a store's first start make, for tests that open stores
    with the default embedder and the current schema: when the schema has the very shape
    the migrations give an empty one (``_SHAPE``), its tables are emptied and its sequences
    restarted, a tenth of the work of dropping it and migrating again; otherwise (another
    test changed the schema, migrated it to an older version or to other dimensions) it is
    dropped as ``reset_database`` drops it, and the store migrates it on start."""
    made = _made(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        if schema_shape(conn) != made:
            conn.close()
            reset_database(url)
            return
        with conn.transaction():
            tables = [
                sql.Identifier(name)
                for (name,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                    "AND tablename <> 'schema_migrations'"
                ).fetchall()
            ]
            if tables:
                conn.execute(
                    sql.SQL("TRUNCATE {} RESTART IDENTITY").format(sql.SQL(", ").join(tables))
                )
            for (name,) in conn.execute(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"
            ).fetchall():
                conn.execute(sql.SQL("ALTER SEQUENCE {} RESTART").format(sql.Identifier(name)))


PG_BIN = Path("/usr/lib/postgresql/15/bin")
PG_SHARE = Path("/usr/share/postgresql/15")


@contextmanager
def server_without_pgvector() -> Iterator[str]:
    """A real, private PostgreSQL 15 server on 127.0.0.1 whose installation lacks pgvector.

    PostgreSQL finds its share directory relative to its own binary, so a copy of the server
    binaries beside a share tree that links every extension but ``vector`` is a complete
    server without the extension, without touching the system installation. Runs the server
    as the ``postgres`` user (PostgreSQL refuses root)."""
    runuser = shutil.which("runuser")
    if not (PG_BIN / "postgres").is_file() or runuser is None or os.geteuid() != 0:
        if REQUIRED:
            pytest.fail("PostgreSQL 15 binaries, runuser and root are needed for this test")
        pytest.skip("needs the PostgreSQL 15 binaries, runuser and root")
    root = Path(tempfile.mkdtemp(prefix="lamina-novec-"))
    try:
        root.chmod(0o755)
        bindir = root / "lib/postgresql/15/bin"
        bindir.mkdir(parents=True)
        for name in ("postgres", "initdb", "pg_ctl"):
            shutil.copy2(PG_BIN / name, bindir / name)
        (root / "lib/postgresql/15/lib").symlink_to(PG_BIN.parent / "lib")
        share = root / "share/postgresql/15"
        (share / "extension").mkdir(parents=True)
        for entry in PG_SHARE.iterdir():
            if entry.name != "extension":
                (share / entry.name).symlink_to(entry)
        for entry in (PG_SHARE / "extension").iterdir():
            if not entry.name.startswith("vector"):
                (share / "extension" / entry.name).symlink_to(entry)
        data = root / "data"
        data.mkdir()
        shutil.chown(data, "postgres")
        as_postgres = [runuser, "-u", "postgres", "--"]
        subprocess.run(
            [
                *as_postgres,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "postgres",
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1"
        log = str(data / "server.log")
        start = ["-D", str(data), "-o", options, "-l", log, "-w", "-t", "60", "start"]
        subprocess.run(
            [*as_postgres, str(bindir / "pg_ctl"), *start],
            check=True,
            capture_output=True,
            timeout=90,
        )
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                [*as_postgres, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
