"""The PostgreSQL the tests use: LAMINA_TEST_POSTGRES_URL (scripts/test sets it from
scripts/pg-setup). Without it PostgreSQL tests are skipped, unless LAMINA_REQUIRE_POSTGRES
is set (as in CI), when they fail.

Under pytest-xdist each worker has a database of its own, beside the configured one and
named after it and the worker (``lamina_test`` → ``lamina_test_gw0``, ``lamina_test_gw1``…),
created with pgvector on first use: a test empties its database's public schema, which
must not pull the rows from under a test on another worker."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
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
